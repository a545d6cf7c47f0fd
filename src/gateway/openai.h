// OpenAI-compatible shapes: POST /v1/chat/completions request parsing and the response, chunk
// and error JSON (https://platform.openai.com/docs/api-reference/chat). JSON stays here, at the
// HTTP edge; the rest of the gateway speaks protocol::Request / protocol::Event.
// Pure functions; thread-safe. Cost: O(request size).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "gateway/outcome.h"
#include "protocol/protocol.h"

namespace glm::gateway {

struct ChatCompletionRequest {
  protocol::Request request;  // kGenerate, id assigned by the caller
  std::string model;          // echoed back; the engine serves one model whatever is asked
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses and validates a /v1/chat/completions body. kInvalidArgument names the field and says
// what is allowed. Unknown fields are ignored, as OpenAI's clients send many (`tools` and
// `tool_choice` too, for now). response_format json_object / json_schema and the `grammar`
// extension (GBNF text) become request.constraint; a schema or grammar that does not compile
// is refused here ("response_format.json_schema.schema #/properties/t: ..."). Cost: O(request
// size), plus one grammar compilation (~0.1-1 ms) when constrained.
StatusOr<ChatCompletionRequest> parse_chat_completion(const std::string& body);

// {"error":{"message","type","param":null,"code"}} with OpenAI's type names.
std::string openai_error_json(const Status& status);
// "invalid_request_error", "authentication_error", "rate_limit_error", "server_error", ...
const char* openai_error_type(ErrorCode code);

// "stop" / "length" for the complete outcomes (is_complete); the others end in an error.
std::string openai_finish_reason(Outcome outcome);

// One `chat.completion.chunk` (without the "data: " framing). `role` true adds the
// assistant role to the delta (first chunk); empty `finish_reason` writes null.
std::string completion_chunk_json(const std::string& id, int64_t created, const std::string& model,
                                  const std::string* content, bool role,
                                  const std::string& finish_reason);
// The final usage-only chunk sent when stream_options.include_usage is set.
std::string usage_chunk_json(const std::string& id, int64_t created, const std::string& model,
                             const protocol::Usage& usage);
// The whole non-streaming `chat.completion` object.
std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& content, const std::string& finish_reason,
                            const protocol::Usage& usage);

}  // namespace glm::gateway
