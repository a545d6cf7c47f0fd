// OpenAI-compatible shapes: POST /v1/chat/completions request parsing and the response, chunk
// and error JSON (https://platform.openai.com/docs/api-reference/chat). JSON stays here, at the
// HTTP edge; the rest of the gateway speaks protocol::Request / protocol::Event.
// Pure functions; thread-safe. Cost: O(request size).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/outcome.h"
#include "api/tool_calls.h"
#include "core/status.h"
#include "protocol/protocol.h"

namespace glm::api {

struct ChatCompletionRequest {
  protocol::Request request;  // kGenerate, id assigned by the caller
  std::string model;          // echoed back; one engine serves any name, several pick by it
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // The functions the answer may call (tools, unless tool_choice is "none"): the answer is
  // read with ToolCallStream (tool_calls.h). Empty = no tools.
  std::vector<std::string> tool_names;
};

// Parses and validates a /v1/chat/completions body. kInvalidArgument names the field and says
// what is allowed. Unknown fields are ignored, as OpenAI's clients send many.
// response_format json_object / json_schema and the `grammar` extension (GBNF text) become
// request.constraint; a schema or grammar that does not compile is refused here
// ("response_format.json_schema.schema #/properties/t: ...").
// Tools: `tools` (type "function"; parameters schemas checked like response_format's) go to the
// engine in the client's key order; `tool_choice` "auto" (default with tools) lets the model
// choose, "required" or {"type":"function","function":{"name"}} force a call by grammar (a
// tool_call constraint), "none" leaves the tools out of the prompt. Messages: an assistant's
// `tool_calls` become one assistant message per call (metadata = name, arguments), role `tool`
// an observation. `parallel_tool_calls` is accepted; an answer holds at most one call.
// Cost: O(request size), plus one grammar compilation (~0.1-1 ms) per schema.
StatusOr<ChatCompletionRequest> parse_chat_completion(const std::string& body);

// {"error":{"message","type","param":null,"code"}} with OpenAI's type names.
std::string openai_error_json(const Status& status);
// "invalid_request_error", "authentication_error", "rate_limit_error", "server_error", ...
const char* openai_error_type(ErrorCode code);

// "stop" / "length" for the complete outcomes (is_complete); the others end in an error.
std::string openai_finish_reason(Outcome outcome);

// `n` (the number of choices, 1 to protocol::kMaxChoices; absent or null leaves *n) of a chat
// or legacy completions body; kInvalidArgument says the range and what is counted (`noun`).
Status read_choices(const nlohmann::json& body, const char* noun, int* n);
Status read_choices(const nlohmann::ordered_json& body, const char* noun, int* n);

// OpenAI's usage object (chat and legacy completions): cached prompt tokens in
// prompt_tokens_details.
nlohmann::json openai_usage_json(const protocol::Usage& usage);

// One `chat.completion.chunk` (without the "data: " framing). `role` true adds the
// assistant role to the delta (first chunk); empty `finish_reason` writes null.
// With `logprobs` (the request asked for them), the chunk's choice carries those entries.
// `index`: the choice (n > 1).
std::string completion_chunk_json(
    const std::string& id, int64_t created, const std::string& model, const std::string* content,
    bool role, const std::string& finish_reason,
    const std::vector<generation::GeneratedLogprobs>* logprobs = nullptr, int index = 0);
// A chunk whose delta is a reasoning model's thinking: {"reasoning_content": ...} (the field
// vLLM, SGLang and llama-server use).
std::string reasoning_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::string& reasoning, int index = 0);
// A chunk whose delta is tool call `call_index`: its start (`call_id` and `name` set: id, type,
// name and empty arguments) or an arguments fragment (both empty).
std::string tool_call_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                 const std::string& call_id, const std::string& name,
                                 const std::string& arguments, int call_index = 0);
// The chunk of one ToolCallStream delta: content, a call's start, or an arguments fragment;
// `call_index`: the call it belongs to (the answer's kCallStart deltas so far, minus one).
std::string tool_delta_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                  const ToolDelta& delta, int call_index = 0);
// The id of the answer's tool call `call_index` ("call_" + the request id's unique part, and
// "_N" for the calls after the first).
std::string tool_call_id(const std::string& request_id, int call_index = 0);
// The index of each delta's call, counted along an answer's deltas (-1 before the first call).
class ToolCallIndex {
 public:
  int of(const ToolDelta& d) {
    if (d.kind == ToolDelta::Kind::kCallStart) ++index_;
    return index_ < 0 ? 0 : index_;
  }

 private:
  int index_ = -1;
};
// The final usage-only chunk sent when stream_options.include_usage is set.
std::string usage_chunk_json(const std::string& id, int64_t created, const std::string& model,
                             const protocol::Usage& usage);
// The whole non-streaming `chat.completion` object; with `calls` (not empty) the message
// carries those tool calls (content null when empty).
struct ToolCallOut {
  std::string id, name, arguments;
};
std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& content, const std::string& finish_reason,
                            const protocol::Usage& usage,
                            const std::vector<ToolCallOut>* calls = nullptr,
                            const std::vector<generation::GeneratedLogprobs>* logprobs = nullptr,
                            const std::string& reasoning = "");
// The same with several choices (n > 1), `index` in order; usage covers them all.
struct ChatChoiceOut {
  std::string content;
  std::string finish_reason;
  const std::vector<ToolCallOut>* calls = nullptr;
  const std::vector<generation::GeneratedLogprobs>* logprobs = nullptr;
  std::string reasoning;  // the message's reasoning_content (written when not empty)
};
std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::vector<ChatChoiceOut>& choices,
                            const protocol::Usage& usage);
// The calls of an answer read for tools, with their ids (tool_call_id of `request_id`).
std::vector<ToolCallOut> tool_calls_out(const std::string& request_id, const ToolAnswer& answer);

}  // namespace glm::api
