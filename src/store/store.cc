#include "store/store.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/json.h"
#include "core/log.h"
#include "store/database.h"

namespace glm::store {
namespace {

using json = nlohmann::json;
using Row = std::vector<std::string>;

std::string new_conversation_id() {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  static const char kHex[] = "0123456789abcdef";
  std::string id = "c";
  uint64_t v = rng();
  for (int i = 0; i < 16; ++i, v >>= 4) id += kHex[v & 15];
  return id;
}

constexpr const char* kConvColumns =
    "c.id, c.title, c.system_prompt, c.params, c.created_ms, c.updated_ms, "
    "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id), c.tools";

int64_t to_int(const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); }

Conversation read_conversation(const Row& r) {
  Conversation c;
  c.id = r[0];
  c.title = r[1];
  c.system_prompt = r[2];
  c.params_json = r[3];
  c.created_ms = to_int(r[4]);
  c.updated_ms = to_int(r[5]);
  c.n_messages = static_cast<int>(to_int(r[6]));
  c.tools_json = r[7];
  return c;
}

constexpr const char* kMsgColumns =
    "id, conversation_id, role, content, status, error, meta, created_ms, parent_id";

StoredMessage read_message(const Row& r) {
  StoredMessage m;
  m.id = to_int(r[0]);
  m.conversation_id = r[1];
  m.role = r[2];
  m.content = r[3];
  m.status = r[4];
  m.error = r[5];
  m.meta_json = r[6];
  m.created_ms = to_int(r[7]);
  m.parent_id = to_int(r[8]);  // NULL reads as 0
  return m;
}

// The schema as SQLite first had it (its types kept: INTEGER PRIMARY KEY is SQLite's rowid)
// and as PostgreSQL gets it (64-bit integers, a sequence for the ids and one for the order of
// creation, which SQLite's rowid gives).
constexpr const char* kSqliteSchema =
    "CREATE TABLE IF NOT EXISTS conversations ("
    " id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '',"
    " system_prompt TEXT NOT NULL DEFAULT '', params TEXT NOT NULL DEFAULT '{}',"
    " created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,"
    " tools TEXT NOT NULL DEFAULT '[]', leaf_id INTEGER);"
    "CREATE TABLE IF NOT EXISTS messages ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    " role TEXT NOT NULL, content TEXT NOT NULL DEFAULT '',"
    " status TEXT NOT NULL DEFAULT 'complete', error TEXT NOT NULL DEFAULT '',"
    " meta TEXT NOT NULL DEFAULT '{}', created_ms INTEGER NOT NULL, parent_id INTEGER,"
    " node TEXT NOT NULL DEFAULT '');"
    "CREATE TABLE IF NOT EXISTS responses ("
    " id TEXT PRIMARY KEY, kv_key TEXT NOT NULL, messages TEXT NOT NULL,"
    " response TEXT NOT NULL, created_ms INTEGER NOT NULL);";
constexpr const char* kPostgresSchema =
    "CREATE TABLE IF NOT EXISTS conversations ("
    " id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '',"
    " system_prompt TEXT NOT NULL DEFAULT '', params TEXT NOT NULL DEFAULT '{}',"
    " created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL,"
    " tools TEXT NOT NULL DEFAULT '[]', leaf_id BIGINT, seq BIGSERIAL);"
    "CREATE TABLE IF NOT EXISTS messages ("
    " id BIGSERIAL PRIMARY KEY,"
    " conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
    " role TEXT NOT NULL, content TEXT NOT NULL DEFAULT '',"
    " status TEXT NOT NULL DEFAULT 'complete', error TEXT NOT NULL DEFAULT '',"
    " meta TEXT NOT NULL DEFAULT '{}', created_ms BIGINT NOT NULL, parent_id BIGINT,"
    " node TEXT NOT NULL DEFAULT '');"
    "CREATE TABLE IF NOT EXISTS responses ("
    " id TEXT PRIMARY KEY, kv_key TEXT NOT NULL, messages TEXT NOT NULL,"
    " response TEXT NOT NULL, created_ms BIGINT NOT NULL);";

json parse_or_empty(const std::string& s) {
  auto j = parse_json(s, "stored JSON");
  return j.ok() ? *j : json::object();
}

nlohmann::ordered_json tools_or_none(const std::string& s) {
  auto j = parse_ordered_json(s, "stored tools");
  return j.ok() && j->is_array() ? *j : nlohmann::ordered_json::array();
}

}  // namespace

