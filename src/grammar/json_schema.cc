// JSON Schema subset -> grammar rules. See json_schema.h and docs/grammar.md.
#include "grammar/json_schema.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "core/check.h"

namespace glm::grammar {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxCount = 10000;  // largest minItems/maxItems/minLength/maxLength accepted

Expr lit(std::string_view s) { return Expr::literal(s); }
Expr cls(std::vector<CharRange> r, bool neg = false) { return Expr::chars(std::move(r), neg); }
Expr seq(std::vector<Expr> v) { return Expr::seq(std::move(v)); }
Expr alt(std::vector<Expr> v) { return Expr::alt(std::move(v)); }
Expr digit() { return cls({{'0', '9'}}); }

constexpr uint64_t kMaxMagnitude = 9999999999999999;  // 16 digits, as the plain integer rule

// Digit strings of equal length between lo and hi (inclusive, lo <= hi).
Expr digits_between(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return lit("");
  const size_t r = lo.size() - 1;
  const bool lo_rest_min = lo.find_first_not_of('0', 1) == std::string::npos;
  const bool hi_rest_max = hi.find_first_not_of('9', 1) == std::string::npos;
  auto any = [&](char a, char b) {
    return seq({cls({{static_cast<uint32_t>(a), static_cast<uint32_t>(b)}}), Expr::repeat(digit(), static_cast<int>(r), static_cast<int>(r))});
  };
  if (lo_rest_min && hi_rest_max) return any(lo[0], hi[0]);
  if (lo[0] == hi[0]) {
    return seq({lit(lo.substr(0, 1)), digits_between(lo.substr(1), hi.substr(1))});
  }
  std::vector<Expr> alts;
  alts.push_back(seq({lit(lo.substr(0, 1)), digits_between(lo.substr(1), std::string(r, '9'))}));
  if (hi[0] - lo[0] > 1) alts.push_back(any(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)));
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

std::string join(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : std::string(prefix) + "-" + std::string(name);
}

// The shared pieces: one rule each, added on first use.
class Common {
 public:
  Common(GrammarBuilder* b, std::string_view prefix) : b_(b), prefix_(prefix) {}

  Expr get(const std::string& what) {
    std::string name = join(prefix_, what);
    if (!b_->has_rule(name) && !building_.count(name)) {
      building_.insert(name);  // the bodies refer to each other (value <-> object)
      Status s = b_->add_rule(name, body(what));
      GLM_CHECK(s.ok());
    }
    return Expr::ref(name);
  }

