// JSON Schema subset -> grammar rules. See json_schema.h and docs/grammar.md.
#include "grammar/json_schema.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "core/check.h"
#include "grammar/json_rules.h"

namespace glm::grammar {

namespace {

using json = nlohmann::ordered_json;
using detail::alt;
using detail::cls;
using detail::lit;
using detail::seq;

constexpr int kMaxCount = 10000;  // largest minItems/maxItems/minLength/maxLength accepted

const std::set<std::string>& annotations() {
  static const std::set<std::string> s = {"title",    "description", "default",  "examples",
                                          "$schema",  "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly",   "$defs",    "definitions"};
  return s;
}
const std::set<std::string>& supported() {
  static const std::set<std::string> s = {"type",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "$ref",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum"};
  return s;
}

bool has_type(const json& v, const std::string& t) {
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() &&
            v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
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
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// The only spelling of `v` the grammar produces: compact JSON (UTF-8 kept as is), or with
// `python` the Python literal (True, False, None).
std::string literal(const json& v, bool python) {
  if (!python) return v.dump();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + literal(v[i], true);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      out += (first ? "" : ", ") + json(k).dump() + ": " + literal(x, true);
      first = false;
    }
    return out + "}";
  }
  return v.dump();
}

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

class Converter {
 public:
  Converter(GrammarBuilder* b, const json& root, std::string_view prefix, bool python = false)
      : b_(b), root_(root), prefix_(prefix), python_(python), common_(b, prefix, python) {}

  // Python keyword arguments "k=v, k2=v2" (no parentheses) for an object schema.
  StatusOr<Expr> convert_kwargs(const json& s) {
    if (s.is_boolean() && s.get<bool>()) return any_kwargs();
    if (!s.is_object() || (s.contains("type") && s["type"] != "object")) {
      return error("", "a tool's parameters must be an object schema");
    }
    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key)) continue;
      if (key != "type" && key != "properties" && key != "required" &&
          key != "additionalProperties") {
        return error("", "keyword '" + key + "' is not supported for a tool's parameters");
      }
    }
    if (!s.contains("properties")) {
      const bool closed = s.contains("additionalProperties") && s["additionalProperties"] == false;
      if (closed) return lit("");
      return any_kwargs();
    }
    if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean()) {
      return error("/additionalProperties",
                   "a schema for additional properties next to 'properties' is not supported");
    }
    return convert_object(s, "", true);
  }

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
    for (int i = 2; reserved_.count(name); ++i)
      name = b_->fresh_name(base + "-" + std::to_string(i));
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
      if (!list.is_array() || list.empty())
        return error(ptr + "/anyOf", "must be a non-empty array");
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
                                                    "null",   "object", "array"};
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
        if (ok) alts.push_back(lit(literal(v, python_)));
      }
      if (alts.empty()) return error(ptr, "no 'enum'/'const' value has the schema's type");
      return alt(std::move(alts));
    }
    if (types.empty()) {
      // No type: infer from the keywords, else any value.
      if (s.contains("properties") || s.contains("required") ||
          s.contains("additionalProperties")) {
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
        if (s.contains(k) && !listed)
          return error(ptr,
                       std::string("keyword '") + k + "' is not supported for type '" + t + "'");
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
          return error(ptr + "/format",
                       "format '" + f + "' is not supported (date, time, date-time, uuid are)");
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
        if (key == "minimum")
          b = static_cast<int64_t>(std::ceil(x));
        else if (key == "maximum")
          b = static_cast<int64_t>(std::floor(x));
        else if (key == "exclusiveMinimum")
          b = static_cast<int64_t>(std::floor(x)) + 1;
        else
          b = static_cast<int64_t>(std::ceil(x)) - 1;
        if (key == "minimum" || key == "exclusiveMinimum")
          lo = lo ? std::max(*lo, b) : b;
        else
          hi = hi ? std::min(*hi, b) : b;
      }
      if (!lo && !hi) return common_.get("integer");
      if (lo && hi && *lo > *hi) return error(ptr, "no integer lies within the bounds");
      return detail::integer_range(lo, hi);
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
    std::string name = fresh(detail::join_name(prefix_, "array"));
    GLM_RETURN_IF_ERROR(b_->add_rule(name, seq({lit("["), ws, std::move(body), lit("]")})));
    return Expr::ref(name);
  }

  // kwargs ::= (ident "=" value ("," ws ident "=" value)*)?
  Expr any_kwargs() {
    Expr ws = common_.get("ws");
    Expr ident = seq({cls({{'a', 'z'}, {'A', 'Z'}, {'_', '_'}}),
                      Expr::star(cls({{'a', 'z'}, {'A', 'Z'}, {'_', '_'}, {'0', '9'}}))});
    Expr kv = seq({ident, lit("="), common_.get("value"), ws});
    return Expr::optional(seq({kv, Expr::star(seq({lit(","), ws, kv}))}));
  }

  // `kwargs`: the properties as Python keyword arguments (name=value, no braces).
  StatusOr<Expr> convert_object(const json& s, const std::string& ptr, bool kwargs = false) {
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
        std::string name = fresh(detail::join_name(prefix_, "map"));
        GLM_RETURN_IF_ERROR(
            b_->add_rule(name, seq({lit("{"), ws, Expr::optional(seq({kv, more})), lit("}")})));
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
      const std::string where = ptr + "/properties/" + escape_pointer_token(name);
      if (kwargs && !is_identifier(name)) {
        return error(where,
                     "is not a Python identifier (ChatGLM3 passes tool arguments as "
                     "keyword arguments)");
      }
      auto v = convert(sub, where);
      if (!v.ok()) return v.status();
      if (kwargs) {
        kv.push_back(seq({lit(name + "="), std::move(*v), ws}));
      } else {
        kv.push_back(seq({lit(json(name).dump()), ws, lit(":"), ws, std::move(*v), ws}));
      }
      req.push_back(required.count(name) != 0);
    }
    // Properties in schema order; optional ones may be skipped. first(i): properties i.. with
    // none written yet; rest(i): properties i.. after at least one (so each needs a comma).
    const size_t n = kv.size();
    std::string base = fresh(detail::join_name(prefix_, "obj"));
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
    if (kwargs) {
      GLM_RETURN_IF_ERROR(b_->add_rule(base, Expr::ref(first[0])));
    } else {
      GLM_RETURN_IF_ERROR(b_->add_rule(base, seq({lit("{"), ws, Expr::ref(first[0]), lit("}")})));
    }
    return Expr::ref(base);
  }

  StatusOr<Expr> convert_ref(const json& ref, const std::string& ptr) {
    if (!ref.is_string()) return error(ptr, "must be a string");
    std::string target = ref.get<std::string>();
    if (target.rfind('#', 0) != 0) {
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
    std::string name = fresh(detail::join_name(prefix_, last.empty() ? "ref" : "def-" + last));
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
  bool python_ = false;
  detail::JsonRules common_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> reserved_;
  int depth_ = 0;
};

}  // namespace

