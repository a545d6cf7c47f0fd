#include "gateway/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/json.h"
#include "core/log.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;

Status db_error(sqlite3* db, const std::string& what) {
  return Status(ErrorCode::kInternal,
                what + ": " + sqlite3_errmsg(db) + " (check the --db file and its disk)");
}

// One prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  bool ok() const { return stmt_ != nullptr; }
  Stmt& text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& integer(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(stmt_); }
  std::string col_text(int i) {
    const unsigned char* p = sqlite3_column_text(stmt_, i);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, i)))
             : std::string();
  }
  int64_t col_int(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

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

Conversation read_conversation(Stmt& s) {
  Conversation c;
  c.id = s.col_text(0);
  c.title = s.col_text(1);
  c.system_prompt = s.col_text(2);
  c.params_json = s.col_text(3);
  c.created_ms = s.col_int(4);
  c.updated_ms = s.col_int(5);
  c.n_messages = static_cast<int>(s.col_int(6));
  c.tools_json = s.col_text(7);
  return c;
}

constexpr const char* kMsgColumns =
    "id, conversation_id, role, content, status, error, meta, created_ms, parent_id";

StoredMessage read_message(Stmt& s) {
  StoredMessage m;
  m.id = s.col_int(0);
  m.conversation_id = s.col_text(1);
  m.role = s.col_text(2);
  m.content = s.col_text(3);
  m.status = s.col_text(4);
  m.error = s.col_text(5);
  m.meta_json = s.col_text(6);
  m.created_ms = s.col_int(7);
  m.parent_id = s.col_int(8);  // NULL reads as 0
  return m;
}

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

StatusOr<std::unique_ptr<Store>> Store::open(const std::string& path) {
  sqlite3* db = nullptr;
  // Conversations are private: create the file 0600 before SQLite does (it would use the
  // umask, typically 0644); SQLite gives its -wal and -shm files the database's permissions.
  if (path != ":memory:" && path.rfind("file:", 0) != 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    Status st(ErrorCode::kInvalidArgument, "cannot open the conversation database '" + path +
                                               "': " + (db ? sqlite3_errmsg(db) : "out of memory") +
                                               " (pass a writable path with --db)");
    sqlite3_close(db);
    return st;
  }
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, 5000);
  GLM_RETURN_IF_ERROR(store->exec("PRAGMA journal_mode=WAL"));
  GLM_RETURN_IF_ERROR(store->exec("PRAGMA synchronous=NORMAL"));
  GLM_RETURN_IF_ERROR(store->exec("PRAGMA foreign_keys=ON"));
  GLM_RETURN_IF_ERROR(store->exec(
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
      " meta TEXT NOT NULL DEFAULT '{}', created_ms INTEGER NOT NULL, parent_id INTEGER);"
      "CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);"
      "CREATE INDEX IF NOT EXISTS conversations_by_update ON conversations(updated_ms);"
      "CREATE TABLE IF NOT EXISTS responses ("
      " id TEXT PRIMARY KEY, kv_key TEXT NOT NULL, messages TEXT NOT NULL,"
      " response TEXT NOT NULL, created_ms INTEGER NOT NULL);"));
  // Databases made before conversations had tools get the column (an empty list each).
  if (!Stmt(db, "SELECT tools FROM conversations LIMIT 0").ok()) {
    GLM_RETURN_IF_ERROR(
        store->exec("ALTER TABLE conversations ADD COLUMN tools TEXT NOT NULL DEFAULT '[]'"));
  }
  // ... and before messages had branches: each message follows the one before it, and the
  // leaf is the last one (the single branch they had).
  if (!Stmt(db, "SELECT parent_id FROM messages LIMIT 0").ok()) {
    GLM_RETURN_IF_ERROR(
        store->exec("BEGIN;"
                    "ALTER TABLE messages ADD COLUMN parent_id INTEGER;"
                    "ALTER TABLE conversations ADD COLUMN leaf_id INTEGER;"
                    "UPDATE messages SET parent_id = (SELECT MAX(p.id) FROM messages p"
                    " WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id);"
                    "UPDATE conversations SET leaf_id = (SELECT MAX(m.id) FROM messages m"
                    " WHERE m.conversation_id = conversations.id);"
                    "COMMIT;"));
  }
  GLM_RETURN_IF_ERROR(
      store->exec("CREATE INDEX IF NOT EXISTS messages_by_parent ON messages(parent_id)"));
  // Answers that were streaming when a previous gateway died keep their text, marked as such.
  GLM_RETURN_IF_ERROR(
      store->exec("UPDATE messages SET status='interrupted' WHERE status='streaming'"));
  return store;
}