nlohmann::ordered_json conversation_json(const Conversation& c) {
  return {{"id", c.id},
          {"title", c.title},
          {"system_prompt", c.system_prompt},
          {"params", parse_or_empty(c.params_json)},
          {"tools", tools_or_none(c.tools_json)},
          {"created_ms", c.created_ms},
          {"updated_ms", c.updated_ms},
          {"n_messages", c.n_messages}};
}

json message_json(const StoredMessage& m) {
  json j = {{"id", m.id},
            {"role", m.role},
            {"content", m.content},
            {"status", m.status},
            {"error", m.error},
            {"meta", parse_or_empty(m.meta_json)},
            {"created_ms", m.created_ms},
            {"parent_id", m.parent_id}};
  if (m.siblings.size() > 1) j["siblings"] = m.siblings;  // only a place with versions
  return j;
}

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status check_database(const std::string& spec, const std::string& password) {
  auto db = is_postgres_url(spec) ? open_postgres(spec, password) : open_sqlite(spec);
  return db.ok() ? Status::Ok() : db.status();
}

StatusOr<std::unique_ptr<Store>> Store::open(const std::string& spec, const Options& options) {
  auto db = is_postgres_url(spec) ? open_postgres(spec, options.password) : open_sqlite(spec);
  if (!db.ok()) return db.status();
  std::unique_ptr<Store> store(new Store(std::move(db).value(), options.node));
  GLM_RETURN_IF_ERROR(store->migrate());
  return store;
}

Store::Store(std::unique_ptr<Database> db, std::string node)
    : db_(std::move(db)), node_(std::move(node)) {}

Store::~Store() = default;

// The schema, created or brought up to date. Every step is idempotent, so nodes starting
// together against one PostgreSQL database may all run it (one transaction each there).
Status Store::migrate() {
  const bool pg = db_->dialect() == Dialect::kPostgres;
  // Several nodes starting at once: one migrates at a time (released at COMMIT).
  if (pg) GLM_RETURN_IF_ERROR(db_->exec("BEGIN; SELECT pg_advisory_xact_lock(7283917)"));
  Status st = [&]() -> Status {
    GLM_RETURN_IF_ERROR(db_->exec(pg ? kPostgresSchema : kSqliteSchema));
    // Databases made before conversations had tools get the column (an empty list each).
    if (!db_->has_column("conversations", "tools")) {
      GLM_RETURN_IF_ERROR(
          db_->exec("ALTER TABLE conversations ADD COLUMN tools TEXT NOT NULL DEFAULT '[]'"));
    }
    // ... and before messages had branches: each message follows the one before it, and the
    // leaf is the last one (the single branch they had).
    if (!db_->has_column("messages", "parent_id")) {
      GLM_RETURN_IF_ERROR(
          db_->exec(std::string(pg ? "" : "BEGIN;") +
                    "ALTER TABLE messages ADD COLUMN parent_id INTEGER;"
                    "ALTER TABLE conversations ADD COLUMN leaf_id INTEGER;"
                    "UPDATE messages SET parent_id = (SELECT MAX(p.id) FROM messages p"
                    " WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id);"
                    "UPDATE conversations SET leaf_id = (SELECT MAX(m.id) FROM messages m"
                    " WHERE m.conversation_id = conversations.id);" +
                    (pg ? "" : "COMMIT;")));
    }
    // ... and before nodes shared one database: their answers were all this node's.
    if (!db_->has_column("messages", "node")) {
      GLM_RETURN_IF_ERROR(
          db_->exec("ALTER TABLE messages ADD COLUMN node TEXT NOT NULL DEFAULT ''"));
    }
    GLM_RETURN_IF_ERROR(db_->exec(
        "CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);"
        "CREATE INDEX IF NOT EXISTS conversations_by_update ON conversations(updated_ms);"
        "CREATE INDEX IF NOT EXISTS messages_by_parent ON messages(parent_id)"));
    // Answers that were streaming when this node's previous gateway died keep their text,
    // marked as such (a database of its own: all of them; a shared one: this node's).
    auto swept = db_->query(
        std::string("UPDATE messages SET status='interrupted' WHERE status='streaming'") +
            (pg ? " AND node=$1" : ""),
        {node_});
    return swept.ok() ? Status::Ok() : swept.status();
  }();
  if (pg) {
    if (!st.ok()) {
      (void)db_->exec("ROLLBACK");
      return st;
    }
    return db_->exec("COMMIT");
  }
  return st;
}

