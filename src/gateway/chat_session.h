// ChatSession: one turn of the page's chat (POST /api/conversations/:id/chat) without HTTP.
// It applies the turn to the stored conversation (an edit adds a new version of the edited
// message, regenerate a new version of the last answer: the old ones stay, as branches;
// continue goes on with the last answer; the user's message is stored before generation
// starts), builds the engine request
// from the stored history, turns engine
// events into the page's SSE payloads while saving the partial answer at most once a second,
// and stores the final answer with its status and stats before the page hears of the end.
//
// Ownership: borrows the Store (must outlive the session). Thread-safety: one thread at a time
// (the HTTP thread that starts the turn, then the live answer's thread: live_answer.h). Cost: a few
// SQLite writes per turn, one per second of streaming.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/tool_calls.h"
#include "core/status.h"
#include "gateway/relay.h"
#include "gateway/store.h"
#include "protocol/protocol.h"

namespace glm::gateway {

// What the page sends for one turn.
struct ChatTurn {
  std::string content;                     // the user's message (empty with regenerate)
  bool regenerate = false;                 // answer the last user message again
  std::optional<int64_t> edit_message_id;  // replace this user message and what follows
  // Go on with the last answer (interrupted, stopped, failed, or cut off by max_tokens) where
  // it ended: the engine gets its text as tokens already generated (protocol "resume"), the
  // answer row grows.
  bool continue_answer = false;
  std::optional<std::string> system_prompt;  // a new system prompt for the conversation
  std::optional<std::string> params_json;    // the page's settings, stored with the conversation
  generation::SamplingParams params;
  // New tools for the conversation (an OpenAI tools array as JSON text, checked by the caller;
  // "[]" removes them). Stored with the conversation; the model may call them from this turn on.
  std::optional<std::string> tools_json;
  // The result of the tool the last answer called: stored as a "tool" message (sent to the
  // model as an observation), then the model answers it. A turn of its own, like continue.
  std::optional<std::string> tool_result;
  std::string model;  // several models: which answers ("" = the default)
  // The model's name as stored with the answer (meta.model): `model`, or the one served.
  std::string answering_model;
};

class ChatSession {
 public:
  ChatSession(Store* store, Conversation conversation);

  // Applies the turn to the stored history and returns the engine request (kGenerate, with
  // `request_id`, the conversation as the KV key, the system prompt and the whole history).
  // kInvalidArgument / kNotFound for a turn that does not fit the conversation. With continue,
  // the caller tokenizes prefix() into the request's resume (the session has no engine).
  StatusOr<protocol::Request> begin(const ChatTurn& turn, const std::string& request_id);
  // The text a continued answer already has ("" for other turns).
  const std::string& prefix() const { return prefix_; }
  // After the request went to the engine: stores the settings and system prompt, titles a new
  // conversation and creates the (streaming) answer row, or marks the continued one streaming.
  Status open_answer();
  // The answer could not start (refused by the engine): recorded on the answer row.
  void fail_to_start(const Status& status);

  // SSE payloads of the page's protocol (docs/gateway.md).
  nlohmann::json start_payload() const;
  nlohmann::json error_payload(const Status& status) const;
  // The payloads for an engine event (none for events the page does not see). Tokens grow
  // the partial answer, which is saved when its first text comes, then at most once per flush
  // interval (250 ms). In a conversation with tools the answer comes as the engine read it for a
  // call (Event::tool): plain text as token payloads, a call as {"type":"tool_call","name"} then
  // {"type":"tool_arguments","text"} fragments.
  std::vector<nlohmann::json> on_event(const protocol::Event& e);
  // Stores the final answer and returns the done (or error) payload. `interrupted`: the
  // gateway cut it as it stopped (stored "interrupted", so the page offers to continue it).
  // An answer that calls a tool is stored with meta.tool_call {name, arguments} and its
  // finish_reason is "tool_calls".
  nlohmann::json finish(const RelayResult& r, bool interrupted = false);

  int64_t answer_id() const { return answer_id_; }
  const std::string& conversation_id() const { return conv_.id; }
  const std::string& request_id() const { return request_id_; }

 private:
  Store* store_;
  Conversation conv_;
  ChatTurn turn_;
  std::string request_id_;
  std::string system_;
  nlohmann::json user_message_;  // the stored user message (null with regenerate)
  int64_t answer_id_ = 0;
  int64_t answer_parent_ = 0;            // the message the answer follows (the last of the history)
  std::string prefix_;                   // a continued answer's text before this turn
  std::string partial_;                  // prefix_ and what came since (the plain text, with tools)
  std::vector<std::string> tool_names_;  // the functions the answer may call
  api::ToolReading tool_reading_;        // their values' types; one call an answer (the page's)
  bool with_tools_ = false;              // the answer comes as the engine's reading (Event::tool)
  nlohmann::json meta_ = nlohmann::json::object();
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  bool flushed_any_ = false;  // the answer's first text was written (then every interval)
};

// A title from the first user message: its first line without markdown marks, at most 40
// bytes on a character boundary.
std::string title_from(const std::string& text);

}  // namespace glm::gateway
