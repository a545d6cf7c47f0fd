// JSON Schema -> grammar: every supported construct accepts valid texts and rejects invalid ones
// (fed byte by byte), unsupported keywords are refused with their JSON pointer, and random walks
// over the token mask produce JSON that a small independent validator accepts.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/matcher.h"
#include "grammar/test_util.h"

namespace glm::grammar {
namespace {

using json = nlohmann::ordered_json;
using testing::accepted_prefix;
using testing::accepts_bytewise;

Grammar schema_grammar(const char* schema) {
  auto g = json_schema_to_grammar(json::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : json_object_grammar();
}

std::string schema_error(const char* schema) {
  auto g = json_schema_to_grammar(json::parse(schema));
  return g.ok() ? "<no error>" : g.status().message();
}

void expect_accepts(const Grammar& g, std::vector<std::string> texts) {
  for (const std::string& t : texts) EXPECT_TRUE(accepts_bytewise(g, t)) << t;
}
void expect_rejects(const Grammar& g, std::vector<std::string> texts) {
  for (const std::string& t : texts) EXPECT_FALSE(accepts_bytewise(g, t)) << t;
}

TEST(GrammarJsonSchema, Scalars) {
  Grammar s = schema_grammar(R"({"type": "string"})");
  expect_accepts(s, {R"("")", R"("héllo wörld")", R"("a\"b\\c\/\n\u00E9")", "\"日本\"", "\"x\" "});
  expect_rejects(s, {"abc", R"("a)", R"("\x")", R"("\u12G4")", "\"a\tb\"", "\"a\"b", "1"});
  Grammar i = schema_grammar(R"({"type": "integer"})");
  expect_accepts(i, {"0", "-7", "1234567890123456"});
  expect_rejects(i, {"01", "1.5", "-", "+1", "1e3", "12345678901234567"});  // 17 digits: bound
  Grammar n = schema_grammar(R"({"type": "number"})");
  expect_accepts(n, {"0", "-0.5", "3.14159", "1e10", "2.5E-3", "-1E+2"});
  // Exponents have at most two digits: 1e999 is valid JSON but overflows a double.
  expect_rejects(n, {".5", "1.", "1e", "--1", "NaN", "0x10", "1e100"});
  Grammar b = schema_grammar(R"({"type": "boolean"})");
  expect_accepts(b, {"true", "false"});
  expect_rejects(b, {"True", "1", "null"});
  Grammar z = schema_grammar(R"({"type": "null"})");
  expect_accepts(z, {"null"});
  expect_rejects(z, {"nul", "\"null\""});
}

TEST(GrammarJsonSchema, IntegerBounds) {
  // Exhaustive over a window: the grammar accepts exactly the integers within the bounds.
  struct Case {
    const char* schema;
    int64_t lo, hi;  // expected inclusive bounds (INT64_MIN/MAX = open)
  };
  const Case cases[] = {
      {R"({"type":"integer","minimum":0,"maximum":150})", 0, 150},
      {R"({"type":"integer","minimum":-37,"maximum":1205})", -37, 1205},
      {R"({"type":"integer","minimum":-1000,"maximum":-7})", -1000, -7},
      {R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":100})", 10, 99},
      {R"({"type":"integer","minimum":1.5,"maximum":20.5})", 2, 20},
      {R"({"type":"integer","minimum":95})", 95, INT64_MAX},
      {R"({"type":"integer","maximum":-3})", INT64_MIN, -3},
      {R"({"type":"integer","minimum":5,"maximum":5})", 5, 5},
  };
  for (const Case& c : cases) {
    Grammar g = schema_grammar(c.schema);
    for (int64_t v = -1300; v <= 1300; ++v) {
      const bool want = v >= c.lo && v <= c.hi;
      EXPECT_EQ(testing::accepts(g, std::to_string(v)), want) << c.schema << " " << v;
    }
    EXPECT_FALSE(testing::accepts(g, "-0")) << c.schema;
    EXPECT_FALSE(testing::accepts(g, "007")) << c.schema;
  }
  Grammar open = schema_grammar(R"({"type":"integer","minimum":95})");
  EXPECT_TRUE(testing::accepts(open, "1234567890123456"));
  EXPECT_FALSE(testing::accepts(open, "12345678901234567"));  // 17 digits: the length bound
  EXPECT_EQ(schema_error(R"({"type":"integer","minimum":5,"maximum":4})"),
            "#: no integer lies within the bounds");
  EXPECT_EQ(schema_error(R"({"type":"integer","maximum":"9"})"), "#/maximum: must be a number");
}

TEST(GrammarJsonSchema, StringLengthCountsCharacters) {
  Grammar g = schema_grammar(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  expect_accepts(g, {R"("ab")", R"("abc")", "\"日本語\"", R"("\n\u0041")"});
  expect_rejects(g, {R"("a")", R"("abcd")", "\"日本語は\""});
}

TEST(GrammarJsonSchema, EnumAndConst) {
  Grammar e = schema_grammar(R"({"enum": ["red", "green", 42, null, {"a": [1]}, "日本"]})");
  expect_accepts(e, {R"("red")", R"("green")", "42", "null", R"({"a":[1]})", "\"日本\""});
  expect_rejects(e, {R"("blue")", R"("re")", "4", R"({"a": [1]})"});  // compact form only
  Grammar c = schema_grammar(R"({"const": "fixed"})");
  expect_accepts(c, {R"("fixed")"});
  expect_rejects(c, {R"("fixe")", R"("fixedd")"});
  // enum with a type keeps the values of that type.
  Grammar t = schema_grammar(R"({"type": "string", "enum": ["a", 1]})");
  expect_accepts(t, {R"("a")"});
  expect_rejects(t, {"1"});
}

TEST(GrammarJsonSchema, StrictObjectKeepsSchemaOrder) {
  Grammar g = schema_grammar(R"({
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "tags"], "additionalProperties": false})");
  expect_accepts(g, {R"({"name":"Ann","age":30,"tags":[]})",
                     R"({ "name": "Ann", "age": 30, "tags": ["a", "b"] })",
                     json::parse(R"({"name":"Ann","age":30,"tags":["x"]})").dump(4)});
  expect_rejects(g, {R"({"age":30,"name":"Ann","tags":[]})",        // order
                     R"({"name":"Ann","tags":[]})",                 // missing required
                     R"({"name":"Ann","age":30,"tags":[],"x":1})",  // extra property
                     R"({"name":"Ann","age":"30","tags":[]})",      // wrong type
                     R"({"name":"Ann",,"age":30,"tags":[]})"});
}