Store::~Store() { sqlite3_close(db_); }

Status Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Status(ErrorCode::kInternal,
                  "conversation database: " + msg + " (check the --db file and its disk)");
  }
  return Status::Ok();
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
  Stmt s(db_,
         "INSERT INTO conversations(id, title, system_prompt, params, created_ms, updated_ms)"
         " VALUES(?1, ?2, ?3, ?4, ?5, ?5)");
  if (!s.ok()) return db_error(db_, "create conversation");
  s.text(1, c.id).text(2, c.title).text(3, c.system_prompt).text(4, c.params_json);
  s.integer(5, c.created_ms);
  if (s.step() != SQLITE_DONE) return db_error(db_, "create conversation");
  return c;
}

StatusOr<std::vector<Conversation>> Store::list_conversations(int limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string sql = std::string("SELECT ") + kConvColumns +
                    " FROM conversations c ORDER BY c.updated_ms DESC, c.rowid DESC LIMIT ?1";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return db_error(db_, "list conversations");
  s.integer(1, limit);
  std::vector<Conversation> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(read_conversation(s));
  if (rc != SQLITE_DONE) return db_error(db_, "list conversations");
  return out;
}

StatusOr<Conversation> Store::get_conversation(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string sql = std::string("SELECT ") + kConvColumns + " FROM conversations c WHERE c.id=?1";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return db_error(db_, "get conversation");
  s.text(1, id);
  const int rc = s.step();
  if (rc == SQLITE_ROW) return read_conversation(s);
  if (rc == SQLITE_DONE)
    return not_found("no conversation '" + id + "' (list them: GET /api/conversations)");
  return db_error(db_, "get conversation");
}

Status Store::update_conversation(const std::string& id, const std::string* title,
                                  const std::string* system_prompt,
                                  const std::string* params_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stmt s(db_,
         "UPDATE conversations SET title=COALESCE(?2, title),"
         " system_prompt=COALESCE(?3, system_prompt), params=COALESCE(?4, params),"
         " updated_ms=?5 WHERE id=?1");
  if (!s.ok()) return db_error(db_, "update conversation");
  s.text(1, id);
  if (title) s.text(2, *title);
  if (system_prompt) s.text(3, *system_prompt);
  if (params_json) s.text(4, *params_json);
  s.integer(5, now_unix_ms());
  if (s.step() != SQLITE_DONE) return db_error(db_, "update conversation");
  if (sqlite3_changes(db_) == 0) return not_found("no conversation '" + id + "'");
  return Status::Ok();
}

Status Store::set_conversation_tools(const std::string& id, const std::string& tools_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stmt s(db_, "UPDATE conversations SET tools=?2, updated_ms=?3 WHERE id=?1");
  if (!s.ok()) return db_error(db_, "set tools");
  s.text(1, id).text(2, tools_json.empty() ? "[]" : tools_json).integer(3, now_unix_ms());
  if (s.step() != SQLITE_DONE) return db_error(db_, "set tools");
  if (sqlite3_changes(db_) == 0) return not_found("no conversation '" + id + "'");
  return Status::Ok();
}

Status Store::delete_conversation(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stmt s(db_, "DELETE FROM conversations WHERE id=?1");
  if (!s.ok()) return db_error(db_, "delete conversation");
  s.text(1, id);
  if (s.step() != SQLITE_DONE) return db_error(db_, "delete conversation");
  if (sqlite3_changes(db_) == 0) return not_found("no conversation '" + id + "'");
  return Status::Ok();
}

Status Store::put_response(const StoredResponse& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stmt s(db_,
         "INSERT OR REPLACE INTO responses(id, kv_key, messages, response, created_ms) "
         "VALUES(?1, ?2, ?3, ?4, ?5)");
  if (!s.ok()) return db_error(db_, "store response");
  s.text(1, r.id).text(2, r.kv_key).text(3, r.messages_json).text(4, r.response_json);
  s.integer(5, r.created_ms);
  if (s.step() != SQLITE_DONE) return db_error(db_, "store response");
  return Status::Ok();
}

