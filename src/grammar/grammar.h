// Grammars for constrained decoding: an expression builder, a GBNF parser (llama.cpp's syntax)
// and the compiled, immutable Grammar that a Matcher (matcher.h) runs.
//
//   GrammarBuilder b;
//   GLM_RETURN_IF_ERROR(b.add_gbnf(R"(digits ::= [0-9]+)"));
//   StatusOr<Expr> args = add_json_schema(b, schema, "args");        // json_schema.h
//   b.add_rule("root", Expr::seq({Expr::literal("get_weather\n"), *args}));
//   StatusOr<Grammar> g = b.build();                                 // root rule "root"
//
// Terminals are Unicode code points; literals and GBNF text are UTF-8. Repetitions become
// right-recursive helper rules; left recursion is refused at build() time, as are rules that can
// never finish (empty language) and undefined references.
// Thread-safety: Expr and GrammarBuilder are plain values (one thread at a time); Grammar is
// immutable and cheap to copy (shared), safe to use from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace glm::grammar {

struct CharRange {
  uint32_t lo = 0;  // inclusive code points
  uint32_t hi = 0;
};

// One grammar expression. Value type; copying copies the tree.
class Expr {
 public:
  enum class Kind { kLiteral, kChars, kRef, kSeq, kAlt, kRepeat };
  static constexpr int kUnbounded = -1;

  static Expr literal(std::string_view utf8);  // "" = the empty string
  // A character class; `negated` = any code point outside the ranges. Empty + negated = any.
  static Expr chars(std::vector<CharRange> ranges, bool negated = false);
  static Expr any_char() { return chars({}, true); }
  static Expr ref(std::string rule_name);
  static Expr seq(std::vector<Expr> items);
  static Expr alt(std::vector<Expr> items);
  // `item` repeated min..max times (max = kUnbounded for no upper bound).
  static Expr repeat(Expr item, int min, int max);
  static Expr optional(Expr item) { return repeat(std::move(item), 0, 1); }
  static Expr star(Expr item) { return repeat(std::move(item), 0, kUnbounded); }
  static Expr plus(Expr item) { return repeat(std::move(item), 1, kUnbounded); }

  Kind kind() const { return kind_; }
  const std::string& text() const { return text_; }  // literal bytes or rule name
  const std::vector<CharRange>& ranges() const { return ranges_; }
  bool negated() const { return negated_; }
  const std::vector<Expr>& items() const { return items_; }
  int min() const { return min_; }
  int max() const { return max_; }
  // Where a reference was written (GBNF line/column, or a JSON pointer), for error messages.
  const std::string& origin() const { return origin_; }
  Expr&& with_origin(std::string origin) && {
    origin_ = std::move(origin);
    return std::move(*this);
  }

 private:
  Kind kind_ = Kind::kLiteral;
  std::string text_;
  std::vector<CharRange> ranges_;
  bool negated_ = false;
  std::vector<Expr> items_;
  int min_ = 0;
  int max_ = 0;
  std::string origin_;
};

namespace detail {
struct Program;  // compiled tables, program.h
}

// A compiled grammar: flattened rules ready for matching. Immutable, shared on copy.
class Grammar {
 public:
  // The rules in GBNF (helper rules for groups and repetitions included), for debugging and
  // docs; parse_gbnf(to_gbnf()) accepts the same language.
  std::string to_gbnf() const;
  size_t n_rules() const;
  const detail::Program& program() const { return *program_; }

 private:
  friend class GrammarBuilder;
  std::shared_ptr<const detail::Program> program_;
};

// Collects named rules; build() checks and compiles them. Rule names: [A-Za-z0-9_-]+.
class GrammarBuilder {
 public:
  GrammarBuilder();
  ~GrammarBuilder();
  GrammarBuilder(GrammarBuilder&&) noexcept;
  GrammarBuilder& operator=(GrammarBuilder&&) noexcept;

  // Defines a rule. Error if the name is taken or malformed. `origin` (e.g. "line 3, column 1")
  // is quoted by error messages about the rule.
  Status add_rule(const std::string& name, Expr body, std::string origin = "");
  bool has_rule(const std::string& name) const;
  // A name not used yet, derived from `base` ("item", "item-2", ...), sanitized to a rule name.
  std::string fresh_name(std::string_view base) const;
  // Parses GBNF text and adds its rules (names must not clash with existing ones).
  // Errors: "line 3, column 14: ..." (see parse_gbnf); the builder may then hold some of the
  // text's rules, so discard it.
  Status add_gbnf(std::string_view text);

  // Checks (undefined rules, left recursion, rules that can never finish, an empty grammar)
  // and compiles with `root` as the start rule. Cost: linear in the grammar size (repetition
  // bounds count: x{0,500} makes 500 helper rules). The builder may be reused afterwards.
  StatusOr<Grammar> build(const std::string& root = "root") const;

 private:
  struct Rules;
  std::unique_ptr<Rules> rules_;
};

// Parses a whole GBNF grammar whose start rule is `root`.
StatusOr<Grammar> parse_gbnf(std::string_view text);

}  // namespace glm::grammar