 private:
  Expr body(const std::string& what) {
    if (what == "ws") {
      // nothing | " " | "\n" [ \t]{0,kMaxIndent}
      return Expr::optional(alt({lit(" "), seq({lit("\n"), Expr::repeat(cls({{' ', ' '}, {'\t', '\t'}}), 0, kMaxIndent)})}));
    }
    if (what == "char") {
      Expr plain = cls({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true);
      Expr hex = cls({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
      Expr esc = seq({lit("\\"), alt({cls({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'},
                                           {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                      seq({lit("u"), Expr::repeat(hex, 4, 4)})})});
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
    if (what == "boolean") return alt({lit("true"), lit("false")});
    if (what == "null") return lit("null");
    if (what == "value") {
      return alt({get("object"), get("array"), get("string"), get("number"), get("boolean"),
                  get("null")});
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
      Expr d30 = alt({seq({lit("0"), cls({{'1', '9'}})}), seq({cls({{'1', '2'}}), digit()}),
                      lit("30")});
      Expr d28 = alt({seq({lit("0"), cls({{'1', '9'}})}), seq({lit("1"), digit()}),
                      seq({lit("2"), cls({{'0', '8'}})})});
      // February stops at 28: a grammar cannot tell leap years cheaply, and never producing
      // the 29th keeps every output valid.
      Expr md = alt({seq({alt({seq({lit("0"), cls({{'1', '1'}, {'3', '3'}, {'5', '5'}, {'7', '8'}})}),
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

  GrammarBuilder* b_;
  std::string prefix_;
  std::set<std::string> building_;
};

const std::set<std::string>& annotations() {
  static const std::set<std::string> s = {"title", "description", "default", "examples",
                                          "$schema", "$id", "$comment", "deprecated",
                                          "readOnly", "writeOnly", "$defs", "definitions"};
  return s;
}
const std::set<std::string>& supported() {
  static const std::set<std::string> s = {
      "type", "enum", "const", "anyOf", "$ref", "properties", "required",
      "additionalProperties", "items", "minItems", "maxItems", "minLength", "maxLength",
      "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return s;
}

bool has_type(const json& v, const std::string& t) {
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
  }
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  return false;
}

std::string escape_pointer_token(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class Converter {
 public:
  Converter(GrammarBuilder* b, const json& root, std::string_view prefix)
      : b_(b), root_(root), prefix_(prefix), common_(b, prefix) {}

  StatusOr<Expr> convert(const json& s, const std::string& ptr) {
    if (++depth_ > 64) return error(ptr, "schema nested too deeply (over 64 levels)");
    auto r = convert_inner(s, ptr);
    --depth_;
    return r;
  }

 private:
  // A rule name unused in the builder and not reserved by a reference still being converted.
  std::string fresh(const std::string& base) {
    std::string name = b_->fresh_name(base);
    for (int i = 2; reserved_.count(name); ++i) name = b_->fresh_name(base + "-" + std::to_string(i));
    reserved_.insert(name);
    return name;
  }

  // One line whatever the schema's keys hold: control characters as \xHH.
  static Status error(const std::string& ptr, const std::string& what) {
    std::string msg = "#" + ptr + ": " + what, out;
    for (char c : msg) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7F) {
        const char* hex = "0123456789ABCDEF";
        out += "\\x";
        out += hex[u >> 4];
        out += hex[u & 15];
      } else {
        out += c;
      }
    }
    return invalid_argument(out);
  }

  StatusOr<Expr> convert_inner(const json& s, const std::string& ptr) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return common_.get("value");
      return error(ptr, "the schema 'false' matches nothing");
    }
    if (!s.is_object()) return error(ptr, "a schema must be an object or a boolean");
    size_t n_constraints = 0;
    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key)) continue;
      if (!supported().count(key)) return error(ptr, "keyword '" + key + "' is not supported");
      ++n_constraints;
    }
    if (s.contains("$ref")) {
      if (n_constraints > 1) return error(ptr, "'$ref' with sibling keywords is not supported");
      return convert_ref(s["$ref"], ptr + "/$ref");
    }
    if (s.contains("anyOf")) {
      if (n_constraints > 1) return error(ptr, "'anyOf' with sibling keywords is not supported");
      const json& list = s["anyOf"];
      if (!list.is_array() || list.empty()) return error(ptr + "/anyOf", "must be a non-empty array");
      std::vector<Expr> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        auto e = convert(list[i], ptr + "/anyOf/" + std::to_string(i));
        if (!e.ok()) return e.status();
        alts.push_back(std::move(*e));
      }
      return alt(std::move(alts));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& x : t) {
          if (!x.is_string()) return error(ptr + "/type", "must be a string or array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return error(ptr + "/type", "must be a string or a non-empty array of strings");
      }
      for (const std::string& t1 : types) {
        static const std::set<std::string> known = {"string", "number", "integer", "boolean",
                                                     "null", "object", "array"};
        if (!known.count(t1)) return error(ptr + "/type", "unknown type '" + t1 + "'");
      }
    }
    if (s.contains("const") || s.contains("enum")) {
      std::vector<json> values;
      if (s.contains("const")) values.push_back(s["const"]);
      if (s.contains("enum")) {
        if (!s["enum"].is_array() || s["enum"].empty()) {
          return error(ptr + "/enum", "must be a non-empty array");
        }
        if (s.contains("const")) return error(ptr, "'const' with 'enum' is not supported");
        for (const json& v : s["enum"]) values.push_back(v);
      }
      std::vector<Expr> alts;
      for (const json& v : values) {
        bool ok = types.empty();
        for (const std::string& t : types) ok = ok || has_type(v, t);
        // Compact serialization, UTF-8 kept as is: the only spelling produced.
        if (ok) alts.push_back(lit(v.dump()));
      }
      if (alts.empty()) return error(ptr, "no 'enum'/'const' value has the schema's type");
      return alt(std::move(alts));
    }
    if (types.empty()) {
      // No type: infer from the keywords, else any value.
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
        types.push_back("object");
      } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
        types.push_back("array");
      } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
        types.push_back("string");
      } else if (n_constraints == 0) {
        return common_.get("value");
      } else {
        return error(ptr, "keywords without a 'type' are not supported here");
      }
    }
    std::vector<Expr> alts;
    for (const std::string& t : types) {
      auto e = convert_typed(s, t, ptr);
      if (!e.ok()) return e.status();
      alts.push_back(std::move(*e));
    }
    return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
  }

  StatusOr<int> count(const json& s, const char* key, const std::string& ptr, int def) {
    if (!s.contains(key)) return def;
    const json& v = s[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      return error(ptr + "/" + key, "must be a non-negative integer");
    }
    if (v.get<uint64_t>() > static_cast<uint64_t>(kMaxCount)) {
      return error(ptr + "/" + key, "over " + std::to_string(kMaxCount) + " is not supported");
    }
    return static_cast<int>(v.get<uint64_t>());
  }

  StatusOr<Expr> convert_typed(const json& s, const std::string& t, const std::string& ptr) {
    auto only = [&](std::initializer_list<const char*> keys) -> Status {
      // Numeric bounds are only supported where the type handles them.
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        bool listed = false;
        for (const char* x : keys) listed = listed || std::string(x) == k;
        if (s.contains(k) && !listed) return error(ptr, std::string("keyword '") + k + "' is not supported for type '" + t + "'");
      }
      return Status::Ok();
    };
    if (t == "string") {
      GLM_RETURN_IF_ERROR(only({}));
      auto min = count(s, "minLength", ptr, 0);
      if (!min.ok()) return min.status();
      auto max = count(s, "maxLength", ptr, Expr::kUnbounded);
      if (!max.ok()) return max.status();
      if (*max != Expr::kUnbounded && *max < *min) return error(ptr, "maxLength < minLength");
      if (s.contains("format")) {
        if (!s["format"].is_string()) return error(ptr + "/format", "must be a string");
        std::string f = s["format"].get<std::string>();
        if (f != "date" && f != "time" && f != "date-time" && f != "uuid") {
          return error(ptr + "/format", "format '" + f + "' is not supported (date, time, date-time, uuid are)");
        }
        if (s.contains("minLength") || s.contains("maxLength")) {
          return error(ptr, "'format' with 'minLength'/'maxLength' is not supported");
        }
        return seq({lit("\""), common_.get(f), lit("\"")});
      }
      if (*min == 0 && *max == Expr::kUnbounded) return common_.get("string");
      return seq({lit("\""), Expr::repeat(common_.get("char"), *min, *max), lit("\"")});
    }
    if (t == "integer") {
      GLM_RETURN_IF_ERROR(only({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}));
      std::optional<int64_t> lo, hi;
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (!s.contains(k)) continue;
        const json& v = s[k];
        if (!v.is_number()) return error(ptr + "/" + k, "must be a number");
        const double x = v.get<double>();
        if (!(std::fabs(x) < 9e15)) return error(ptr + "/" + k, "bound out of range");
        const std::string key = k;
        int64_t b;
        if (key == "minimum") b = static_cast<int64_t>(std::ceil(x));
        else if (key == "maximum") b = static_cast<int64_t>(std::floor(x));
        else if (key == "exclusiveMinimum") b = static_cast<int64_t>(std::floor(x)) + 1;
        else b = static_cast<int64_t>(std::ceil(x)) - 1;
        if (key == "minimum" || key == "exclusiveMinimum") lo = lo ? std::max(*lo, b) : b;
        else hi = hi ? std::min(*hi, b) : b;
      }
      if (!lo && !hi) return common_.get("integer");
      if (lo && hi && *lo > *hi) return error(ptr, "no integer lies within the bounds");
      return integer_range(lo, hi);
    }
    if (t == "number") {
      GLM_RETURN_IF_ERROR(only({}));
      return common_.get("number");
    }
    if (t == "boolean") {
      GLM_RETURN_IF_ERROR(only({}));
      return common_.get("boolean");
    }
    if (t == "null") {
      GLM_RETURN_IF_ERROR(only({}));
      return common_.get("null");
    }
    GLM_RETURN_IF_ERROR(only({}));
    if (t == "array") return convert_array(s, ptr);
    return convert_object(s, ptr);
  }

  StatusOr<Expr> convert_array(const json& s, const std::string& ptr) {
    auto min = count(s, "minItems", ptr, 0);
    if (!min.ok()) return min.status();
    auto max = count(s, "maxItems", ptr, Expr::kUnbounded);
    if (!max.ok()) return max.status();
    if (*max != Expr::kUnbounded && *max < *min) return error(ptr, "maxItems < minItems");
    Expr item = common_.get("value");
    if (s.contains("items")) {
      auto e = convert(s["items"], ptr + "/items");
      if (!e.ok()) return e.status();
      item = std::move(*e);
    }
    Expr ws = common_.get("ws");
    if (*max == 0) return seq({lit("["), ws, lit("]")});
    Expr one = seq({item, ws});
    Expr more = Expr::repeat(seq({lit(","), ws, one}), *min > 0 ? *min - 1 : 0,
                             *max == Expr::kUnbounded ? Expr::kUnbounded : *max - 1);
    Expr body = seq({one, more});
    if (*min == 0) body = Expr::optional(std::move(body));
    std::string name = fresh(join(prefix_, "array"));
    GLM_RETURN_IF_ERROR(b_->add_rule(name, seq({lit("["), ws, std::move(body), lit("]")})));
    return Expr::ref(name);
  }

  StatusOr<Expr> convert_object(const json& s, const std::string& ptr) {
    bool extra_false = false;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        extra_false = !a.get<bool>();
      } else if (s.contains("properties")) {
        return error(ptr + "/additionalProperties",
                     "a schema for additional properties next to 'properties' is not supported");
      } else {
        // A map: any keys, every value valid against the schema.
        if (s.contains("required") && !s["required"].empty()) {
          return error(ptr + "/required", "'required' without 'properties' is not supported");
        }
        auto v = convert(a, ptr + "/additionalProperties");
        if (!v.ok()) return v.status();
        Expr ws = common_.get("ws");
        Expr kv = seq({common_.get("string"), ws, lit(":"), ws, std::move(*v), ws});
        Expr more = Expr::star(seq({lit(","), ws, kv}));
        std::string name = fresh(join(prefix_, "map"));
        GLM_RETURN_IF_ERROR(b_->add_rule(name, seq({lit("{"), ws, Expr::optional(seq({kv, more})), lit("}")})));
        return Expr::ref(name);
      }
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return error(ptr + "/required", "must be an array of strings");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return error(ptr + "/required", "must be an array of strings");
        required.insert(r.get<std::string>());
      }
    }
    if (!s.contains("properties")) {
      if (!required.empty()) {
        return error(ptr + "/required", "'required' without 'properties' is not supported");
      }
      // No properties listed: any object, unless extra properties are forbidden.
      if (extra_false) return seq({lit("{"), common_.get("ws"), lit("}")});
      return common_.get("object");
    }
    const json& props = s["properties"];
    if (!props.is_object()) return error(ptr + "/properties", "must be an object");
    for (const std::string& r : required) {
      if (!props.contains(r)) {
        return error(ptr + "/required", "required property '" + r + "' is not in 'properties'");
      }
    }
    // kv[i] ::= "\"name\"" ws ":" ws value ws
    std::vector<Expr> kv;
    std::vector<bool> req;
    Expr ws = common_.get("ws");
    for (const auto& [name, sub] : props.items()) {
      auto v = convert(sub, ptr + "/properties/" + escape_pointer_token(name));
      if (!v.ok()) return v.status();
      kv.push_back(seq({lit(json(name).dump()), ws, lit(":"), ws, std::move(*v), ws}));
      req.push_back(required.count(name) != 0);
    }
    // Properties in schema order; optional ones may be skipped. first(i): properties i.. with
    // none written yet; rest(i): properties i.. after at least one (so each needs a comma).
    const size_t n = kv.size();
    std::string base = fresh(join(prefix_, "obj"));
    std::vector<std::string> first(n + 1), rest(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      first[i] = base + "-f" + std::to_string(i);
      rest[i] = base + "-r" + std::to_string(i);
    }
    for (size_t k = n + 1; k-- > 0;) {
      if (k == n) {
        GLM_RETURN_IF_ERROR(b_->add_rule(first[k], lit("")));
        GLM_RETURN_IF_ERROR(b_->add_rule(rest[k], lit("")));
        continue;
      }
      Expr f = seq({kv[k], Expr::ref(rest[k + 1])});
      Expr r = seq({lit(","), ws, kv[k], Expr::ref(rest[k + 1])});
      if (!req[k]) {
        f = alt({std::move(f), Expr::ref(first[k + 1])});
        r = alt({std::move(r), Expr::ref(rest[k + 1])});
      }
      GLM_RETURN_IF_ERROR(b_->add_rule(first[k], std::move(f)));
      GLM_RETURN_IF_ERROR(b_->add_rule(rest[k], std::move(r)));
    }
    GLM_RETURN_IF_ERROR(b_->add_rule(base, seq({lit("{"), ws, Expr::ref(first[0]), lit("}")})));
    return Expr::ref(base);
  }

