// Database: the few things the conversation store asks of a SQL database, so that one Store
// (store.h) runs on SQLite (one machine) and on PostgreSQL (several nodes sharing it).
//
// SQL is written once, in the subset both speak: parameters are $1..$n (SQLite binds them by
// name), RETURNING, ON CONFLICT ... DO UPDATE, BEGIN/COMMIT/ROLLBACK. What differs (the schema's
// types, row locks) the Store asks dialect() about.
//
// Thread-safety: none; the Store calls a Database under its own mutex. Cost: one round trip
// per call (in-process for SQLite).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::store {

enum class Dialect { kSqlite, kPostgres };

// One statement parameter: text, a 64-bit integer or NULL.
struct Param {
  enum class Kind { kNull, kText, kInt };
  Kind kind = Kind::kNull;
  std::string text;
  int64_t integer = 0;
  static Param null() { return {}; }
  Param() = default;
  Param(std::string s) : kind(Kind::kText), text(std::move(s)) {}  // NOLINT: implicit by design
  Param(const char* s) : kind(Kind::kText), text(s) {}             // NOLINT
  Param(int64_t v) : kind(Kind::kInt), integer(v) {}               // NOLINT
};

// A statement's rows (every column as text; NULL reads as "") and the rows it changed.
struct Result {
  std::vector<std::vector<std::string>> rows;
  int64_t changes = 0;
};

class Database {
 public:
  virtual ~Database() = default;
  virtual Dialect dialect() const = 0;
  // One statement with parameters $1..$n.
  virtual StatusOr<Result> query(const std::string& sql, const std::vector<Param>& params) = 0;
  // Statements without parameters, separated by ';' (schema, BEGIN, COMMIT).
  virtual Status exec(const std::string& sql) = 0;
  // Whether `table` has `column` (the schema migrations ask).
  virtual bool has_column(const std::string& table, const std::string& column) = 0;
};

// SQLite file at `path` (":memory:" for tests), created 0600 if absent, WAL mode.
StatusOr<std::unique_ptr<Database>> open_sqlite(const std::string& path);

// PostgreSQL at a libpq URL (postgres://user@host:port/db?sslmode=...; postgresql:// too) or
// key=value string. The password never rides in `url` (it is refused there: a command line
// is visible to every user of the machine): pass it as `password` (read from a file by the
// caller), or let libpq find it in PGPASSWORD or the PGPASSFILE / ~/.pgpass file. A lost
// connection is reopened on the next call; the call that found it lost fails with a clear
// error (the caller's request fails, the process lives).
StatusOr<std::unique_ptr<Database>> open_postgres(const std::string& url,
                                                  const std::string& password);

// Opens the database named by `spec` (a postgres:// URL or a SQLite path) and closes it: the
// error a gateway would meet, before starting one. Cost: one connection.
Status check_database(const std::string& spec, const std::string& password);

// True for the URLs open_postgres takes (postgres:// or postgresql://).
bool is_postgres_url(const std::string& spec);

}  // namespace glm::store
