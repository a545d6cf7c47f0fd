// Anthropic Messages API shapes (POST /v1/messages, https://docs.anthropic.com/en/api/messages):
// request parsing into protocol::Request, and the response, stream events and errors. JSON
// stays here, at the HTTP edge, as in openai.h; answers are read by ToolCallStream
// (tool_calls.h) when tools are given, so a tool_use block is the same call an OpenAI client
// gets. Pure functions and a per-answer event writer; thread-compatible. Cost: O(request size),
// plus one grammar compilation per tool schema.
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

struct MessagesRequest {
  protocol::Request request;  // kGenerate, id assigned by the caller
  std::string model;          // echoed back
  bool stream = false;
  std::vector<std::string> tool_names;  // the answer may call these (empty: no tools)
};

// Parses and validates a /v1/messages body: `model`, `max_tokens` (required, as Anthropic
// requires it), `messages` (roles user / assistant; content a string or blocks: text,
// tool_use, tool_result), `system` (string or text blocks), `temperature` (0-1), `top_p`,
// `top_k`, `stop_sequences`, `stream`, `metadata` (ignored), `tools` ({name, description,
// input_schema}) and `tool_choice` ({type: auto | any | tool (+ name) | none; any and tool are
// forced by grammar; disable_parallel_tool_use: true reads only an answer's first call}).
// kInvalidArgument names the field.
StatusOr<MessagesRequest> parse_messages_request(const std::string& body);

// {"type":"error","error":{"type","message"}} with Anthropic's type names.
std::string anthropic_error_json(const Status& status);
// "end_turn", "max_tokens" or "tool_use" for a complete outcome.
std::string anthropic_stop_reason(Outcome outcome, bool tool_call);

// The whole non-streaming message.
struct MessageOut {
  std::string id, model;
  std::string thinking;  // a reasoning model's thinking: a thinking block first (when not empty)
  std::string text;      // text block (omitted when empty and there is a call)
  struct ToolUse {
    std::string id, name, arguments;  // arguments: JSON object text (the block's input)
  };
  std::vector<ToolUse> calls;  // a tool_use block each, after the text
  std::string stop_reason;
  protocol::Usage usage;
};
std::string anthropic_message_json(const MessageOut& m);

// The SSE events of one streamed answer, in Anthropic's order: message_start, per content block
// content_block_start / deltas / content_block_stop (thinking with thinking_delta, text_delta;
// tool_use with input_json_delta),
// message_delta (stop_reason, output_tokens), message_stop. Each string is a whole event
// ("event: NAME\ndata: JSON\n\n").
class MessagesStream {
 public:
  MessagesStream(std::string id, std::string model)
      : id_(std::move(id)), model_(std::move(model)) {}
  std::string start(const protocol::Usage& usage) const;
  std::string delta(const ToolDelta& d);
  // A piece of a reasoning model's thinking: a thinking block (opened first, before the text).
  std::string thinking(const std::string& text);
  // Closes the open block and ends the message.
  std::string finish(const std::string& stop_reason, const protocol::Usage& usage);
  // An error event (the stream then ends without message_stop).
  static std::string error(const Status& status);

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  std::string open_block(Block kind, nlohmann::json block);
  std::string close_block();

  std::string id_, model_;
  int index_ = -1;             // the current block's index
  int calls_ = 0;              // tool_use blocks opened
  Block open_ = Block::kNone;  // the open block's kind
};

// "msg_" / "toolu_" ids from the request id's unique part.
std::string message_id(const std::string& request_id);
// The tool_use ids: "toolu_" + the unique part, and "_N" for the calls after the first.
std::string tool_use_id(const std::string& request_id, int call_index = 0);

}  // namespace glm::api