  StatusOr<Expr> convert_ref(const json& ref, const std::string& ptr) {
    if (!ref.is_string()) return error(ptr, "must be a string");
    std::string target = ref.get<std::string>();
    if (target.rfind("#", 0) != 0) {
      return error(ptr, "only local references (#/$defs/..., #/definitions/...) are supported");
    }
    auto it = refs_.find(target);
    if (it != refs_.end()) return Expr::ref(it->second);
    std::string pointer = target.substr(1);
    const json* node = nullptr;
    try {
      node = &root_.at(json::json_pointer(pointer));
    } catch (const std::exception&) {
      return error(ptr, "reference '" + target + "' does not resolve");
    }
    std::string last = pointer.substr(pointer.rfind('/') + 1);
    std::string name = fresh(join(prefix_, last.empty() ? "ref" : "def-" + last));
    refs_[target] = name;
    // Reserve the name now (recursive schemas refer to it while converting).
    auto e = convert(*node, pointer);
    if (!e.ok()) return e.status();
    GLM_RETURN_IF_ERROR(b_->add_rule(name, std::move(*e)));
    return Expr::ref(name);
  }

  GrammarBuilder* b_;
  const json& root_;
  std::string prefix_;
  Common common_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> reserved_;
  int depth_ = 0;
};

}  // namespace

