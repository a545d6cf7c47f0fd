// What a kill -9 of the gateway leaves of a page's answer: the database as it is while the
// answer streams (read with sqlite3 beside the gateway, as the next start would find it). The
// answer's first text is written as soon as it arrives, then every 250 ms, so a crash in the
// answer's first second keeps what the page already showed.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gateway/http_test_util.h"

namespace glm::gateway::testing {
namespace {

// The stored text of the conversation's assistant message ("" if none yet).
std::string stored_answer(const std::string& db) {
  sqlite3* h = nullptr;
  std::string out;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(h, "SELECT content FROM messages WHERE role = 'assistant'", -1, &s,
                           nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return out;
}

TEST(GatewayCrashStore, AnAnswersFirstTextIsStoredAtOnceThenEveryQuarterSecond) {
  const std::string db = "/tmp/glm-gwt-" + std::to_string(::getpid()) + "-crash.db";
  ::unlink(db.c_str());
  GatewayOptions o;
  o.db_path = db;
  {
    TestGateway t("crash", o);
    auto c = t.post("/api/conversations", "{}");
    ASSERT_EQ(c.status, 201);
    const std::string id = nlohmann::json::parse(c.body)["id"];
    RawHttp raw(t.port());
    const auto t0 = std::chrono::steady_clock::now();
    // [medium]: 40 words 20 ms apart ("w0 " ... "w39 "): the answer's first second.
    raw.send_request("POST", "/api/conversations/" + id + "/chat", R"({"content":"[medium]"})");
    ASSERT_TRUE(raw.read_until("w1 ", 5000)) << raw.received();
    // The page shows "w0 w1 "; the database holds the start of it already (a kill now keeps it).
    std::string stored;
    for (int i = 0; i < 20 && stored.empty(); ++i) {
      stored = stored_answer(db);
      if (stored.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_LT(ms, 800) << "too slow to tell the first second apart";
    EXPECT_EQ(stored.rfind("w0 ", 0), 0u) << "stored after " << ms << " ms: '" << stored << "'";
    // Later, the stored text is never more than ~250 ms (about 13 words) behind the stream.
    ASSERT_TRUE(raw.read_until("w30 ", 5000));
    const std::string later = stored_answer(db);
    EXPECT_NE(later.find("w15 "), std::string::npos) << later;
    ASSERT_TRUE(raw.read_until("\n\n", 5000));
    raw.read_until("\"done\"", 5000);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((db + suffix).c_str());
}

}  // namespace
}  // namespace glm::gateway::testing
