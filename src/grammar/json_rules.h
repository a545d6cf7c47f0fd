// Internal to the schema converter: the shared JSON rules (one each per prefix, added on first
// use) and exact rules for integer ranges.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace glm::grammar::detail {

inline Expr lit(std::string_view s) { return Expr::literal(s); }
inline Expr cls(std::vector<CharRange> r, bool neg = false) {
  return Expr::chars(std::move(r), neg);
}
inline Expr seq(std::vector<Expr> v) { return Expr::seq(std::move(v)); }
inline Expr alt(std::vector<Expr> v) { return Expr::alt(std::move(v)); }
inline Expr digit() { return cls({{'0', '9'}}); }

// "prefix-name", or "name" when the prefix is empty.
std::string join_name(std::string_view prefix, std::string_view name);

// Decimal integers in [lo, hi] (either bound may be absent), no leading zeros, no "-0", at
// most 16 digits like the plain integer rule.
Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

class JsonRules {
 public:
  // `python`: values as Python literals (True, False, None; no "\/" escape), for ChatGLM3's
  // tool_call(...) arguments; give such rules their own prefix.
  JsonRules(GrammarBuilder* b, std::string_view prefix, bool python = false);
  // A reference to rule `what`: "ws", "char", "string", "integer", "number", "boolean", "null",
  // "value", "object", "array" (any JSON), "date", "time", "date-time", "uuid" (string bodies).
  // Named prefix-what; an existing rule of that name is reused.
  Expr get(const std::string& what);

 private:
  Expr body(const std::string& what);

  GrammarBuilder* b_;
  std::string prefix_;
  bool python_ = false;
  std::set<std::string> building_;  // rules whose bodies are being built (they recurse)
};

}  // namespace glm::grammar::detail
