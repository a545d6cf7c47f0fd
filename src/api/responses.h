// OpenAI's Responses API (POST /v1/responses, https://platform.openai.com/docs/api-reference/
// responses): parsing, the response object, and the streamed events. `input` as text or message
// items, `instructions` (a system message for this response only, as OpenAI: not carried over),
// `previous_response_id` (the stored conversation continues, with its KV cache: the engine
// conversation key of the chain), `store` (default true), `max_output_tokens`, the sampling
// fields, `stream`. JSON stays here, at the HTTP edge. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/outcome.h"
#include "core/status.h"
#include "protocol/protocol.h"

namespace glm::api {

struct ResponsesRequest {
  protocol::Request request;  // kGenerate; messages = the new input only (no history yet)
  std::string model;
  std::string instructions;  // empty: none
  std::string previous_response_id;
  bool stream = false;
  bool store = true;
};

// Refused with a 400 naming the field: input items other than messages (function calls and
// their outputs, files, images), tools, `n`, `background`, `truncation` other than "disabled".
StatusOr<ResponsesRequest> parse_responses_request(const std::string& body);

// The conversation stored with a response ([{"role","content"}...]) and back.
std::string messages_to_json(const std::vector<protocol::Message>& messages);
StatusOr<std::vector<protocol::Message>> messages_from_json(const std::string& text);

// What a response object needs besides the text.
struct ResponseInfo {
  std::string id;          // "resp_..."
  std::string message_id;  // "msg_..."
  int64_t created_at = 0;
  std::string model;
  std::string instructions;
  std::string previous_response_id;
  bool store = true;
  const protocol::SamplingParams* params = nullptr;  // temperature, top_p, max_output_tokens
};

// The response object: status "in_progress" (no outcome yet: `outcome` null), "completed", or
// "incomplete" (max_output_tokens reached: incomplete_details.reason). A reasoning model's
// thinking (`reasoning` not empty) is a reasoning item before the message
// ({"type":"reasoning","id":"rs_...","summary":[],"content":[{"type":"reasoning_text",...}]}).
nlohmann::json response_json(const ResponseInfo& info, const std::string& text,
                             const Outcome* outcome, const protocol::Usage& usage,
                             const std::string& reasoning = "");
// The reasoning item of a response (its id from the message's: "rs_...").
nlohmann::json reasoning_item_json(const ResponseInfo& info, const std::string& reasoning,
                                   bool done);

// One streamed event as an SSE frame ("event: TYPE\ndata: {...,"sequence_number":N}\n\n").
std::string response_event(const char* type, nlohmann::json data, int* sequence_number);

}  // namespace glm::api
