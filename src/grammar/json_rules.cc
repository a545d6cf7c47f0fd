// The shared JSON pieces (whitespace, strings, numbers, formats, any value) and integer ranges.
#include "grammar/json_rules.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/check.h"
#include "grammar/json_schema.h"  // kMaxIndent

namespace glm::grammar::detail {

namespace {

// The 4 hex digits after "\u": any code unit but a surrogate, or a high surrogate followed by
// "\u" and a low one, so every escape decodes (a lone surrogate is not a character, and
// strict parsers such as nlohmann's refuse it).
Expr unicode_escape(const Expr& hex) {
  Expr hex2 = Expr::repeat(hex, 2, 2);
  Expr not_d = cls({{'0', '9'}, {'a', 'c'}, {'A', 'C'}, {'e', 'f'}, {'E', 'F'}});
  Expr d = cls({{'d', 'd'}, {'D', 'D'}});
  Expr bmp = Expr::alt(
      {Expr::seq({not_d, Expr::repeat(hex, 3, 3)}), Expr::seq({d, cls({{'0', '7'}}), hex2})});
  Expr pair = Expr::seq({d, cls({{'8', '9'}, {'a', 'b'}, {'A', 'B'}}), hex2, lit("\\u"), d,
                         cls({{'c', 'f'}, {'C', 'F'}}), hex2});
  return Expr::alt({bmp, pair});
}

constexpr uint64_t kMaxMagnitude = 9999999999999999;  // 16 digits, as the plain integer rule

// Digit strings of equal length between lo and hi (inclusive, lo <= hi).
Expr digits_between(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return lit("");
  const size_t r = lo.size() - 1;
  const bool lo_rest_min = lo.find_first_not_of('0', 1) == std::string::npos;
  const bool hi_rest_max = hi.find_first_not_of('9', 1) == std::string::npos;
  auto any = [&](char a, char b) {
    return seq({cls({{static_cast<uint32_t>(a), static_cast<uint32_t>(b)}}),
                Expr::repeat(digit(), static_cast<int>(r), static_cast<int>(r))});
  };
  if (lo_rest_min && hi_rest_max) return any(lo[0], hi[0]);
  if (lo[0] == hi[0]) {
    return seq({lit(lo.substr(0, 1)), digits_between(lo.substr(1), hi.substr(1))});
  }
  std::vector<Expr> alts;
  alts.push_back(seq({lit(lo.substr(0, 1)), digits_between(lo.substr(1), std::string(r, '9'))}));
  if (hi[0] - lo[0] > 1)
    alts.push_back(any(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)));
  alts.push_back(seq({lit(hi.substr(0, 1)), digits_between(std::string(r, '0'), hi.substr(1))}));
  return alt(std::move(alts));
}

// Decimal numbers without leading zeros in [a, b], a <= b <= kMaxMagnitude.
Expr magnitude_range(uint64_t a, uint64_t b) {
  std::vector<Expr> alts;
  const std::string sa = std::to_string(a), sb = std::to_string(b);
  for (size_t d = sa.size(); d <= sb.size(); ++d) {
    std::string lo = d == sa.size() ? sa : "1" + std::string(d - 1, '0');
    std::string hi = d == sb.size() ? sb : std::string(d, '9');
    alts.push_back(digits_between(lo, hi));
  }
  return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
}

}  // namespace

// Integers in [lo, hi] (either may be absent); at most 16 digits like the plain rule.
Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<Expr> alts;
  auto mag = [](int64_t v) { return std::min<uint64_t>(static_cast<uint64_t>(v), kMaxMagnitude); };
  if (!hi || *hi >= 0) {  // the non-negative part
    uint64_t a = lo && *lo > 0 ? mag(*lo) : 0;
    uint64_t b = hi ? mag(*hi) : kMaxMagnitude;
    if (a <= b) alts.push_back(magnitude_range(a, b));
  }
  if (!lo || *lo < 0) {  // the negative part: "-" and a magnitude
    uint64_t a = hi && *hi < 0 ? (*hi == INT64_MIN ? kMaxMagnitude : mag(-*hi)) : 1;
    uint64_t b = lo ? (*lo == INT64_MIN ? kMaxMagnitude : mag(-*lo)) : kMaxMagnitude;
    if (a <= b) alts.push_back(seq({lit("-"), magnitude_range(a, b)}));
  }
  return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
}

std::string join_name(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : std::string(prefix) + "-" + std::string(name);
}

JsonRules::JsonRules(GrammarBuilder* b, std::string_view prefix, bool python)
    : b_(b), prefix_(prefix), python_(python) {}

Expr JsonRules::get(const std::string& what) {
  std::string name = join_name(prefix_, what);
  if (!b_->has_rule(name) && !building_.count(name)) {
    building_.insert(name);  // the bodies refer to each other (value <-> object)
    Status s = b_->add_rule(name, body(what));
    GLM_CHECK(s.ok());
  }
  return Expr::ref(name);
}