StatusOr<StoredResponse> Store::get_response(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stmt s(db_, "SELECT id, kv_key, messages, response, created_ms FROM responses WHERE id=?1");
  if (!s.ok()) return db_error(db_, "read response");
  s.text(1, id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return not_found("no stored response '" + id + "'");
  if (rc != SQLITE_ROW) return db_error(db_, "read response");
  return StoredResponse{s.col_text(0), s.col_text(1), s.col_text(2), s.col_text(3), s.col_int(4)};
}

Status Store::delete_response(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stmt s(db_, "DELETE FROM responses WHERE id=?1");
  if (!s.ok()) return db_error(db_, "delete response");
  s.text(1, id);
  if (s.step() != SQLITE_DONE) return db_error(db_, "delete response");
  if (sqlite3_changes(db_) == 0) return not_found("no stored response '" + id + "'");
  return Status::Ok();
}

StatusOr<std::vector<StoredMessage>> Store::all_messages(const std::string& conversation_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_messages_locked(conversation_id);
}

StatusOr<std::vector<StoredMessage>> Store::all_messages_locked(
    const std::string& conversation_id) {
  std::string sql =
      std::string("SELECT ") + kMsgColumns + " FROM messages WHERE conversation_id=?1 ORDER BY id";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return db_error(db_, "list messages");
  s.text(1, conversation_id);
  std::vector<StoredMessage> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(read_message(s));
  if (rc != SQLITE_DONE) return db_error(db_, "list messages");
  return out;
}

StatusOr<int64_t> Store::leaf_locked(const std::string& conversation_id) {
  Stmt s(db_, "SELECT COALESCE(leaf_id, 0) FROM conversations WHERE id=?1");
  if (!s.ok()) return db_error(db_, "read the conversation's leaf");
  s.text(1, conversation_id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return not_found("no conversation '" + conversation_id + "'");
  if (rc != SQLITE_ROW) return db_error(db_, "read the conversation's leaf");
  return s.col_int(0);
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
  Stmt s(db_,
         "UPDATE conversations SET leaf_id=?2, updated_ms=COALESCE(?3, updated_ms) WHERE id=?1");
  if (!s.ok()) return db_error(db_, "set the conversation's leaf");
  s.text(1, conversation_id).integer(2, leaf_id);
  if (updated_ms > 0) s.integer(3, updated_ms);  // unbound: NULL, updated_ms kept
  if (s.step() != SQLITE_DONE) return db_error(db_, "set the conversation's leaf");
  return Status::Ok();
}

StatusOr<StoredMessage> Store::get_message(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string sql = std::string("SELECT ") + kMsgColumns + " FROM messages WHERE id=?1";
  Stmt s(db_, sql.c_str());
  if (!s.ok()) return db_error(db_, "get message");
  s.integer(1, id);
  const int rc = s.step();
  if (rc == SQLITE_ROW) return read_message(s);
  if (rc == SQLITE_DONE) return not_found("no message " + std::to_string(id));
  return db_error(db_, "get message");
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
  if (parent_id < 0) {
    auto leaf = leaf_locked(conversation_id);
    if (!leaf.ok()) return leaf.status();
    parent_id = *leaf;
  }
  m.parent_id = parent_id;
  // The row and the leaf change together (a reader never sees a leaf without its message).
  auto rollback = [this] {
    if (Status st = exec("ROLLBACK"); !st.ok()) GLM_LOG_WARN("%s", st.to_string().c_str());
  };
  GLM_RETURN_IF_ERROR(exec("BEGIN"));
  Stmt s(db_,
         "INSERT INTO messages(conversation_id, role, content, status, created_ms, meta, "
         "parent_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6, NULLIF(?7, 0))");
  if (!s.ok()) {
    rollback();
    return db_error(db_, "add message");
  }
  s.text(1, conversation_id).text(2, role).text(3, content).text(4, status);
  s.integer(5, m.created_ms).text(6, m.meta_json).integer(7, parent_id);
  const int rc = s.step();
  if (rc != SQLITE_DONE) {
    Status st = rc == SQLITE_CONSTRAINT ? not_found("no conversation '" + conversation_id + "'")
                                        : db_error(db_, "add message");
    rollback();
    return st;
  }
  m.id = sqlite3_last_insert_rowid(db_);
  Status st = set_leaf_locked(conversation_id, m.id, m.created_ms);
  if (st.ok()) st = exec("COMMIT");
  if (!st.ok()) {
    rollback();
    return st;
  }
  return m;
}

Status Store::update_message(int64_t id, const std::string& content, const std::string& status,
                             const std::string& error, const std::string& meta_json) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stmt s(db_, "UPDATE messages SET content=?2, status=?3, error=?4, meta=?5 WHERE id=?1");
  if (!s.ok()) return db_error(db_, "update message");
  s.integer(1, id).text(2, content).text(3, status).text(4, error);
  s.text(5, meta_json.empty() ? "{}" : meta_json);
  if (s.step() != SQLITE_DONE) return db_error(db_, "update message");
  if (sqlite3_changes(db_) == 0) return not_found("no message " + std::to_string(id));
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

}  // namespace glm::gateway
