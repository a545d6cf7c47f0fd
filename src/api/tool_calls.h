// Tools for the API routes. Answers are read by tok::ToolCallStream
// (tokenizer/tool_call_stream.h: a GLM model's call is its first line naming a function, then
// its arguments); OpenAI clients receive them as tool_calls.
//
// The request side, shared by the OpenAI and Anthropic routes: check_function validates one
// function (name, description, parameters schema), set_tools puts the functions into the engine
// request and, for a forced choice, the tool_call constraint.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "protocol/protocol.h"
#include "tokenizer/tool_call_stream.h"

namespace glm::api {

// A function object {"name", "description"?, "parameters"?}: the name 1-64 of [A-Za-z0-9_-]
// (OpenAI's rule), the parameters a JSON Schema the grammar supports. Errors name `at`
// ("tools[0].function") and, for the schema, `schema_field` ("parameters", "input_schema").
Status check_function(const nlohmann::ordered_json& f, const std::string& at,
                      const char* schema_field = "parameters");
// OpenAI's tools array ([{"type":"function","function":{...}}...], the only tool type) ->
// *functions (the function objects, checked, in the client's key order) and *names. Errors name
// the part ("tools[1].function.name 'f' is given twice"); `where` is the array's name.
Status read_openai_tools(const nlohmann::ordered_json& tools, const std::string& where,
                         nlohmann::ordered_json* functions, std::vector<std::string>* names);
// request->tools = `functions` (checked, in the client's key order); *tool_names = the names the
// answer may call. `forced`: "" (the model chooses), "*" (a call to any of them) or one name:
// then a tool_call constraint too (refused if the request is already constrained).
Status set_tools(const nlohmann::ordered_json& functions, const std::string& forced,
                 protocol::Request* request, std::vector<std::string>* tool_names);

// The answer side lives with the chat templates (tokenizer/tool_call_stream.h): the engine reads
// its own answers with it too.
using tok::join_tool_deltas;
using tok::read_tool_answer;
using tok::ToolAnswer;
using tok::ToolCallStream;
using tok::ToolDelta;

}  // namespace glm::api
