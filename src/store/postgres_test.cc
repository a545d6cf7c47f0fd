// The PostgreSQL backend's failures, against a real (throwaway) cluster: bad URLs and
// passwords get one clear line at open; an outage mid-run fails calls with a clear error, the
// process goes on, and the store works again once the server is back.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "store/database.h"
#include "store/pg_cluster.h"
#include "store/store.h"

namespace glm::store {
namespace {

class PostgresStore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pg_ = new testing::PgCluster();
    if (!pg_->start()) why_ = pg_->why();
  }
  static void TearDownTestSuite() { delete pg_; }
  void SetUp() override {
    if (!why_.empty()) GTEST_SKIP() << "no PostgreSQL cluster: " << why_;
  }
  static Store::Options with_password(const std::string& pw) {
    Store::Options o;
    o.password = pw;
    o.node = "test:1";
    return o;
  }
  static inline testing::PgCluster* pg_ = nullptr;
  static inline std::string why_;
};

bool one_line(const std::string& s) { return s.find('\n') == std::string::npos; }

TEST_F(PostgresStore, APasswordInTheUrlIsRefusedBeforeConnecting) {
  auto s = Store::open("postgres://glm:hunter2@127.0.0.1:1/db");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--db-password-file"), std::string::npos)
      << s.status().message();
  EXPECT_EQ(s.status().message().find("hunter2"), std::string::npos);  // not echoed either
}

TEST_F(PostgresStore, AWrongPasswordIsOneClearLine) {
  auto s = Store::open(pg_->url(), with_password("not-the-password"));
  ASSERT_FALSE(s.ok());
  const std::string msg = s.status().message();
  EXPECT_NE(msg.find("password authentication failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--db-password-file"), std::string::npos) << msg;
  EXPECT_TRUE(one_line(msg)) << msg;
  EXPECT_TRUE(Store::open(pg_->url(), with_password(testing::PgCluster::kPassword)).ok());
}

TEST_F(PostgresStore, PasswordFromLibpqsOwnPgpassfile) {
  const std::string file = pg_->dir() + "/pgpass-test";
  {
    std::ofstream f(file);
    f << "*:*:*:" << testing::PgCluster::kUser << ":" << testing::PgCluster::kPassword << "\n";
  }
  ::chmod(file.c_str(), 0600);
  ::setenv("PGPASSFILE", file.c_str(), 1);
  auto s = Store::open(pg_->url());  // no password given: libpq reads the file
  ::unsetenv("PGPASSFILE");
  EXPECT_TRUE(s.ok()) << s.status().to_string();
}

TEST_F(PostgresStore, AnUnreachableServerIsOneClearLine) {
  auto s =
      Store::open("postgresql://glm@/postgres?host=/nonexistent-dir&port=1", with_password("x"));
  ASSERT_FALSE(s.ok());
  const std::string msg = s.status().message();
  EXPECT_NE(msg.find("cannot open the conversation database"), std::string::npos) << msg;
  EXPECT_NE(msg.find("PostgreSQL is up"), std::string::npos) << msg;
  EXPECT_TRUE(one_line(msg)) << msg;
  auto bad = Store::open("postgresql://[oops", with_password("x"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad --db URL"), std::string::npos)
      << bad.status().message();
}

TEST_F(PostgresStore, AnOutageFailsCallsClearlyAndTheStoreRecovers) {
  ASSERT_TRUE(pg_->psql("CREATE DATABASE outage"));
  auto s = Store::open(pg_->url("outage"), with_password(testing::PgCluster::kPassword));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::string id = (*s)->create_conversation("before", "", "{}")->id;
  pg_->stop();
  for (int i = 0; i < 2; ++i) {  // the call that finds it gone, and one that cannot reconnect
    auto c = (*s)->get_conversation(id);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), ErrorCode::kUnavailable) << c.status().to_string();
    EXPECT_NE(c.status().message().find("conversation database unreachable"), std::string::npos)
        << c.status().message();
    EXPECT_TRUE(one_line(c.status().message()));
  }
  auto m = (*s)->add_message(id, "user", "lost?", "complete");  // a transaction: fails whole
  EXPECT_EQ(m.status().code(), ErrorCode::kUnavailable);
  ASSERT_TRUE(pg_->restart()) << pg_->why();
  auto c = (*s)->get_conversation(id);  // reconnected
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->title, "before");
  EXPECT_EQ(c->n_messages, 0);
  EXPECT_TRUE((*s)->add_message(id, "user", "after", "complete").ok());
}

}  // namespace
}  // namespace glm::store