StatusOr<Expr> add_json_schema(GrammarBuilder* b, const json& schema, std::string_view prefix) {
  Converter c(b, schema, prefix);
  auto e = c.convert(schema, "");
  if (!e.ok()) return e.status();
  std::string name = b->fresh_name(join(prefix, "value"));
  GLM_RETURN_IF_ERROR(b->add_rule(name, std::move(*e)));
  return Expr::ref(name);
}

Expr add_json_any_value(GrammarBuilder* b, std::string_view prefix) {
  return Common(b, prefix).get("value");
}
Expr add_json_any_object(GrammarBuilder* b, std::string_view prefix) {
  return Common(b, prefix).get("object");
}

StatusOr<Grammar> json_schema_to_grammar(const json& schema) {
  GrammarBuilder b;
  auto v = add_json_schema(&b, schema, "");
  if (!v.ok()) return v.status();
  GLM_RETURN_IF_ERROR(b.add_rule("root", seq({std::move(*v), Common(&b, "").get("ws")})));
  return b.build("root");
}

Grammar json_object_grammar() {
  GrammarBuilder b;
  Expr obj = add_json_any_object(&b, "");
  Status s = b.add_rule("root", seq({std::move(obj), Common(&b, "").get("ws")}));
  GLM_CHECK(s.ok());
  auto g = b.build("root");
  GLM_CHECK(g.ok());
  return std::move(g).value();
}

}  // namespace glm::grammar
