#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "store/database.h"
#include "store/pg_cluster.h"

namespace glm::store {
namespace {

// The store's tests run against both backends: SQLite (":memory:" or a file) and a throwaway
// PostgreSQL cluster (one for the whole binary; a fresh database for each test).
// Started on first use, stopped and removed at exit (a static object's destructor).
testing::PgCluster* cluster() {
  static testing::PgCluster pg;
  static const bool started = [] {
    if (!pg.start()) std::fprintf(stderr, "PostgreSQL: %s\n", pg.why().c_str());
    return pg.why().empty();
  }();
  return started ? &pg : nullptr;
}

class ConversationStore : public ::testing::TestWithParam<Dialect> {
 protected:
  void SetUp() override {
    if (GetParam() == Dialect::kPostgres) {
      if (cluster() == nullptr) GTEST_SKIP() << "no PostgreSQL cluster (see stderr)";
      static int n = 0;
      db_ = "t" + std::to_string(::getpid()) + "_" + std::to_string(++n);
      ASSERT_TRUE(cluster()->psql("CREATE DATABASE " + db_));
      spec_ = cluster()->url(db_);
    } else {
      spec_ = "/tmp/glm-store-" + std::to_string(::getpid()) + ".db";
      ::unlink(spec_.c_str());
    }
  }
  void TearDown() override {
    if (GetParam() == Dialect::kSqlite) {
      for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((spec_ + suffix).c_str());
    }
  }
  StatusOr<std::unique_ptr<Store>> open(const std::string& node = "n1") {
    Store::Options o;
    o.node = node;
    if (GetParam() == Dialect::kPostgres) o.password = testing::PgCluster::kPassword;
    return Store::open(spec_, o);
  }
  std::string spec_, db_;
};

INSTANTIATE_TEST_SUITE_P(Backends, ConversationStore,
                         ::testing::Values(Dialect::kSqlite, Dialect::kPostgres),
                         [](const auto& info) {
                           return info.param == Dialect::kSqlite ? "sqlite" : "postgres";
                         });

TEST_P(ConversationStore, ConversationsAndMessagesRoundTrip) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Store& st = **s;
  auto c = st.create_conversation("t", "sys", R"({"temperature":0.5})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id.size(), 17u);
  auto u = st.add_message(c->id, "user", "你好", "complete");
  auto a = st.add_message(c->id, "assistant", "", "streaming");
  ASSERT_TRUE(u.ok() && a.ok());
  EXPECT_LT(u->id, a->id);
  ASSERT_TRUE(st.update_message(a->id, "partial", "stopped", "", R"({"ttft_ms":3})").ok());
  auto msgs = st.messages(c->id);
  ASSERT_TRUE(msgs.ok());
  ASSERT_EQ(msgs->size(), 2u);
  EXPECT_EQ((*msgs)[0].content, "你好");
  EXPECT_EQ((*msgs)[1].content, "partial");
  EXPECT_EQ((*msgs)[1].status, "stopped");
  EXPECT_EQ((*msgs)[1].meta_json, R"({"ttft_ms":3})");
  auto got = st.get_conversation(c->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->n_messages, 2);
  EXPECT_EQ(got->system_prompt, "sys");
  const std::string title = "new";
  EXPECT_TRUE(st.update_conversation(c->id, &title, nullptr, nullptr).ok());
  EXPECT_EQ(st.get_conversation(c->id)->title, "new");
  EXPECT_EQ(st.get_conversation(c->id)->system_prompt, "sys");  // untouched
  auto doc = st.export_json(c->id);
  ASSERT_TRUE(doc.ok());
  auto j = nlohmann::json::parse(*doc);
  EXPECT_EQ(j["params"]["temperature"], 0.5);
  EXPECT_EQ(j["messages"][0]["content"], "你好");
  EXPECT_TRUE(st.delete_conversation(c->id).ok());
  EXPECT_EQ(st.get_conversation(c->id).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(st.messages(c->id)->size(), 0u);  // cascaded
  EXPECT_EQ(st.add_message(c->id, "user", "x", "complete").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(st.delete_conversation(c->id).code(), ErrorCode::kNotFound);
}

TEST_P(ConversationStore, ReopenKeepsDataAndMarksInterruptedAnswers) {
  std::string id;
  {
    auto s = open();
    ASSERT_TRUE(s.ok());
    id = (*s)->create_conversation("", "", "{}")->id;
    ASSERT_TRUE((*s)->add_message(id, "user", "q", "complete").ok());
    ASSERT_TRUE((*s)->add_message(id, "assistant", "half an ans", "streaming")
                    .ok());  // gateway "dies" here
  }
  auto s = open();
  ASSERT_TRUE(s.ok());
  auto msgs = (*s)->messages(id);
  ASSERT_EQ(msgs->size(), 2u);
  EXPECT_EQ((*msgs)[1].status, "interrupted");
  EXPECT_EQ((*msgs)[1].content, "half an ans");
  auto list = (*s)->list_conversations(10);
  ASSERT_EQ(list->size(), 1u);
}

// Several nodes on one database: what one writes, the others read and continue; a node that
// starts again marks only its own unfinished answers (the others' are still streaming).
TEST_P(ConversationStore, NodesShareConversationsAndKeepTheirOwnAnswers) {
  if (GetParam() == Dialect::kSqlite) GTEST_SKIP() << "one node per SQLite file";
  auto a = open("node-a:8080");
  auto b = open("node-b:8080");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  const std::string id = (*a)->create_conversation("t", "", "{}")->id;
  ASSERT_TRUE((*a)->add_message(id, "user", "q1", "complete").ok());
  ASSERT_TRUE((*a)->add_message(id, "assistant", "a1", "complete").ok());
  ASSERT_TRUE((*b)->add_message(id, "user", "q2", "complete").ok());  // after a's leaf
  auto streaming = (*b)->add_message(id, "assistant", "half", "streaming");
  ASSERT_TRUE(streaming.ok());
  auto seen = (*a)->messages(id);
  ASSERT_EQ(seen->size(), 4u);
  EXPECT_EQ((*seen)[2].parent_id, (*seen)[1].id);
  EXPECT_EQ((*a)->list_conversations(10)->front().n_messages, 4);
  ASSERT_TRUE((*a)->put_response({"resp_1", "resp_1", "[]", "{}", 1}).ok());
  EXPECT_TRUE((*b)->get_response("resp_1").ok());
  a->reset();
  auto a2 = open("node-a:8080");  // node a restarts: b's answer is not its to interrupt
  ASSERT_TRUE(a2.ok());
  EXPECT_EQ((*a2)->get_message(streaming->id)->status, "streaming");
  b->reset();
  auto b2 = open("node-b:8080");  // node b restarts: now it is
  EXPECT_EQ((*b2)->get_message(streaming->id)->status, "interrupted");
}

// Two nodes appending to one conversation at once: every message follows the one before it
// (the leaf is read and moved under a lock), none is lost.
TEST_P(ConversationStore, ConcurrentAppendsFromTwoStoresKeepOneChain) {
  auto a = open("node-a:1");
  auto b = open("node-b:1");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  const std::string id = (*a)->create_conversation("", "", "{}")->id;
  constexpr int kEach = 40;
  auto append = [&](Store* s, const char* who) {
    for (int i = 0; i < kEach; ++i) {
      auto m = s->add_message(id, "user", who + std::to_string(i), "complete");
      ASSERT_TRUE(m.ok()) << m.status().to_string();
    }
  };
  std::thread ta(append, a->get(), "a"), tb(append, b->get(), "b");
  ta.join();
  tb.join();
  auto path = (*a)->messages(id);
  ASSERT_TRUE(path.ok());
  ASSERT_EQ(path->size(), 2u * kEach);  // one branch through all of them
  for (size_t i = 1; i < path->size(); ++i) EXPECT_EQ((*path)[i].parent_id, (*path)[i - 1].id);
}

TEST_P(ConversationStore, BranchesKeepEveryVersionAndShowOne) {
  auto s = open();
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  const std::string c = st.create_conversation("", "", "{}")->id;
  auto ids = [&] {
    std::vector<int64_t> out;
    auto msgs = st.messages(c);
    for (const StoredMessage& m : *msgs) out.push_back(m.id);
    return out;
  };
  const int64_t u1 = st.add_message(c, "user", "q", "complete")->id;
  const int64_t a1 = st.add_message(c, "assistant", "a1", "complete")->id;
  // Regenerate: a second answer to u1, shown instead of the first, which stays.
  const int64_t a2 = st.add_message(c, "assistant", "a2", "complete", "{}", u1)->id;
  EXPECT_EQ(ids(), (std::vector<int64_t>{u1, a2}));
  EXPECT_EQ(st.messages(c)->back().siblings, (std::vector<int64_t>{a1, a2}));
  EXPECT_EQ(st.messages(c)->front().siblings, (std::vector<int64_t>{u1}));
  ASSERT_TRUE(st.select_branch(c, a1).ok());
  EXPECT_EQ(ids(), (std::vector<int64_t>{u1, a1}));
  // Edit: a new first message (parent 0) with its own answer.
  const int64_t e1 = st.add_message(c, "user", "q'", "complete", "{}", 0)->id;
  const int64_t a3 = st.add_message(c, "assistant", "a3", "complete")->id;
  EXPECT_EQ(ids(), (std::vector<int64_t>{e1, a3}));
  EXPECT_EQ(st.messages(c)->front().siblings, (std::vector<int64_t>{u1, e1}));
  // Back to the first version: its newest answer is shown.
  ASSERT_TRUE(st.select_branch(c, u1).ok());
  EXPECT_EQ(ids(), (std::vector<int64_t>{u1, a2}));
  EXPECT_EQ(st.select_branch(c, 999).code(), ErrorCode::kNotFound);
  // The export has every version, linked, and the branch in view.
  auto j = nlohmann::json::parse(*st.export_json(c));
  EXPECT_EQ(j["messages"].size(), 5u);
  EXPECT_EQ(j["leaf_id"], a2);
  EXPECT_EQ(j["messages"][2]["parent_id"], u1);
}

// A database written before conversations had tools and branches (the session-7 schema, made
// here with the sqlite3 library directly) opens, keeps its rows, and gains the columns.
TEST(SqliteStore, ADatabaseWithoutTheToolsColumnIsMigrated) {
  const std::string path = "/tmp/glm-store-old-" + std::to_string(::getpid()) + ".db";
  ::unlink(path.c_str());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE conversations (id TEXT PRIMARY KEY, title TEXT NOT NULL "
                         "DEFAULT '', system_prompt TEXT NOT NULL DEFAULT '', params TEXT NOT "
                         "NULL DEFAULT '{}', created_ms INTEGER NOT NULL, updated_ms INTEGER NOT "
                         "NULL);"
                         "INSERT INTO conversations VALUES('cold', 'old one', '', '{}', 1, 2);"
                         "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE "
                         "CASCADE, role TEXT NOT NULL, content TEXT NOT NULL DEFAULT '', status "
                         "TEXT NOT NULL DEFAULT 'complete', error TEXT NOT NULL DEFAULT '', meta "
                         "TEXT NOT NULL DEFAULT '{}', created_ms INTEGER NOT NULL);"
                         "INSERT INTO messages(conversation_id, role, content, created_ms) VALUES"
                         "('cold', 'user', 'q1', 1), ('cold', 'assistant', 'a1', 1),"
                         "('cold', 'user', 'q2', 1), ('cold', 'assistant', 'a2', 1);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  {
    auto s = Store::open(path);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto c = (*s)->get_conversation("cold");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->title, "old one");
    EXPECT_EQ(c->tools_json, "[]");
    // Its messages became one branch, in order, and a new one follows the last.
    auto msgs = (*s)->messages("cold");
    ASSERT_TRUE(msgs.ok()) << msgs.status().to_string();
    ASSERT_EQ(msgs->size(), 4u);
    EXPECT_EQ((*msgs)[3].content, "a2");
    EXPECT_EQ((*msgs)[3].parent_id, (*msgs)[2].id);
    ASSERT_TRUE((*s)->add_message("cold", "user", "q3", "complete").ok());
    EXPECT_EQ((*s)->messages("cold")->size(), 5u);
    const std::string tools = R"([{"type":"function","function":{"name":"f"}}])";
    ASSERT_TRUE((*s)->set_conversation_tools("cold", tools).ok());
    EXPECT_EQ((*s)->get_conversation("cold")->tools_json, tools);
    EXPECT_EQ((*s)->set_conversation_tools("nope", tools).code(), ErrorCode::kNotFound);
  }
  auto again = Store::open(path);  // a second open finds the column there
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->get_conversation("cold")->tools_json, "[]");
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
}

TEST_P(ConversationStore, ResponsesAreStoredReplacedAndDeleted) {
  auto s = open();
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  EXPECT_EQ(st.get_response("resp_x").status().code(), ErrorCode::kNotFound);
  ASSERT_TRUE(st.put_response({"resp_a", "resp_a", "[1]", "{\"id\":1}", 5}).ok());
  ASSERT_TRUE(st.put_response({"resp_b", "resp_a", "[2]", "{}", 6}).ok());
  auto b = st.get_response("resp_b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->kv_key, "resp_a");
  EXPECT_EQ(b->messages_json, "[2]");
  EXPECT_EQ(b->created_ms, 6);
  ASSERT_TRUE(st.put_response({"resp_b", "resp_a", "[3]", "{}", 7}).ok());  // replaced
  EXPECT_EQ(st.get_response("resp_b")->messages_json, "[3]");
  ASSERT_TRUE(st.delete_response("resp_a").ok());
  EXPECT_EQ(st.delete_response("resp_a").code(), ErrorCode::kNotFound);
  EXPECT_TRUE(st.get_response("resp_b").ok());  // a chain's members are independent rows
}

TEST(SqliteStore, UnwritablePathIsAClearError) {
  auto s = Store::open("/nonexistent-dir/x/conv.db");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--db"), std::string::npos);
}

}  // namespace
}  // namespace glm::store
