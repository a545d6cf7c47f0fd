// Store: conversations and their messages, for the web page and the Responses API, in one
// SQLite file (WAL mode; the single-machine default) or in PostgreSQL (several nodes share one
// database: a conversation continues on whichever node gets it). One schema, written once
// (database.h says what differs):
//
//   conversations(id, title, system_prompt, params JSON, created_ms, updated_ms, tools JSON,
//                 leaf_id)
//   messages(id, conversation_id, role, content, status, error, meta JSON, created_ms,
//            parent_id, node)
//   responses(id, kv_key, messages JSON, response JSON, created_ms): the Responses API's stored
//     responses (POST /v1/responses with store: true), each with its whole conversation
//
// Messages form a tree: each has the message it follows as parent (none for the first), and an
// edit or a regenerate adds a sibling instead of deleting (every version stays). The
// conversation's leaf_id names the last message of the branch in view; messages() is the path
// from the root to it, each message with its siblings (the versions of its place).
//
// A message's status is "complete", "streaming" (being generated now), "stopped" (the user
// stopped it; content is the partial answer), "error" (generation failed; content is what came
// before) or "interrupted" (the gateway died mid-answer: open() turns the leftover "streaming"
// rows of its own node into this; with a shared database, other nodes' answers in progress are
// theirs). Everything survives a restart of either process.
//
// Errors: a database that cannot be reached fails the call with kUnavailable and a message
// that says so (PostgreSQL: the next call reconnects); the process goes on.
// Thread-safety: every method may be called from any thread (one connection behind a mutex;
// each call is one short transaction: ~10-100 us for SQLite on a warm page cache, a network
// round trip or two for PostgreSQL).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::store {

class Database;

struct Conversation {
  std::string id;
  std::string title;
  std::string system_prompt;
  std::string params_json = "{}";  // the page's sampling settings, stored as given
  // The functions the model may call in this conversation: OpenAI's tools array as the page
  // sent it (key order kept: the prompt writes them in that order). "[]" = none.
  std::string tools_json = "[]";
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int n_messages = 0;  // filled by list() and get()
};

struct StoredMessage {
  int64_t id = 0;
  std::string conversation_id;
  std::string role;  // system, user, assistant, tool (a tool's result: meta.name = the function)
  std::string content;
  std::string status;  // complete, streaming, stopped, error, interrupted
  std::string error;   // with status error
  // ttft_ms, tokens, tokens_per_s, finish_reason, notice...; an answer that calls a tool:
  // tool_call = {"name", "arguments" (JSON object text)}
  std::string meta_json = "{}";
  int64_t created_ms = 0;
  int64_t parent_id = 0;          // the message it follows; 0 for the first
  std::vector<int64_t> siblings;  // with messages(): the versions of its place, itself included,
                                  // oldest first
};

// One stored response of the Responses API: a follow-up names it by previous_response_id and
// continues its conversation.
struct StoredResponse {
  std::string id;             // "resp_..."
  std::string kv_key;         // the engine conversation key of its chain (its first response)
  std::string messages_json;  // [{"role","content"}...]: the conversation, its answer included
                              // (without the instructions, which are not carried over)
  std::string response_json;  // the response object as the client got it
  int64_t created_ms = 0;
};

class Store {
 public:
  struct Options {
    // PostgreSQL's password when `spec` is a postgres:// URL (read from --db-password-file);
    // empty: libpq's own PGPASSWORD / PGPASSFILE / ~/.pgpass.
    std::string password;
    // This node's name (host:port): its answers in progress are marked so, and only its own
    // are turned "interrupted" when it starts again.
    std::string node;
  };
  // Opens (creating the schema if needed, migrating an older one) the database named by
  // `spec`: a postgres:// or postgresql:// URL (database.h), else a SQLite file path
  // (":memory:" for tests).
  static StatusOr<std::unique_ptr<Store>> open(const std::string& spec, const Options& options);
  static StatusOr<std::unique_ptr<Store>> open(const std::string& spec) {
    return open(spec, Options());
  }
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  StatusOr<Conversation> create_conversation(const std::string& title,
                                             const std::string& system_prompt,
                                             const std::string& params_json);
  // Most recently updated first, at most `limit`.
  StatusOr<std::vector<Conversation>> list_conversations(int limit);
  StatusOr<Conversation> get_conversation(const std::string& id);
  // Updates the fields given (nullptr = keep). kNotFound for an unknown id.
  Status update_conversation(const std::string& id, const std::string* title,
                             const std::string* system_prompt, const std::string* params_json);
  // Replaces the conversation's tools (an OpenAI tools array as JSON text, checked by the
  // caller). kNotFound for an unknown id.
  Status set_conversation_tools(const std::string& id, const std::string& tools_json);
  Status delete_conversation(const std::string& id);

  // The branch in view: the path from the first message to the conversation's leaf, each with
  // its siblings. Cost: reads every message of the conversation (all branches).
  StatusOr<std::vector<StoredMessage>> messages(const std::string& conversation_id);
  // Every message of every branch, in id order (export).
  StatusOr<std::vector<StoredMessage>> all_messages(const std::string& conversation_id);
  // Shows the branch through `message_id`: the leaf becomes the newest message under it
  // (following the newest child at each step). kNotFound if it is not in the conversation.
  Status select_branch(const std::string& conversation_id, int64_t message_id);
  StatusOr<StoredMessage> get_message(int64_t id);
  // Adds a message after `parent_id` (-1: after the leaf, i.e. appended to the branch in view;
  // 0: a first message) and makes it the leaf; returns it with its id. Bumps the
  // conversation's updated_ms.
  StatusOr<StoredMessage> add_message(const std::string& conversation_id, const std::string& role,
                                      const std::string& content, const std::string& status,
                                      const std::string& meta_json = "{}", int64_t parent_id = -1);
  // Sets the content, status, error and meta of a message (the streaming answer as it grows).
  Status update_message(int64_t id, const std::string& content, const std::string& status,
                        const std::string& error, const std::string& meta_json);

  // The conversation with all its messages as one JSON document (export).
  StatusOr<std::string> export_json(const std::string& id);

  // Responses API. put_response stores (or replaces) one; get/delete give kNotFound for an
  // unknown id.
  Status put_response(const StoredResponse& r);
  StatusOr<StoredResponse> get_response(const std::string& id);
  Status delete_response(const std::string& id);

 private:
  Store(std::unique_ptr<Database> db, std::string node);
  Status migrate();
  Status begin();
  Status rollback();
  // Under mutex_.
  StatusOr<std::vector<StoredMessage>> all_messages_locked(const std::string& conversation_id);
  // 0: no message yet. `lock`: inside a transaction, holds the conversation's row until it
  // ends (PostgreSQL; SQLite's BEGIN IMMEDIATE already holds the whole file).
  StatusOr<int64_t> leaf_locked(const std::string& conversation_id, bool lock = false);
  // Also bumps updated_ms to `updated_ms` when it is > 0 (a new message, not a switch).
  Status set_leaf_locked(const std::string& conversation_id, int64_t leaf_id,
                         int64_t updated_ms = 0);

  std::mutex mutex_;
  std::unique_ptr<Database> db_;
  std::string node_;
};

// A conversation and a message as the page's API and the export write them (params and meta as
// JSON objects; stored text that does not parse reads as {}; tools as an array in the order
// the page sent them, hence an ordered_json).
nlohmann::ordered_json conversation_json(const Conversation& c);
nlohmann::json message_json(const StoredMessage& m);

// Milliseconds since the Unix epoch.
int64_t now_unix_ms();

}  // namespace glm::store