Status Store::begin() {
  // SQLite: take the write lock now, so that the leaf read and the insert after it see no
  // writer between them (another process on the file); PostgreSQL locks the row it reads.
  return db_->exec(db_->dialect() == Dialect::kSqlite ? "BEGIN IMMEDIATE" : "BEGIN");
}

Status Store::rollback() {
  Status st = db_->exec("ROLLBACK");
  if (!st.ok()) GLM_LOG_WARN("%s", st.to_string().c_str());
  return st;
}

StatusOr<Conversation> Store::create_conversation(const std::string& title,
                                                  const std::string& system_prompt,
                                                  const std::string& params_json) {
  Conversation c;
  c.id = new_conversation_id();
  c.title = title;
  c.system_prompt = system_prompt;
  c.params_json = params_json.empty() ? "{}" : params_json;
  c.created_ms = c.updated_ms = now_unix_ms();
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query(
      "INSERT INTO conversations(id, title, system_prompt, params, created_ms, updated_ms)"
      " VALUES($1, $2, $3, $4, $5, $5)",
      {c.id, c.title, c.system_prompt, c.params_json, c.created_ms});
  if (!r.ok()) return r.status();
  return c;
}

StatusOr<std::vector<Conversation>> Store::list_conversations(int limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  const char* created_order = db_->dialect() == Dialect::kSqlite ? "c.rowid" : "c.seq";
  auto r = db_->query(std::string("SELECT ") + kConvColumns +
                          " FROM conversations c ORDER BY c.updated_ms DESC, " + created_order +
                          " DESC LIMIT $1",
                      {int64_t{limit}});
  if (!r.ok()) return r.status();
  std::vector<Conversation> out;
  for (const Row& row : r->rows) out.push_back(read_conversation(row));
  return out;
}

StatusOr<Conversation> Store::get_conversation(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query(std::string("SELECT ") + kConvColumns + " FROM conversations c WHERE c.id=$1",
                      {id});
  if (!r.ok()) return r.status();
  if (r->rows.empty()) {
    return not_found("no conversation '" + id + "' (list them: GET /api/conversations)");
  }
  return read_conversation(r->rows[0]);
}

Status Store::update_conversation(const std::string& id, const std::string* title,
                                  const std::string* system_prompt,
                                  const std::string* params_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto opt = [](const std::string* s) { return s ? Param(*s) : Param::null(); };
  auto r = db_->query(
      "UPDATE conversations SET title=COALESCE($2, title),"
      " system_prompt=COALESCE($3, system_prompt), params=COALESCE($4, params),"
      " updated_ms=$5 WHERE id=$1",
      {id, opt(title), opt(system_prompt), opt(params_json), now_unix_ms()});
  if (!r.ok()) return r.status();
  if (r->changes == 0) return not_found("no conversation '" + id + "'");
  return Status::Ok();
}

Status Store::set_conversation_tools(const std::string& id, const std::string& tools_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query("UPDATE conversations SET tools=$2, updated_ms=$3 WHERE id=$1",
                      {id, tools_json.empty() ? "[]" : tools_json, now_unix_ms()});
  if (!r.ok()) return r.status();
  if (r->changes == 0) return not_found("no conversation '" + id + "'");
  return Status::Ok();
}

Status Store::delete_conversation(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query("DELETE FROM conversations WHERE id=$1", {id});
  if (!r.ok()) return r.status();
  if (r->changes == 0) return not_found("no conversation '" + id + "'");
  return Status::Ok();
}