TEST(GrammarJsonSchema, OptionalProperties) {
  Grammar g = schema_grammar(R"({
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
    "required": ["b"]})");
  expect_accepts(g,
                 {R"({"b":1})", R"({"a":0,"b":1})", R"({"b":1,"c":2})", R"({"a":0,"b":1,"c":2})"});
  expect_rejects(g, {"{}", R"({"a":0})", R"({"a":0,"c":2})", R"({,"b":1})", R"({"b":1,})",
                     R"({"b":1,"a":0})"});
  Grammar none = schema_grammar(R"({"type":"object","properties":{"x":{"type":"null"}}})");
  expect_accepts(none, {"{}", R"({"x":null})"});
}

TEST(GrammarJsonSchema, NonStrictObjects) {
  // No properties listed: any object. additionalProperties false with none: only {}.
  Grammar any = schema_grammar(R"({"type": "object"})");
  expect_accepts(any, {"{}", R"({"k": [1, {"z": null}], "q": "w"})"});
  expect_rejects(any, {"[]", R"({"k"})"});
  Grammar empty = schema_grammar(R"({"type": "object", "additionalProperties": false})");
  expect_accepts(empty, {"{}", "{ }"});
  expect_rejects(empty, {R"({"a":1})"});
  // A map: any keys, values of one schema.
  Grammar map = schema_grammar(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  expect_accepts(map, {"{}", R"({"a":1,"b":2})"});
  expect_rejects(map, {R"({"a":"x"})"});
}

TEST(GrammarJsonSchema, Arrays) {
  Grammar g =
      schema_grammar(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})");
  expect_accepts(g, {"[1]", "[1,2,3]", "[ 1 , 2 ]", "[\n  1,\n  2\n]"});
  expect_rejects(g, {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"});
  Grammar any = schema_grammar(R"({"type":"array"})");
  expect_accepts(any, {"[]", R"([1,"a",{"b":[null]}])"});
  Grammar zero = schema_grammar(R"({"type":"array","maxItems":0})");
  expect_accepts(zero, {"[]"});
  expect_rejects(zero, {"[1]"});
}

TEST(GrammarJsonSchema, TypeArraysAndAnyOf) {
  Grammar g = schema_grammar(R"({"type": ["string", "null"], "maxLength": 2})");
  expect_accepts(g, {"null", R"("ab")"});
  expect_rejects(g, {R"("abc")", "1"});
  Grammar a = schema_grammar(R"({"anyOf": [{"type":"integer"}, {"type":"object",
      "properties":{"k":{"const":true}}, "required":["k"], "additionalProperties":false}]})");
  expect_accepts(a, {"12", R"({"k":true})"});
  expect_rejects(a, {"1.5", R"({"k":false})", R"({})"});
}