StatusOr<Expr> add_json_schema(GrammarBuilder* b, const json& schema, std::string_view prefix,
                               JsonDialect dialect) {
  Converter c(b, schema, prefix, dialect == JsonDialect::kPython);
  auto e = c.convert(schema, "");
  if (!e.ok()) return e.status();
  std::string name = b->fresh_name(detail::join_name(prefix, "value"));
  GLM_RETURN_IF_ERROR(b->add_rule(name, std::move(*e)));
  return Expr::ref(name);
}

StatusOr<Expr> add_python_kwargs(GrammarBuilder* b, const json& schema, std::string_view prefix) {
  Converter c(b, schema, prefix, true);
  auto e = c.convert_kwargs(schema);
  if (!e.ok()) return e.status();
  std::string name = b->fresh_name(detail::join_name(prefix, "kwargs"));
  GLM_RETURN_IF_ERROR(b->add_rule(name, std::move(*e)));
  return Expr::ref(name);
}

Expr add_json_any_value(GrammarBuilder* b, std::string_view prefix) {
  return detail::JsonRules(b, prefix).get("value");
}
Expr add_json_any_object(GrammarBuilder* b, std::string_view prefix) {
  return detail::JsonRules(b, prefix).get("object");
}

StatusOr<Grammar> json_schema_to_grammar(const json& schema) {
  GrammarBuilder b;
  auto v = add_json_schema(&b, schema, "");
  if (!v.ok()) return v.status();
  GLM_RETURN_IF_ERROR(
      b.add_rule("root", seq({std::move(*v), detail::JsonRules(&b, "").get("ws")})));
  return b.build("root");
}

Grammar json_object_grammar() {
  GrammarBuilder b;
  Expr obj = add_json_any_object(&b, "");
  Status s = b.add_rule("root", seq({std::move(obj), detail::JsonRules(&b, "").get("ws")}));
  GLM_CHECK(s.ok());
  auto g = b.build("root");
  GLM_CHECK(g.ok());
  return std::move(g).value();
}

}  // namespace glm::grammar
