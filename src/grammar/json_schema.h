// JSON Schema -> grammar, for the subset OpenAI's strict mode allows (docs/grammar.md lists it).
// Properties come out in the schema's order (hence ordered_json). Anything outside the subset
// is refused with invalid_argument naming the JSON pointer of the offending part:
// "#/properties/tags: keyword 'uniqueItems' is not supported" -- never silently relaxed.
// Whitespace between tokens is optional and bounded: nothing, one space, or a newline followed
// by up to kMaxIndent spaces/tabs, so a model cannot emit whitespace forever.
// Thread-safety: pure functions over their arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace glm::grammar {

inline constexpr int kMaxIndent = 40;

// How values are spelled: JSON, or Python literals (True, False, None; strings double-quoted
// without the "\/" and "\u" escapes) for ChatGLM3's tool_call(...) arguments. Rules of the two
// dialects must not share a prefix.
enum class JsonDialect { kJson, kPython };

// Adds the rules of `schema` to `b` (names start with `prefix`, e.g. "get-weather-args") and
// returns a reference to the rule of one JSON value that validates against it, without
// surrounding whitespace. Compose it: Expr::seq({Expr::literal("get_weather\n"), *args}).
StatusOr<Expr> add_json_schema(GrammarBuilder* b, const nlohmann::ordered_json& schema,
                               std::string_view prefix, JsonDialect dialect = JsonDialect::kJson);
// The keyword arguments of a Python call whose parameters are the object `schema` ("city='x',
// days=3" without the parentheses, properties in schema order, the required ones always):
// ChatGLM3's tool_call(...). Property names must be Python identifiers; `true` (any object)
// allows any keyword arguments.
StatusOr<Expr> add_python_kwargs(GrammarBuilder* b, const nlohmann::ordered_json& schema,
                                 std::string_view prefix);
// Adds (once per prefix) the rules of any JSON value / any JSON object, and returns a reference.
Expr add_json_any_value(GrammarBuilder* b, std::string_view prefix);
Expr add_json_any_object(GrammarBuilder* b, std::string_view prefix);

// Whole grammars: root ::= <value> ws.
StatusOr<Grammar> json_schema_to_grammar(const nlohmann::ordered_json& schema);
// response_format {"type":"json_object"}: any JSON object.
Grammar json_object_grammar();

}  // namespace glm::grammar