TEST(GrammarJsonSchema, RefsIncludingRecursive) {
  Grammar g = schema_grammar(R"({
    "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"},
                     "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v", "kids"], "additionalProperties": false}},
    "$ref": "#/$defs/node"})");
  expect_accepts(
      g, {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"});
  expect_rejects(g, {R"({"v":1,"kids":[{"v":2}]})"});
  Grammar d = schema_grammar(R"({"definitions": {"id": {"type":"string","format":"uuid"}},
      "type":"array", "items": {"$ref": "#/definitions/id"}})");
  expect_accepts(d, {R"(["123e4567-e89b-12d3-a456-426614174000"])"});
  expect_rejects(d, {R"(["123e4567-e89b-12d3-a456-42661417400"])"});
  EXPECT_EQ(schema_error(R"({"$ref": "#/$defs/missing"})"),
            "#/$ref: reference '#/$defs/missing' does not resolve");
  EXPECT_EQ(schema_error(R"({"$ref": "https://example.com/s.json"})"),
            "#/$ref: only local references (#/$defs/..., #/definitions/...) are supported");
  // A reference that is its own first element is left recursion: refused, not a hang.
  EXPECT_NE(schema_error(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type":"null"}]}},
                            "$ref": "#/$defs/a"})")
                .find("left recursion in rule 'def-a'"),
            std::string::npos);
}

TEST(GrammarJsonSchema, Formats) {
  Grammar d = schema_grammar(R"({"type":"string","format":"date"})");
  expect_accepts(d, {R"("2024-01-31")", R"("1999-12-01")", R"("2023-02-28")", R"("2024-04-30")"});
  expect_rejects(d, {R"("2024-13-01")", R"("2024-00-10")", R"("2024-04-31")", R"("2024-02-30")",
                     R"("2024-1-01")", R"("24-01-01")"});
  Grammar t = schema_grammar(R"({"type":"string","format":"date-time"})");
  expect_accepts(t, {R"("2024-06-01T12:30:00Z")", R"("2024-06-01T23:59:59.123+08:00")"});
  expect_rejects(
      t, {R"("2024-06-01 12:30:00Z")", R"("2024-06-01T24:00:00Z")", R"("2024-06-01T12:30:00")"});
  Grammar tm = schema_grammar(R"({"type":"string","format":"time"})");
  expect_accepts(tm, {R"("08:15:00-05:00")"});
}

TEST(GrammarJsonSchema, BoundedWhitespace) {
  Grammar g = schema_grammar(R"({"type":"array","items":{"type":"integer"}})");
  expect_accepts(g, {"[1, 2]", "[\n" + std::string(kMaxIndent, ' ') + "1\n]", "[1] "});
  std::string too_deep = "[\n" + std::string(kMaxIndent + 1, ' ') + "1]";
  EXPECT_EQ(accepted_prefix(g, too_deep), 2u + kMaxIndent);
  EXPECT_EQ(accepted_prefix(g, "[  1]"), 2u);  // two spaces: not a whitespace form we allow
}

TEST(GrammarJsonSchema, UnsupportedIsRefusedWithPointer) {
  EXPECT_EQ(schema_error(R"({"type":"object","patternProperties":{"^x":{}}})"),
            "#: keyword 'patternProperties' is not supported");
  EXPECT_EQ(schema_error(R"({"type":"object","properties":{"a":{"not":{"type":"null"}}}})"),
            "#/properties/a: keyword 'not' is not supported");
  EXPECT_EQ(schema_error(R"({"type":"array","items":{"if":{},"then":{}}})"),
            "#/items: keyword 'if' is not supported");
  EXPECT_EQ(schema_error(R"({"type":"string","pattern":"^a+$"})"),
            "#: keyword 'pattern' is not supported");
  EXPECT_EQ(schema_error(R"({"oneOf":[{"type":"string"}]})"),
            "#: keyword 'oneOf' is not supported");
  EXPECT_EQ(schema_error(R"({"type":"string","format":"email"})"),
            "#/format: format 'email' is not supported (date, time, date-time, uuid are)");
  EXPECT_EQ(schema_error(R"({"type":"number","minimum":0})"),
            "#: keyword 'minimum' is not supported for type 'number'");
  EXPECT_EQ(
      schema_error(R"({"type":"object","properties":{"a/b":{"type":"array","uniqueItems":true}}})"),
      "#/properties/a~1b: keyword 'uniqueItems' is not supported");
  EXPECT_EQ(schema_error(R"({"type":"object","properties":{},"required":["x"]})"),
            "#/required: required property 'x' is not in 'properties'");
  EXPECT_EQ(schema_error(R"({"type":"strin"})"), "#/type: unknown type 'strin'");
  EXPECT_EQ(schema_error(R"({"type":"array","maxItems":-1})"),
            "#/maxItems: must be a non-negative integer");
  EXPECT_EQ(schema_error(R"({"type":"string","minLength":5,"maxLength":2})"),
            "#: maxLength < minLength");
  EXPECT_EQ(schema_error("{\"a\\nb\": 1}"), "#: keyword 'a\\x0Ab' is not supported");
  EXPECT_EQ(schema_error("false"), "#: the schema 'false' matches nothing");
  EXPECT_EQ(schema_error("[]"), "#: a schema must be an object or a boolean");
}

TEST(GrammarJsonSchema, AnyJsonObject) {
  Grammar g = json_object_grammar();
  expect_accepts(g, {"{}", R"({"a": {"b": [1, 2.5, "c", true, false, null]}})"});
  expect_rejects(g, {"[]", "\"s\"", "1", R"({"a":})", R"({a:1})"});
}

TEST(GrammarJsonSchema, ComposesWithBuilder) {
  // What the tool-call integrator writes: NAME "\n" <arguments of that function's schema>.
  GrammarBuilder b;
  auto args = add_json_schema(&b, json::parse(R"({"type":"object",
      "properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false})"),
                              "get-weather");
  ASSERT_TRUE(args.ok()) << args.status().to_string();
  auto args2 = add_json_schema(&b, json::parse(R"({"type":"object",
      "properties":{"q":{"type":"integer"}},"required":["q"],"additionalProperties":false})"),
                               "search");
  ASSERT_TRUE(args2.ok()) << args2.status().to_string();
  ASSERT_TRUE(b.add_rule("root", Expr::alt({Expr::seq({Expr::literal("get_weather\n"), *args}),
                                            Expr::seq({Expr::literal("search\n"), *args2})}))
                  .ok());
  auto g = b.build();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_accepts(*g, {"get_weather\n{\"city\": \"Paris\"}", "search\n{\"q\":3}"});
  expect_rejects(*g, {"get_weather\n{\"q\":3}", "search\n{\"city\": \"Paris\"}"});
}

