// The PostgreSQL backend of Database (libpq): one connection, reopened when lost.
#include <libpq-fe.h>

#include <cstdlib>
#include <memory>

#include "store/database.h"

namespace glm::store {
namespace {

constexpr unsigned kInt8Oid = 20;  // pg_type.h: INT8OID
constexpr unsigned kTextOid = 25;  // pg_type.h: TEXTOID

// libpq's messages span lines ("connection to server ... failed: FATAL: ..."): one line.
std::string one_line(const char* msg) {
  std::string s = msg ? msg : "unknown error";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::string out;
  for (char c : s) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  }
  return out;
}

constexpr const char* kHint =
    " (check --db, the password in --db-password-file, PGPASSFILE or PGPASSWORD, and that "
    "PostgreSQL is up)";

class PostgresDatabase : public Database {
 public:
  explicit PostgresDatabase(PGconn* conn) : conn_(conn) {}
  ~PostgresDatabase() override { PQfinish(conn_); }
  PostgresDatabase(const PostgresDatabase&) = delete;
  PostgresDatabase& operator=(const PostgresDatabase&) = delete;

  Dialect dialect() const override { return Dialect::kPostgres; }

  StatusOr<Result> query(const std::string& sql, const std::vector<Param>& params) override {
    GLM_RETURN_IF_ERROR(connected());
    std::vector<unsigned> types(params.size(), 0);
    std::vector<const char*> values(params.size(), nullptr);
    std::vector<std::string> ints(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      if (p.kind == Param::Kind::kText) {
        types[i] = kTextOid;
        values[i] = p.text.c_str();
      } else if (p.kind == Param::Kind::kInt) {
        types[i] = kInt8Oid;
        ints[i] = std::to_string(p.integer);
        values[i] = ints[i].c_str();
      }  // kNull: a NULL of the type the statement gives it
    }
    std::unique_ptr<PGresult, decltype(&PQclear)> res(
        PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), types.data(),
                     values.data(), nullptr, nullptr, 0),
        &PQclear);
    const ExecStatusType st = PQresultStatus(res.get());
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) return error(res.get());
    Result r;
    const int n_rows = PQntuples(res.get()), n_cols = PQnfields(res.get());
    r.rows.reserve(static_cast<size_t>(n_rows));
    for (int i = 0; i < n_rows; ++i) {
      std::vector<std::string> row(static_cast<size_t>(n_cols));
      for (int c = 0; c < n_cols; ++c) {
        if (!PQgetisnull(res.get(), i, c)) {
          row[c].assign(PQgetvalue(res.get(), i, c), PQgetlength(res.get(), i, c));
        }
      }
      r.rows.push_back(std::move(row));
    }
    r.changes = std::atoll(PQcmdTuples(res.get()));
    return r;
  }

  Status exec(const std::string& sql) override {
    GLM_RETURN_IF_ERROR(connected());
    std::unique_ptr<PGresult, decltype(&PQclear)> res(PQexec(conn_, sql.c_str()), &PQclear);
    const ExecStatusType st = PQresultStatus(res.get());
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) return error(res.get());
    return Status::Ok();
  }

  bool has_column(const std::string& table, const std::string& column) override {
    auto r = query(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = $1 AND column_name = $2",
        {table, column});
    return r.ok() && !r->rows.empty();
  }

 private:
  // A connection lost since the last call (the server restarted, the network broke) is
  // reopened once here; the call fails if it cannot be.
  Status connected() {
    if (PQstatus(conn_) == CONNECTION_OK && !broken_) return Status::Ok();
    PQreset(conn_);
    broken_ = PQstatus(conn_) != CONNECTION_OK;
    if (!broken_) return Status::Ok();
    return Status(ErrorCode::kUnavailable,
                  "conversation database unreachable: " + one_line(PQerrorMessage(conn_)) + kHint);
  }
  Status error(const PGresult* res) {
    // The connection lost mid-call (libpq's own error: no SQLSTATE; or the server's
    // connection and shutdown classes, 08 and 57P): the next call reconnects.
    const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    const std::string sqlstate = state ? state : "";
    if (PQstatus(conn_) != CONNECTION_OK || sqlstate.empty() || sqlstate.rfind("08", 0) == 0 ||
        sqlstate.rfind("57P", 0) == 0) {
      broken_ = true;
      const char* msg = res ? PQresultErrorMessage(res) : PQerrorMessage(conn_);
      return Status(ErrorCode::kUnavailable,
                    "conversation database unreachable: " + one_line(msg) + kHint);
    }
    return Status(ErrorCode::kInternal,
                  "conversation database: " + one_line(PQresultErrorMessage(res)));
  }
  PGconn* conn_;
  bool broken_ = false;  // a call found the connection lost: the next one reopens it
};

void ignore_notice(void*, const char*) {}  // "relation already exists, skipping" and the like

}  // namespace

bool is_postgres_url(const std::string& spec) {
  return spec.rfind("postgres://", 0) == 0 || spec.rfind("postgresql://", 0) == 0;
}

StatusOr<std::unique_ptr<Database>> open_postgres(const std::string& url,
                                                  const std::string& password) {
  char* parse_error = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &parse_error);
  if (opts == nullptr) {
    std::string msg = one_line(parse_error ? parse_error : "out of memory");
    PQfreemem(parse_error);
    return Status(ErrorCode::kInvalidArgument,
                  "bad --db URL: " + msg + " (postgres://USER@HOST:PORT/DB, no password)");
  }
  bool has_password = false;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == "password" && o->val != nullptr && *o->val != '\0') {
      has_password = true;
    }
  }
  PQconninfoFree(opts);
  if (has_password) {
    return Status(ErrorCode::kInvalidArgument,
                  "--db carries a password, which every user of this machine can read on the "
                  "command line: remove it and put it in --db-password-file, PGPASSFILE or "
                  "PGPASSWORD");
  }
  // Earlier keywords are defaults that the URL's own may override; the password comes last.
  std::vector<const char*> keys = {"connect_timeout", "application_name", "dbname"};
  std::vector<const char*> values = {"5", "glmserve", url.c_str()};
  if (!password.empty()) {
    keys.push_back("password");
    values.push_back(password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) return Status(ErrorCode::kInternal, "libpq: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    Status st(ErrorCode::kInvalidArgument,
              "cannot open the conversation database: " + one_line(PQerrorMessage(conn)) + kHint);
    PQfinish(conn);
    return st;
  }
  PQsetNoticeProcessor(conn, ignore_notice, nullptr);
  return std::unique_ptr<Database>(std::make_unique<PostgresDatabase>(conn));
}

}  // namespace glm::store