Expr JsonRules::body(const std::string& what) {
  if (what == "ws") {
    // nothing | " " | "\n" [ \t]{0,kMaxIndent}
    return Expr::optional(
        alt({lit(" "),
             seq({lit("\n"), Expr::repeat(cls({{' ', ' '}, {'\t', '\t'}}), 0, kMaxIndent)})}));
  }
  if (what == "char") {
    Expr plain = cls({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true);
    Expr hex = cls({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
    std::vector<CharRange> escapes = {{'"', '"'}, {'\\', '\\'}, {'b', 'b'}, {'f', 'f'},
                                      {'n', 'n'}, {'r', 'r'},   {'t', 't'}};
    // Python reads "\/" as two characters, and "\ud83d\ude00" as two lone surrogates: its
    // strings use neither escape (characters are written as themselves).
    if (python_) return alt({plain, seq({lit("\\"), cls(std::move(escapes))})});
    escapes.push_back({'/', '/'});
    Expr esc =
        seq({lit("\\"), alt({cls(std::move(escapes)), seq({lit("u"), unicode_escape(hex)})})});
    return alt({plain, esc});
  }
  if (what == "string") return seq({lit("\""), Expr::star(get("char")), lit("\"")});
  if (what == "integer") {
    return seq({Expr::optional(lit("-")),
                alt({lit("0"), seq({cls({{'1', '9'}}), Expr::repeat(digit(), 0, 15)})})});
  }
  if (what == "number") {
    return seq({get("integer"), Expr::optional(seq({lit("."), Expr::repeat(digit(), 1, 16)})),
                Expr::optional(seq({cls({{'e', 'e'}, {'E', 'E'}}),
                                    Expr::optional(cls({{'-', '-'}, {'+', '+'}})),
                                    Expr::repeat(digit(), 1, 2)}))});
  }
  if (what == "boolean")
    return python_ ? alt({lit("True"), lit("False")}) : alt({lit("true"), lit("false")});
  if (what == "null") return lit(python_ ? "None" : "null");
  if (what == "value") {
    return alt(
        {get("object"), get("array"), get("string"), get("number"), get("boolean"), get("null")});
  }
  if (what == "object") {
    Expr kv = seq({get("string"), get("ws"), lit(":"), get("ws"), get("value"), get("ws")});
    Expr more = Expr::star(seq({lit(","), get("ws"), kv}));
    return seq({lit("{"), get("ws"), Expr::optional(seq({kv, more})), lit("}")});
  }
  if (what == "array") {
    Expr item = seq({get("value"), get("ws")});
    Expr more = Expr::star(seq({lit(","), get("ws"), item}));
    return seq({lit("["), get("ws"), Expr::optional(seq({item, more})), lit("]")});
  }
  if (what == "date") {
    Expr d31 = alt({seq({lit("0"), cls({{'1', '9'}})}), seq({cls({{'1', '2'}}), digit()}),
                    seq({lit("3"), cls({{'0', '1'}})})});
    Expr d30 =
        alt({seq({lit("0"), cls({{'1', '9'}})}), seq({cls({{'1', '2'}}), digit()}), lit("30")});
    Expr d28 = alt({seq({lit("0"), cls({{'1', '9'}})}), seq({lit("1"), digit()}),
                    seq({lit("2"), cls({{'0', '8'}})})});
    // February stops at 28: a grammar cannot tell leap years cheaply, and never producing
    // the 29th keeps every output valid.
    Expr md =
        alt({seq({alt({seq({lit("0"), cls({{'1', '1'}, {'3', '3'}, {'5', '5'}, {'7', '8'}})}),
                       seq({lit("1"), cls({{'0', '0'}, {'2', '2'}})})}),
                  lit("-"), d31}),
             seq({alt({seq({lit("0"), cls({{'4', '4'}, {'6', '6'}, {'9', '9'}})}), lit("11")}),
                  lit("-"), d30}),
             seq({lit("02-"), d28})});
    return seq({Expr::repeat(digit(), 4, 4), lit("-"), md});
  }
  if (what == "time") {
    Expr hh = alt({seq({cls({{'0', '1'}}), digit()}), seq({lit("2"), cls({{'0', '3'}})})});
    Expr mm = seq({cls({{'0', '5'}}), digit()});
    Expr frac = Expr::optional(seq({lit("."), Expr::repeat(digit(), 1, 9)}));
    Expr tz = alt({lit("Z"), seq({cls({{'+', '+'}, {'-', '-'}}), hh, lit(":"), mm})});
    return seq({hh, lit(":"), mm, lit(":"), mm, frac, tz});
  }
  if (what == "date-time") return seq({get("date"), lit("T"), get("time")});
  if (what == "uuid") {
    Expr hex = cls({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
    auto h = [&](int n) { return Expr::repeat(hex, n, n); };
    return seq({h(8), lit("-"), h(4), lit("-"), h(4), lit("-"), h(4), lit("-"), h(12)});
  }
  GLM_CHECK(false && "unknown common rule");
  return lit("");
}

}  // namespace glm::grammar::detail