// ---- random walks over the mask, checked by an independent validator ----

bool utf8_length(const std::string& s, size_t* n) {
  *n = 0;
  for (unsigned char c : s) *n += (c & 0xC0) != 0x80;
  return true;
}

// YYYY-MM-DD with digits in place.
bool looks_like_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// A validator for the constructs the walk schema uses. Returns "" if valid, else why not.
std::string validate(const json& v, const json& s, const json& root) {
  if (s.contains("$ref")) {
    return validate(v, root.at(json::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
  }
  if (s.contains("anyOf")) {
    for (const json& alt : s["anyOf"]) {
      if (validate(v, alt, root).empty()) return "";
    }
    return "no anyOf branch matches";
  }
  if (s.contains("enum")) {
    for (const json& e : s["enum"]) {
      if (e == v) return "";
    }
    return "not in enum";
  }
  if (s.contains("const") && s["const"] != v) return "not the const";
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string())
      types.push_back(s["type"]);
    else
      for (const json& t : s["type"]) types.push_back(t);
    bool ok = false;
    for (const std::string& t : types) {
      ok = ok || (t == "string" && v.is_string()) || (t == "integer" && v.is_number_integer()) ||
           (t == "number" && v.is_number()) || (t == "boolean" && v.is_boolean()) ||
           (t == "null" && v.is_null()) || (t == "object" && v.is_object()) ||
           (t == "array" && v.is_array());
    }
    if (!ok) return "wrong type";
  }
  if (v.is_string()) {
    size_t n;
    utf8_length(v.get<std::string>(), &n);
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return "too short";
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return "too long";
    if (s.value("format", "") == "date" && !looks_like_date(v.get<std::string>())) {
      return "not a date";
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "too many items";
    if (s.contains("items")) {
      for (const json& x : v) {
        std::string why = validate(x, s["items"], root);
        if (!why.empty()) return "item: " + why;
      }
    }
  }
  if (v.is_object() && s.contains("properties")) {
    const json& props = s["properties"];
    size_t last = 0;
    for (const auto& [k, x] : v.items()) {
      if (!props.contains(k)) return "unexpected key " + k;
      size_t idx = static_cast<size_t>(std::distance(props.begin(), props.find(k)));
      if (idx < last) return "key out of schema order: " + k;
      last = idx;
      std::string why = validate(x, props[k], root);
      if (!why.empty()) return k + ": " + why;
    }
    for (const json& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return "missing " + r.get<std::string>();
    }
  }
  return "";
}

// ~10 properties of every kind, bounded so every walk ends.
constexpr const char* kWalkSchema = R"({
  "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"},
            "y": {"type": "number"}}, "required": ["x", "y"], "additionalProperties": false}},
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "name": {"type": "string", "maxLength": 12},
    "city": {"type": "string", "minLength": 1, "maxLength": 6},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "ok": {"type": "boolean"},
    "note": {"type": ["string", "null"], "maxLength": 5},
    "when": {"type": "string", "format": "date"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
    "where": {"$ref": "#/$defs/point"},
    "extra": {"anyOf": [{"type": "integer"}, {"const": "none"}]}
  },
  "required": ["id", "name", "city", "unit", "ok", "when", "tags", "where"],
  "additionalProperties": false
})";