Status Store::put_response(const StoredResponse& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto q = db_->query(
      "INSERT INTO responses(id, kv_key, messages, response, created_ms) "
      "VALUES($1, $2, $3, $4, $5) ON CONFLICT(id) DO UPDATE SET kv_key=excluded.kv_key,"
      " messages=excluded.messages, response=excluded.response, created_ms=excluded.created_ms",
      {r.id, r.kv_key, r.messages_json, r.response_json, r.created_ms});
  return q.ok() ? Status::Ok() : q.status();
}

StatusOr<StoredResponse> Store::get_response(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query(
      "SELECT id, kv_key, messages, response, created_ms FROM responses WHERE id=$1", {id});
  if (!r.ok()) return r.status();
  if (r->rows.empty()) return not_found("no stored response '" + id + "'");
  const Row& row = r->rows[0];
  return StoredResponse{row[0], row[1], row[2], row[3], to_int(row[4])};
}

Status Store::delete_response(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query("DELETE FROM responses WHERE id=$1", {id});
  if (!r.ok()) return r.status();
  if (r->changes == 0) return not_found("no stored response '" + id + "'");
  return Status::Ok();
}

StatusOr<std::vector<StoredMessage>> Store::all_messages(const std::string& conversation_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_messages_locked(conversation_id);
}

StatusOr<std::vector<StoredMessage>> Store::all_messages_locked(
    const std::string& conversation_id) {
  auto r = db_->query(
      std::string("SELECT ") + kMsgColumns + " FROM messages WHERE conversation_id=$1 ORDER BY id",
      {conversation_id});
  if (!r.ok()) return r.status();
  std::vector<StoredMessage> out;
  for (const Row& row : r->rows) out.push_back(read_message(row));
  return out;
}

StatusOr<int64_t> Store::leaf_locked(const std::string& conversation_id, bool lock) {
  const bool row_lock = lock && db_->dialect() == Dialect::kPostgres;
  auto r = db_->query(std::string("SELECT COALESCE(leaf_id, 0) FROM conversations WHERE id=$1") +
                          (row_lock ? " FOR UPDATE" : ""),
                      {conversation_id});
  if (!r.ok()) return r.status();
  if (r->rows.empty()) return not_found("no conversation '" + conversation_id + "'");
  return to_int(r->rows[0][0]);
}

StatusOr<std::vector<StoredMessage>> Store::messages(const std::string& conversation_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto all = all_messages_locked(conversation_id);
  if (!all.ok()) return all.status();
  auto leaf = leaf_locked(conversation_id);
  if (!leaf.ok() && leaf.status().code() == ErrorCode::kNotFound) {
    return std::vector<StoredMessage>();  // no such conversation: no messages
  }
  if (!leaf.ok()) return leaf.status();
  std::map<int64_t, size_t> at;                      // id -> index in *all
  std::map<int64_t, std::vector<int64_t>> children;  // parent id (0: none) -> ids, oldest first
  for (size_t i = 0; i < all->size(); ++i) {
    at[(*all)[i].id] = i;
    children[(*all)[i].parent_id].push_back((*all)[i].id);
  }
  std::vector<StoredMessage> path;
  for (int64_t id = *leaf; id != 0;) {
    auto it = at.find(id);
    if (it == at.end() || path.size() > all->size()) break;  // a broken or cyclic link: stop
    StoredMessage m = (*all)[it->second];
    m.siblings = children[m.parent_id];
    id = m.parent_id;
    path.push_back(std::move(m));
  }
  std::reverse(path.begin(), path.end());
  return path;
}

Status Store::select_branch(const std::string& conversation_id, int64_t message_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto all = all_messages_locked(conversation_id);
  if (!all.ok()) return all.status();
  std::map<int64_t, int64_t> newest_child;  // parent id -> its newest child
  bool found = false;
  for (const StoredMessage& m : *all) {
    newest_child[m.parent_id] = m.id;  // id order: the last one seen is the newest
    found = found || m.id == message_id;
  }
  if (!found) {
    return not_found("message " + std::to_string(message_id) + " is not in conversation " +
                     conversation_id);
  }
  int64_t leaf = message_id;
  for (size_t steps = 0; steps <= all->size(); ++steps) {
    auto it = newest_child.find(leaf);
    if (it == newest_child.end()) break;
    leaf = it->second;
  }
  return set_leaf_locked(conversation_id, leaf);
}

