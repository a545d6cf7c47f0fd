// The SQLite backend of Database: one connection, WAL mode, foreign keys on.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include "store/database.h"

namespace glm::store {
namespace {

class SqliteDatabase : public Database {
 public:
  explicit SqliteDatabase(sqlite3* db) : db_(db) {}
  ~SqliteDatabase() override { sqlite3_close(db_); }
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  Dialect dialect() const override { return Dialect::kSqlite; }

  StatusOr<Result> query(const std::string& sql, const std::vector<Param>& params) override {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) return error();
    // $N is a named parameter to SQLite: bound by its name, whatever order they appear in.
    for (size_t i = 0; i < params.size(); ++i) {
      const int at = sqlite3_bind_parameter_index(stmt, ("$" + std::to_string(i + 1)).c_str());
      if (at == 0) continue;  // not used by this statement
      const Param& p = params[i];
      if (p.kind == Param::Kind::kText) {
        sqlite3_bind_text(stmt, at, p.text.data(), static_cast<int>(p.text.size()),
                          SQLITE_TRANSIENT);
      } else if (p.kind == Param::Kind::kInt) {
        sqlite3_bind_int64(stmt, at, p.integer);
      }  // kNull: left unbound, which is NULL
    }
    Result r;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      const int n = sqlite3_column_count(stmt);
      std::vector<std::string> row(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        const unsigned char* t = sqlite3_column_text(stmt, c);
        if (t) row[c].assign(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt, c));
      }
      r.rows.push_back(std::move(row));
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return error();
    r.changes = sqlite3_changes(db_);
    return r;
  }

  Status exec(const std::string& sql) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Status(ErrorCode::kInternal,
                    "conversation database: " + msg + " (check the --db file and its disk)");
    }
    return Status::Ok();
  }

  bool has_column(const std::string& table, const std::string& column) override {
    sqlite3_stmt* stmt = nullptr;
    const std::string sql = "SELECT " + column + " FROM " + table + " LIMIT 0";
    const bool ok = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK;
    sqlite3_finalize(stmt);
    return ok;
  }

 private:
  Status error() const {
    return Status(ErrorCode::kInternal, std::string("conversation database: ") +
                                            sqlite3_errmsg(db_) +
                                            " (check the --db file and its disk)");
  }
  sqlite3* db_;
};

}  // namespace

StatusOr<std::unique_ptr<Database>> open_sqlite(const std::string& path) {
  // Conversations are private: create the file 0600 before SQLite does (it would use the
  // umask, typically 0644); SQLite gives its -wal and -shm files the database's permissions.
  if (path != ":memory:" && path.rfind("file:", 0) != 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    Status st(ErrorCode::kInvalidArgument, "cannot open the conversation database '" + path +
                                               "': " + (db ? sqlite3_errmsg(db) : "out of memory") +
                                               " (pass a writable path with --db)");
    sqlite3_close(db);
    return st;
  }
  auto out = std::make_unique<SqliteDatabase>(db);
  sqlite3_busy_timeout(db, 5000);
  GLM_RETURN_IF_ERROR(out->exec("PRAGMA journal_mode=WAL"));
  GLM_RETURN_IF_ERROR(out->exec("PRAGMA synchronous=NORMAL"));
  GLM_RETURN_IF_ERROR(out->exec("PRAGMA foreign_keys=ON"));
  return std::unique_ptr<Database>(std::move(out));
}

}  // namespace glm::store