// A synthetic vocabulary: every byte, JSON fragments, Chinese characters whole and split.
std::shared_ptr<const TokenVocab> walk_vocab(int32_t* stop) {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"",       "\":",         "\": ",     "\", \"",
                        "\",\"",     "true",        "false",    "null",
                        "12",        "3.5",         "e-",       "-0",
                        "celsius",   "\"celsius\"", "fahren",   "heit\"",
                        "[]",        "[\"",         "\"]",      "}",
                        "}\n",       "\n  ",        "  ",       "中",
                        "文",        "中文",        "\xE4\xB8", "\xAD\xE6\x96\x87",
                        "\xAD",      "2024-",       "-12-",     "01\"",
                        "\"x\":",    "id",          "name",     "\"where\": {\"x\": ",
                        ", \"y\": ", "\\u00",       "\\n",      "é"}) {
    toks.push_back(t);
  }
  toks.push_back("</s>");
  *stop = static_cast<int32_t>(toks.size() - 1);
  toks.push_back("<pad>");  // special: never allowed
  auto v = TokenVocab::create(toks, {*stop}, {*stop + 1});
  EXPECT_TRUE(v.ok());
  return *v;
}

// Samples allowed tokens until a stop token; returns the text. Fails the test on a dead state.
std::string random_walk(Matcher* m, const TokenVocab& vocab, int32_t stop, std::mt19937* rng,
                        size_t max_steps) {
  TokenMask mask;
  std::string text;
  for (size_t step = 0; step < max_steps; ++step) {
    MaskInfo info = m->fill_mask(&mask);
    EXPECT_FALSE(info.dead()) << "dead state after " << text;
    if (info.dead()) return text;
    if (info.stop_allowed && (*rng)() % 4 == 0) {
      EXPECT_TRUE(m->accept_token(stop).ok());
      return text;
    }
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(mask.size()); ++id) {
      if (mask.allowed(id) && !vocab.is_stop(id)) allowed.push_back(id);
    }
    if (allowed.empty()) {
      EXPECT_TRUE(info.stop_allowed);
      EXPECT_TRUE(m->accept_token(stop).ok());
      return text;
    }
    int32_t id = allowed[(*rng)() % allowed.size()];
    EXPECT_TRUE(m->accept_token(id).ok()) << id;
    text += vocab.token(id);
  }
  ADD_FAILURE() << "walk did not end in " << max_steps << " steps: " << text;
  return text;
}