Status Store::set_leaf_locked(const std::string& conversation_id, int64_t leaf_id,
                              int64_t updated_ms) {
  auto r = db_->query(
      "UPDATE conversations SET leaf_id=$2, updated_ms=COALESCE($3, updated_ms) WHERE id=$1",
      {conversation_id, leaf_id, updated_ms > 0 ? Param(updated_ms) : Param::null()});
  return r.ok() ? Status::Ok() : r.status();
}

StatusOr<StoredMessage> Store::get_message(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query(std::string("SELECT ") + kMsgColumns + " FROM messages WHERE id=$1", {id});
  if (!r.ok()) return r.status();
  if (r->rows.empty()) return not_found("no message " + std::to_string(id));
  return read_message(r->rows[0]);
}

StatusOr<StoredMessage> Store::add_message(const std::string& conversation_id,
                                           const std::string& role, const std::string& content,
                                           const std::string& status, const std::string& meta_json,
                                           int64_t parent_id) {
  StoredMessage m;
  m.conversation_id = conversation_id;
  m.role = role;
  m.content = content;
  m.status = status;
  m.meta_json = meta_json.empty() ? "{}" : meta_json;
  m.created_ms = now_unix_ms();
  std::lock_guard<std::mutex> lock(mutex_);
  // The leaf read, the row and the new leaf in one transaction: a reader never sees a leaf
  // without its message, and two nodes adding to one conversation take turns.
  GLM_RETURN_IF_ERROR(begin());
  auto fail = [this](Status st) {
    (void)rollback();
    return st;
  };
  auto leaf = leaf_locked(conversation_id, /*lock=*/true);
  if (!leaf.ok()) return fail(leaf.status());
  m.parent_id = parent_id < 0 ? *leaf : parent_id;
  auto r = db_->query(
      "INSERT INTO messages(conversation_id, role, content, status, created_ms, meta, "
      "parent_id, node) VALUES($1, $2, $3, $4, $5, $6, NULLIF($7, 0), $8) RETURNING id",
      {conversation_id, role, content, status, m.created_ms, m.meta_json, m.parent_id, node_});
  if (!r.ok()) return fail(r.status());
  if (r->rows.empty()) return fail(Status(ErrorCode::kInternal, "add message: no id returned"));
  m.id = to_int(r->rows[0][0]);
  Status st = set_leaf_locked(conversation_id, m.id, m.created_ms);
  if (st.ok()) st = db_->exec("COMMIT");
  if (!st.ok()) return fail(st);
  return m;
}

Status Store::update_message(int64_t id, const std::string& content, const std::string& status,
                             const std::string& error, const std::string& meta_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = db_->query("UPDATE messages SET content=$2, status=$3, error=$4, meta=$5 WHERE id=$1",
                      {id, content, status, error, meta_json.empty() ? "{}" : meta_json});
  if (!r.ok()) return r.status();
  if (r->changes == 0) return not_found("no message " + std::to_string(id));
  return Status::Ok();
}

StatusOr<std::string> Store::export_json(const std::string& id) {
  auto conv = get_conversation(id);
  if (!conv.ok()) return conv.status();
  auto msgs = all_messages(id);  // every branch: parent_id links them, leaf_id names the one shown
  if (!msgs.ok()) return msgs.status();
  auto leaf = [&]() -> int64_t {
    std::lock_guard<std::mutex> lock(mutex_);
    auto l = leaf_locked(id);
    return l.ok() ? *l : 0;
  }();
  nlohmann::ordered_json j = {{"format", "glmserve-conversation"},
                              {"version", 1},
                              {"id", conv->id},
                              {"title", conv->title},
                              {"system_prompt", conv->system_prompt},
                              {"params", parse_or_empty(conv->params_json)},
                              {"tools", tools_or_none(conv->tools_json)},
                              {"created_ms", conv->created_ms},
                              {"updated_ms", conv->updated_ms},
                              {"leaf_id", leaf},
                              {"messages", nlohmann::ordered_json::array()}};
  for (const StoredMessage& m : *msgs)
    j["messages"].push_back(nlohmann::ordered_json(message_json(m)));
  return dump_json(j, 2);
}

}  // namespace glm::store
