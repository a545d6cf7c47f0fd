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

#include "api/outcome.h"
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
using tok::tool_reading;
using tok::ToolAnswer;
using tok::ToolCallStream;
using tok::ToolDelta;
using tok::ToolReading;

// What every route sends of an answer the engine read for tool calls (its events' `tool`
// pieces, generation/event.h): a call goes out only whole. Plain content flows as the pieces
// give it; a call's pieces (its start, its arguments) are held until the answer ends, then sent
// if it ended by itself (stop), and dropped if max_tokens cut it (length), as is an answer cut
// while it could still be a call's name line ("get_wea") or inside a GLM-4.5 <tool_call> (the
// text before it has gone out): a cut call is no call, so a client never receives the model's
// unfinished syntax ("```python\ntool_c") or a partial JSON as arguments, nor an input missing
// its required fields, and the length finish reason says why there is nothing (docs/gateway.md,
// "Tool calls"). The streamed and non-streamed answers are the same deltas (read_whole_answer).
// Not thread-safe; one per answer. Cost: O(pieces); a call's pieces are held (bounded by
// max_tokens).
class ToolAnswerStream {
 public:
  explicit ToolAnswerStream(const std::vector<std::string>& names) : names_(names) {}
  // The pieces of one token event.
  std::vector<ToolDelta> feed(const std::vector<ToolDelta>& pieces);
  // The done event's pieces (what the engine's reader held to the end) and the held call when
  // `outcome` is kStop (none for kLength).
  std::vector<ToolDelta> finish(Outcome outcome, const std::vector<ToolDelta>& end);
  // A whole call was sent (after finish).
  bool is_call() const { return sent_call_; }
  // The answer was a call that max_tokens cut (after finish): nothing of it was sent.
  bool cut_call() const { return cut_call_; }

 private:
  void route(const std::vector<ToolDelta>& deltas, std::vector<ToolDelta>* out);

  std::vector<std::string> names_;
  std::vector<ToolDelta> held_;  // the call's deltas, until the answer ends
  bool in_call_ = false;
  bool sent_any_ = false;  // feed() returned something (the reader decided: content)
  bool sent_call_ = false;
  bool cut_call_ = false;
};

// A whole answer as ToolAnswerStream sends it: feed(pieces), finish(outcome, end), joined.
ToolAnswer read_whole_answer(const std::vector<std::string>& names,
                             const std::vector<ToolDelta>& pieces,
                             const std::vector<ToolDelta>& end, Outcome outcome);

}  // namespace glm::api