TEST(GrammarJsonSchema, RandomWalksProduceValidJson) {
  json schema = json::parse(kWalkSchema);
  auto g = json_schema_to_grammar(schema);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  int32_t stop = 0;
  auto vocab = walk_vocab(&stop);
  std::mt19937 rng(7);
  for (int walk = 0; walk < 60; ++walk) {
    Matcher m(*g, vocab);
    std::string text = random_walk(&m, *vocab, stop, &rng, 2000);
    ASSERT_TRUE(m.is_terminated()) << text;
    json v;
    try {
      v = json::parse(text);
    } catch (const std::exception& e) {
      FAIL() << "not JSON (" << e.what() << "): " << text;
    }
    EXPECT_EQ(validate(v, schema, schema), "") << text;
  }
}

}  // namespace
}  // namespace glm::grammar

namespace glm::grammar {
namespace {

Grammar kwargs_grammar(const char* schema) {
  GrammarBuilder b;
  auto args = add_python_kwargs(&b, json::parse(schema), "kw");
  EXPECT_TRUE(args.ok()) << args.status().to_string();
  if (!args.ok()) return json_object_grammar();
  EXPECT_TRUE(
      b.add_rule("root", Expr::seq({Expr::literal("tool_call("), *args, Expr::literal(")")})).ok());
  auto g = b.build("root");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : json_object_grammar();
}

// ChatGLM3 calls tools as tool_call(k=v, ...) with Python literals.
TEST(GrammarPythonKwargs, PropertiesInOrderWithPythonLiterals) {
  Grammar g = kwargs_grammar(
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},)"
      R"("hot":{"type":"boolean"},"note":{"type":["string","null"]},)"
      R"("mode":{"enum":[true,null,"a"]},"tags":{"type":"array","items":{"type":"boolean"}}},)"
      R"("required":["city"]})");
  expect_accepts(g,
                 {R"(tool_call(city="Paris"))", R"(tool_call(city="x", days=3))",
                  R"(tool_call(city="x",hot=True, note=None))", R"(tool_call(city="x", mode=None))",
                  R"(tool_call(city="x", tags=[True, False]))", "tool_call(city=\"北京\")"});
  expect_rejects(g, {"tool_call()",                       // city is required
                     R"(tool_call(days=3, city="x"))",    // schema order
                     R"(tool_call(city="x", hot=true))",  // JSON spelling
                     R"(tool_call(city="x", note=null))", R"(tool_call(city="x", mode=true))",
                     R"(tool_call(city="a\/b"))",    // Python keeps the backslash
                     R"(tool_call(city="\u00e9"))",  // characters are written as themselves
                     R"(tool_call("city"="x"))", R"(tool_call(city: "x"))"});
  // Any keyword arguments when the parameters say nothing; none when they forbid extras.
  Grammar any = kwargs_grammar(R"({"type":"object"})");
  expect_accepts(any, {"tool_call()", R"(tool_call(a=1, b_2={"k": [None]}))"});
  expect_rejects(any, {R"(tool_call(1a=2))", R"(tool_call(a=true))"});
  Grammar none = kwargs_grammar(R"({"type":"object","additionalProperties":false})");
  expect_accepts(none, {"tool_call()"});
  expect_rejects(none, {"tool_call(a=1)"});
}

TEST(GrammarPythonKwargs, NamesMustBeIdentifiers) {
  GrammarBuilder b;
  auto e = add_python_kwargs(&b, json::parse(R"({"type":"object","properties":{"a-b":{}}})"), "kw");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("#/properties/a-b"), std::string::npos)
      << e.status().message();
  EXPECT_FALSE(add_python_kwargs(&b, json::parse(R"({"type":"string"})"), "kw2").ok());
}

}  // namespace
}  // namespace glm::grammar
