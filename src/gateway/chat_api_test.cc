// The page's API over HTTP against the FakeEngine: conversations (create, list, rename, delete,
// export), the streaming chat that stores as it goes, stop, regenerate, edit-and-resend, and
// failures that keep the partial answer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway/http_test_util.h"

namespace glm::gateway::testing {
namespace {

using json = nlohmann::json;

std::string create_conversation(TestGateway& t, const json& body = json::object()) {
  auto r = t.post("/api/conversations", body.dump());
  EXPECT_EQ(r.status, 201) << r.body;
  return json::parse(r.body)["id"];
}

std::vector<json> chat(TestGateway& t, const std::string& conv, const json& body) {
  auto r = t.post("/api/conversations/" + conv + "/chat", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "text/event-stream");
  std::vector<json> out;
  for (const std::string& d : sse_data(r.body)) out.push_back(json::parse(d));
  return out;
}

json conversation(TestGateway& t, const std::string& id) {
  auto r = t.get("/api/conversations/" + id);
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body);
}

std::string tokens_of(const std::vector<json>& events) {
  std::string s;
  for (const json& e : events) {
    if (e["type"] == "token") s += e["text"].get<std::string>();
  }
  return s;
}

TEST(GatewayChat, StreamsAndStoresBothMessages) {
  TestGateway t("chat1");
  const std::string id = create_conversation(t, {{"system_prompt", "Be brief."}});
  auto events = chat(t, id, {{"content", "[zh] 你好"}, {"params", {{"temperature", 0.3}}}});
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["type"], "start");
  EXPECT_EQ(events.front()["user_message"]["content"], "[zh] 你好");
  EXPECT_EQ(events.back()["type"], "done");
  EXPECT_EQ(events.back()["status"], "complete");
  EXPECT_EQ(tokens_of(events), "你好，世界！");
  json c = conversation(t, id);
  EXPECT_EQ(c["title"], "[zh] 你好");
  EXPECT_EQ(c["params"]["temperature"], 0.3);
  ASSERT_EQ(c["messages"].size(), 2u);
  EXPECT_EQ(c["messages"][0]["role"], "user");
  EXPECT_EQ(c["messages"][1]["role"], "assistant");
  EXPECT_EQ(c["messages"][1]["content"], "你好，世界！");
  EXPECT_EQ(c["messages"][1]["status"], "complete");
  EXPECT_GE(c["messages"][1]["meta"]["ttft_ms"].get<double>(), 0);
  // Labelled with the model that wrote it (the engine's health names it).
  EXPECT_EQ(c["messages"][1]["meta"]["model"], "fake-glm");
  // The engine got the system prompt, the message, the conversation id and the parameters.
  auto reqs = t.fake().requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].conversation, id);
  ASSERT_EQ(reqs[0].messages.size(), 2u);
  EXPECT_EQ(reqs[0].messages[0].role, "system");
  EXPECT_EQ(reqs[0].messages[0].content, "Be brief.");
  EXPECT_FLOAT_EQ(reqs[0].params.temperature, 0.3);
  // A second turn carries the whole history.
  chat(t, id, {{"content", "again"}});
  reqs = t.fake().requests();
  ASSERT_EQ(reqs.size(), 2u);
  ASSERT_EQ(reqs[1].messages.size(), 4u);
  EXPECT_EQ(reqs[1].messages[2].content, "你好，世界！");
}

TEST(GatewayChat, StopKeepsThePartialAnswer) {
  TestGateway t("chat2");
  const std::string id = create_conversation(t);
  RawHttp raw(t.port());
  raw.send_request("POST", "/api/conversations/" + id + "/chat",
                   json{{"content", "[slow]"}}.dump());
  ASSERT_TRUE(raw.read_until("w2 ", 5000)) << raw.received();
  const size_t start = raw.received().find("\"request_id\":\"");
  ASSERT_NE(start, std::string::npos);
  const size_t b = start + 14;
  const std::string request_id = raw.received().substr(b, raw.received().find('"', b) - b);
  auto stop = t.post("/api/stop", json{{"request_id", request_id}}.dump());
  EXPECT_EQ(stop.status, 200) << stop.body;
  ASSERT_TRUE(raw.read_until("", 5000));
  auto events = sse_data(raw.result().body);
  ASSERT_FALSE(events.empty());
  json done = json::parse(events.back());
  EXPECT_EQ(done["type"], "done");
  EXPECT_EQ(done["finish_reason"], "cancelled");
  EXPECT_EQ(done["status"], "stopped");
  EXPECT_TRUE(t.fake().wait_cancelled(request_id, 1000));
  json c = conversation(t, id);
  ASSERT_EQ(c["messages"].size(), 2u);
  const std::string partial = c["messages"][1]["content"];
  EXPECT_EQ(c["messages"][1]["status"], "stopped");
  EXPECT_EQ(partial.rfind("w0 w1 w2 ", 0), 0u) << partial;
  EXPECT_LT(partial.size(), 600u);  // far from the 200 words
  EXPECT_EQ(t.post("/api/stop", json{{"request_id", request_id}}.dump()).status, 404);
}

// "w0 " ... "w39 ": the whole [medium] answer of the fake engine.
std::string medium_answer() {
  std::string s;
  for (int i = 0; i < 40; ++i) s += "w" + std::to_string(i) + " ";
  return s;
}

// The events of a stream read so far that arrived whole.
std::vector<SseEvent> whole_events(const RawHttp& raw) {
  std::string body = raw.result().body;
  body.erase(body.rfind("\n\n") == std::string::npos ? 0 : body.rfind("\n\n") + 2);
  return sse_events(body);
}

// Polls `cond` every 5 ms for up to 3 s; true once it holds.
bool wait_for(const std::function<bool()>& cond) {
  for (int i = 0; i < 600; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// Polls the conversation until its last message is no longer streaming (2 s at most).
json settled(TestGateway& t, const std::string& id) {
  json c;
  for (int i = 0; i < 100; ++i) {
    c = conversation(t, id);
    if (c["messages"].back()["status"] != "streaming") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return c;
}

TEST(GatewayChat, ADroppedPageReattachesAndGetsWhatItMissedThenTheRest) {
  TestGateway t("reattach");
  const std::string id = create_conversation(t);
  std::string before;
  long last_id = -1;
  {
    RawHttp raw(t.port());
    raw.send_request("POST", "/api/conversations/" + id + "/chat",
                     json{{"content", "[medium]"}}.dump());
    ASSERT_TRUE(raw.read_until("w3 ", 5000)) << raw.received();
    for (const SseEvent& e : whole_events(raw)) {
      const json j = json::parse(e.data);
      if (j["type"] == "token") before += j["text"].get<std::string>();
      EXPECT_GT(e.id, last_id);  // every event has an id, in order
      last_id = e.id;
    }
  }  // the connection drops (a reload)
  // The answer goes on without a client (a few more tokens come while none follows); the
  // conversation says so.
  json c;
  int events_alone = -1;
  ASSERT_TRUE(wait_for([&] {
    c = conversation(t, id);
    if (!c.contains("live") || c["live"]["followers"] != 0) return false;
    if (events_alone < 0) events_alone = c["live"]["events"];
    return c["live"]["events"].get<int>() >= events_alone + 3;
  })) << c.dump();
  EXPECT_EQ(c["messages"][1]["status"], "streaming");
  EXPECT_EQ(c["live"]["assistant_message_id"], c["messages"][1]["id"]);
  // One answer at a time per conversation: a new turn now is refused, nothing stored.
  auto second = t.post("/api/conversations/" + id + "/chat", json{{"content", "x"}}.dump());
  EXPECT_EQ(second.status, 400) << second.body;
  EXPECT_NE(second.body.find("is being answered"), std::string::npos) << second.body;
  // From the start: what was generated so far comes merged into one token event.
  RawHttp replay(t.port());
  replay.send_request("GET", "/api/conversations/" + id + "/live?from=0", "");
  ASSERT_TRUE(replay.read_until("w3 ", 5000)) << replay.received();
  const std::vector<SseEvent> replayed = whole_events(replay);
  ASSERT_GE(replayed.size(), 2u);
  EXPECT_EQ(replayed[0].id, 0);
  EXPECT_EQ(json::parse(replayed[0].data)["type"], "start");
  std::string first_token;
  for (const SseEvent& e : replayed) {
    const json j = json::parse(e.data);
    if (j["type"] == "token" && first_token.empty()) first_token = j["text"];
  }
  EXPECT_EQ(first_token.rfind("w0 w1 w2 w3 ", 0), 0u) << first_token;
  replay.close();
  // After the last event it had: what it missed, then the rest, then done.
  RawHttp again(t.port());
  again.send_request("GET", "/api/conversations/" + id + "/live", "",
                     {{"Last-Event-ID", std::to_string(last_id)}});
  ASSERT_TRUE(again.read_until("", 5000));
  EXPECT_EQ(again.result().status, 200);
  EXPECT_EQ(again.result().header("Content-Type"), "text/event-stream");
  const std::vector<SseEvent> rest = sse_events(again.result().body);
  ASSERT_FALSE(rest.empty());
  EXPECT_GT(rest.front().id, last_id);  // the missed tokens, merged: the id of the last of them
  EXPECT_GT(rest.size(), 2u);           // then the rest as it came
  std::string after;
  for (const SseEvent& e : rest) {
    const json j = json::parse(e.data);
    if (j["type"] == "token") after += j["text"].get<std::string>();
  }
  const json done = json::parse(rest.back().data);
  EXPECT_EQ(done["type"], "done");
  EXPECT_EQ(done["status"], "complete");
  EXPECT_EQ(before + after, medium_answer());
  EXPECT_TRUE(t.fake().cancelled().empty());  // the drop cancelled nothing
  c = conversation(t, id);
  EXPECT_EQ(c["messages"][1]["status"], "complete");
  EXPECT_EQ(c["messages"][1]["content"], medium_answer());
  // Ended: nothing to follow any more; bad ids are refused.
  EXPECT_EQ(t.get("/api/conversations/" + id + "/live").status, 404);
  EXPECT_EQ(t.get("/api/conversations/nope/live").status, 404);
}

TEST(GatewayChat, ReattachRefusesIdsThatWereNotSent) {
  TestGateway t("reattachbad");
  const std::string id = create_conversation(t);
  RawHttp raw(t.port());
  raw.send_request("POST", "/api/conversations/" + id + "/chat",
                   json{{"content", "[medium]"}}.dump());
  ASSERT_TRUE(raw.read_until("w1 ", 5000)) << raw.received();
  EXPECT_EQ(t.get("/api/conversations/" + id + "/live?from=99999").status, 400);
  EXPECT_EQ(t.get("/api/conversations/" + id + "/live?from=-1").status, 400);
  EXPECT_EQ(t.get("/api/conversations/" + id + "/live", {{"Last-Event-ID", "x"}}).status, 400);
}

TEST(GatewayChat, AnAnswerNobodyFollowsForTooLongIsStoppedAndStored) {
  GatewayOptions o;
  o.detached_answer_ms = 200;
  TestGateway t("detached", o);
  const std::string id = create_conversation(t);
  {
    RawHttp raw(t.port());
    raw.send_request("POST", "/api/conversations/" + id + "/chat",
                     json{{"content", "[slow]"}}.dump());
    ASSERT_TRUE(raw.read_until("w1 ", 5000));
  }
  auto reqs = t.fake().requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_TRUE(t.fake().wait_cancelled(reqs[0].id, 5000));
  const json c = settled(t, id);
  EXPECT_EQ(c["messages"][1]["status"], "stopped");
  EXPECT_EQ(c["messages"][1]["content"].get<std::string>().rfind("w0 w1 ", 0), 0u);
  EXPECT_FALSE(c.contains("live"));
}

TEST(GatewayChat, DrainFinishesTheAnswersInProgressAndRefusesNewOnes) {
  TestGateway t("drain");
  const std::string id = create_conversation(t);
  const std::string other = create_conversation(t);
  RawHttp raw(t.port());
  raw.send_request("POST", "/api/conversations/" + id + "/chat",
                   json{{"content", "[medium]"}}.dump());
  ASSERT_TRUE(raw.read_until("w3 ", 5000)) << raw.received();
  bool drained = false;
  // As `glmserve web` on SIGTERM: drain, then close everything at once.
  std::thread drain([&] {
    drained = t.gateway().drain(10000);
    t.gateway().stop();
  });
  while (!t.gateway().draining()) std::this_thread::yield();
  auto refused = t.post("/api/conversations/" + other + "/chat", json{{"content", "hi"}}.dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(conversation(t, other)["messages"].size(), 0u);  // nothing stored for it
  const bool closed = raw.read_until("", 5000);
  drain.join();
  ASSERT_TRUE(closed);
  // The end reached the page before the connections closed.
  const std::vector<std::string> events = sse_data(raw.result().body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(json::parse(events.back())["status"], "complete") << events.back();
  EXPECT_TRUE(drained);
  EXPECT_EQ(t.gateway().store().messages(id)->back().content, medium_answer());
}

TEST(GatewayChat, AStopCutsTheAnswerAsInterruptedAndContinueFinishesIt) {
  const std::string db = "/tmp/glm-gwt-" + std::to_string(::getpid()) + "-cut.db";
  ::unlink(db.c_str());
  GatewayOptions o;
  o.db_path = db;
  std::string id;
  {
    TestGateway t("cut1", o);
    id = create_conversation(t);
    RawHttp raw(t.port());
    raw.send_request("POST", "/api/conversations/" + id + "/chat",
                     json{{"content", "[medium]"}}.dump());
    ASSERT_TRUE(raw.read_until("w3 ", 5000)) << raw.received();
    t.gateway().stop();  // past the drain bound, or killed: the answer is cut
  }
  {
    TestGateway t("cut2", o);
    json c = conversation(t, id);
    ASSERT_EQ(c["messages"].size(), 2u);
    EXPECT_EQ(c["messages"][1]["status"], "interrupted");
    const std::string partial = c["messages"][1]["content"];
    ASSERT_EQ(partial.rfind("w0 w1 w2 w3 ", 0), 0u) << partial;
    ASSERT_LT(partial.size(), medium_answer().size());
    auto events = chat(t, id, {{"continue", true}});
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.front()["prefix"], partial);
    EXPECT_EQ(events.front()["assistant_message_id"], c["messages"][1]["id"]);
    EXPECT_EQ(events.back()["status"], "complete") << events.back().dump();
    EXPECT_EQ(partial + tokens_of(events), medium_answer());
    // The engine got the question and the partial answer as tokens it had generated.
    auto reqs = t.fake().requests();
    ASSERT_EQ(reqs.size(), 1u);
    ASSERT_EQ(reqs[0].messages.size(), 1u);
    EXPECT_EQ(reqs[0].messages[0].content, "[medium]");
    size_t words = 0;
    for (size_t i = 0; i < partial.size(); ++i) words += partial[i] == ' ';
    EXPECT_EQ(reqs[0].resume.size(), words);
    c = conversation(t, id);
    ASSERT_EQ(c["messages"].size(), 2u);  // the same answer, grown
    EXPECT_EQ(c["messages"][1]["content"], medium_answer());
    EXPECT_EQ(c["messages"][1]["status"], "complete");
    // A complete answer is not continued.
    EXPECT_EQ(t.post("/api/conversations/" + id + "/chat", json{{"continue", true}}.dump()).status,
              400);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((db + suffix).c_str());
}

TEST(GatewayChat, EditAndResendAndRegenerate) {
  TestGateway t("chat4");
  const std::string id = create_conversation(t);
  chat(t, id, {{"content", "one"}});
  chat(t, id, {{"content", "two"}});
  json c = conversation(t, id);
  ASSERT_EQ(c["messages"].size(), 4u);
  const int64_t first_user = c["messages"][0]["id"];
  // Edit the first message: everything from it on is replaced.
  auto events = chat(t, id, {{"content", "uno"}, {"edit_message_id", first_user}});
  EXPECT_EQ(tokens_of(events), "Echo: uno");
  c = conversation(t, id);
  ASSERT_EQ(c["messages"].size(), 2u);
  EXPECT_EQ(c["messages"][0]["content"], "uno");
  EXPECT_EQ(c["messages"][1]["content"], "Echo: uno");
  // Regenerate: the last answer is replaced; the user message stays.
  events = chat(t, id, {{"regenerate", true}});
  EXPECT_EQ(events.front()["user_message"], nullptr);
  c = conversation(t, id);
  ASSERT_EQ(c["messages"].size(), 2u);
  EXPECT_EQ(c["messages"][0]["content"], "uno");
  auto reqs = t.fake().requests();
  ASSERT_EQ(reqs.back().messages.size(), 1u);
  EXPECT_EQ(reqs.back().messages[0].content, "uno");
  // Editing a message of another conversation is refused.
  const std::string other = create_conversation(t);
  auto r = t.post("/api/conversations/" + other + "/chat",
                  json{{"content", "x"}, {"edit_message_id", first_user}}.dump());
  EXPECT_EQ(r.status, 404);
}

TEST(GatewayChat, AnAnswerResumedAfterAnEngineCrashIsStoredComplete) {
  TestGateway t("chatresume");
  const std::string id = create_conversation(t);
  auto events = chat(t, id, {{"content", "[crash-once][resume] go on"}});
  ASSERT_EQ(events.back()["type"], "done") << events.back().dump();
  EXPECT_EQ(tokens_of(events), "Echo: [crash-once][resume] go on");
  int queued = 0;
  for (const json& e : events) queued += e["type"] == "queued";
  EXPECT_EQ(queued, 1);  // the resumed request's own events are not relayed again
  json c = conversation(t, id);
  EXPECT_EQ(c["messages"][1]["status"], "complete");
  EXPECT_EQ(c["messages"][1]["content"], "Echo: [crash-once][resume] go on");
}

TEST(GatewayChat, StopWhileTheEngineIsAwayStopsAtOnce) {
  TestGateway t("chatresumestop");
  const std::string id = create_conversation(t);
  RawHttp raw(t.port());
  raw.send_request("POST", "/api/conversations/" + id + "/chat",
                   json{{"content", "[slow][resume]"}}.dump());
  ASSERT_TRUE(raw.read_until("w3 ", 10000)) << raw.received();
  const std::string got = raw.received();
  const size_t at = got.find("\"request_id\":\"");
  ASSERT_NE(at, std::string::npos);
  const std::string request_id = got.substr(at + 14, got.find('"', at + 14) - at - 14);
  t.fake().stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(t.post("/api/stop", json{{"request_id", request_id}}.dump()).status, 200);
  ASSERT_TRUE(raw.read_until("", 5000));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  std::vector<json> tail;
  for (const std::string& d : sse_data(raw.result().body)) tail.push_back(json::parse(d));
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ(tail.back()["type"], "done") << tail.back().dump();
  EXPECT_EQ(tail.back()["status"], "stopped");
  json c = conversation(t, id);
  EXPECT_EQ(c["messages"][1]["status"], "stopped");
  EXPECT_EQ(c["messages"][1]["content"].get<std::string>().rfind("w0 w1 w2 w3 ", 0), 0u);
  t.fake().start();
}

TEST(GatewayChat, FailuresAreStoredWithTheirStatus) {
  TestGateway t("chat5");
  const std::string id = create_conversation(t);
  auto events = chat(t, id, {{"content", "[crash] go"}});
  ASSERT_EQ(events.back()["type"], "error");
  EXPECT_NE(events.back()["message"].get<std::string>().find("crashed or restarted"),
            std::string::npos);
  json c = conversation(t, id);
  EXPECT_EQ(c["messages"][1]["status"], "error");
  EXPECT_EQ(c["messages"][1]["content"], "Echo: [crash");  // the 3 tokens before the crash
  // Refused at once (busy): the user's message is kept, the answer records the error.
  events = chat(t, id, {{"content", "[busy]"}});
  EXPECT_EQ(events.back()["type"], "error");
  EXPECT_EQ(events.back()["code"], "busy");
  c = conversation(t, id);
  ASSERT_EQ(c["messages"].size(), 4u);
  EXPECT_EQ(c["messages"][2]["content"], "[busy]");
  EXPECT_EQ(c["messages"][3]["status"], "error");
  // Engine down: same.
  t.fake().stop();
  events = chat(t, id, {{"content", "hello?"}});
  EXPECT_EQ(events.back()["code"], "unavailable");
}

TEST(GatewayChat, NoticeOfTrimmedHistoryReachesThePageAndTheStore) {
  TestGateway t("chat6");
  const std::string id = create_conversation(t);
  auto events = chat(t, id, {{"content", "[trim] hi"}});
  bool notice = false;
  for (const json& e : events) notice |= e["type"] == "notice" && e["dropped_messages"] == 2;
  EXPECT_TRUE(notice);
  json c = conversation(t, id);
  EXPECT_EQ(c["messages"][1]["meta"]["dropped_messages"], 2);
}

TEST(GatewayChat, ConversationCrud) {
  TestGateway t("crud");
  const std::string a = create_conversation(t, {{"title", "first"}});
  const std::string b = create_conversation(t, {{"title", "second"}});
  auto list = json::parse(t.get("/api/conversations").body)["conversations"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["id"], b);  // most recent first
  auto r = t.request("PATCH", "/api/conversations/" + a, json{{"title", "renamed"}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(conversation(t, a)["title"], "renamed");
  chat(t, a, {{"content", "<b>hi</b>"}});
  auto ex = t.get("/api/conversations/" + a + "/export");
  EXPECT_EQ(ex.status, 200);
  EXPECT_NE(ex.header("Content-Disposition").find("attachment"), std::string::npos);
  json doc = json::parse(ex.body);
  EXPECT_EQ(doc["format"], "glmserve-conversation");
  EXPECT_EQ(doc["title"], "renamed");
  ASSERT_EQ(doc["messages"].size(), 2u);
  EXPECT_EQ(doc["messages"][0]["content"], "<b>hi</b>");
  EXPECT_EQ(t.request("DELETE", "/api/conversations/" + a).status, 200);
  EXPECT_EQ(t.get("/api/conversations/" + a).status, 404);
  EXPECT_EQ(t.request("DELETE", "/api/conversations/" + a).status, 404);
  EXPECT_EQ(json::parse(t.get("/api/conversations").body)["conversations"].size(), 1u);
  EXPECT_EQ(t.post("/api/conversations/nope/chat", json{{"content", "x"}}.dump()).status, 404);
  EXPECT_EQ(t.post("/api/conversations/" + b + "/chat", json{{"content", ""}}.dump()).status, 400);
}

TEST(GatewayChat, WrongTypesAreRefusedNeverAnInternalError) {
  TestGateway t("types");
  const std::string id = create_conversation(t);
  const std::string chat_path = "/api/conversations/" + id + "/chat";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/api/conversations", R"({"title":5,"system_prompt":[1],"params":"x"})"},
      {chat_path, R"({"content":5})"},
      {chat_path, R"({"content":"x","regenerate":"yes","edit_message_id":"1"})"},
      {chat_path, R"({"content":"x","params":{"temperature":"hot"}})"},
      {chat_path, R"([1,2,3])"},
      {chat_path, "{not json"},
      {"/api/stop", R"({"request_id":42})"},
  };
  for (const auto& [path, body] : cases) {
    auto r = t.post(path, body);
    EXPECT_LT(r.status, 500) << path << " " << body << " -> " << r.status << " " << r.body;
    EXPECT_GT(r.status, 0);
  }
  auto r = t.request("PATCH", "/api/conversations/" + id, R"({"title":{"a":1}})");
  EXPECT_LT(r.status, 500) << r.body;
}

TEST(GatewayChat, SurvivesGatewayRestart) {
  const std::string db = "/tmp/glm-gwt-" + std::to_string(::getpid()) + "-restart.db";
  ::unlink(db.c_str());
  GatewayOptions o;
  o.db_path = db;
  std::string id;
  {
    TestGateway t("restart1", o);
    id = create_conversation(t);
    chat(t, id, {{"content", "remember me"}});
  }
  {
    TestGateway t("restart2", o);
    json c = conversation(t, id);
    ASSERT_EQ(c["messages"].size(), 2u);
    EXPECT_EQ(c["messages"][1]["content"], "Echo: remember me");
  }
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((db + suffix).c_str());
}

// The page's tools: a conversation holds OpenAI-shaped functions (kept in the order sent), the
// model's call is read from its answer (GLM-4's JSON and ChatGLM3's Python block alike) and
// stored as meta.tool_call, and the result the user gives goes to the model as an observation
// after the call in the model's own format.
TEST(GatewayChat, AToolCallIsStoredAndItsResultIsAnsweredAsAnObservation) {
  TestGateway t("tools1");
  // Keys deliberately not in alphabetical order: the prompt must see them as sent.
  const std::string tools =
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
      R"("properties":{"city":{"type":"string"}},"required":["city"]},)"
      R"("description":"Weather of a city"}}])";
  auto r = t.post("/api/conversations", R"({"title":"w","tools":)" + tools + "}");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string id = json::parse(r.body)["id"];
  EXPECT_EQ(nlohmann::ordered_json::parse(r.body)["tools"].dump(),
            nlohmann::ordered_json::parse(tools).dump());

  for (const char* keyword : {"[tool]", "[tool-py]"}) {
    SCOPED_TRACE(keyword);
    auto events = chat(t, id, {{"content", std::string(keyword) + " weather in Paris?"}});
    std::string name, arguments;
    for (const json& e : events) {
      if (e["type"] == "tool_call") name = e["name"];
      if (e["type"] == "tool_arguments") arguments += e["text"].get<std::string>();
    }
    EXPECT_EQ(name, "get_weather");
    EXPECT_EQ(tokens_of(events), "");  // no raw template text reaches the page
    ASSERT_EQ(events.back()["type"], "done");
    EXPECT_EQ(events.back()["finish_reason"], "tool_calls");
    const json call = events.back()["meta"]["tool_call"];
    EXPECT_EQ(call["name"], "get_weather");
    const json call_args = json::parse(call["arguments"].get<std::string>());
    EXPECT_EQ(call_args, json({{"city", "Paris"}}));
    // GLM-4's arguments stream as generated; ChatGLM3's block is converted whole at the end.
    if (std::string(keyword) == "[tool]") {
      EXPECT_EQ(json::parse(arguments), call_args);
    }
    // The engine got the functions in the order sent, and no forced choice.
    const protocol::Request sent = t.fake().requests().back();
    EXPECT_EQ(sent.tools->dump(),
              nlohmann::ordered_json::array({nlohmann::ordered_json::parse(tools)[0]["function"]})
                  .dump());
    EXPECT_FALSE(sent.constraint.active());

    // The result of the call: stored as a tool message, sent as an observation after the call.
    auto answered = chat(t, id, {{"tool_result", R"({"temp_c": 21})"}});
    ASSERT_EQ(answered.back()["type"], "done") << answered.back().dump();
    EXPECT_EQ(answered.front()["user_message"]["role"], "tool");
    EXPECT_EQ(tokens_of(answered), R"(Echo: {"temp_c": 21})");
    const protocol::Request next = t.fake().requests().back();
    ASSERT_GE(next.messages.size(), 3u);
    const auto& m = next.messages;
    EXPECT_EQ(m[m.size() - 3].role, "user");
    EXPECT_EQ(m[m.size() - 2].role, "assistant");
    EXPECT_EQ(m[m.size() - 2].metadata, "get_weather");
    EXPECT_EQ(json::parse(m[m.size() - 2].arguments), json({{"city", "Paris"}}));
    EXPECT_EQ(m.back().role, "observation");
    EXPECT_EQ(m.back().content, R"({"temp_c": 21})");
  }
  json c = conversation(t, id);
  ASSERT_EQ(c["messages"].size(), 8u);
  EXPECT_EQ(c["messages"][1]["content"], "");
  EXPECT_EQ(c["messages"][1]["meta"]["tool_call"]["name"], "get_weather");
  EXPECT_EQ(c["messages"][2]["role"], "tool");
  EXPECT_EQ(c["messages"][2]["meta"]["name"], "get_weather");
  // Regenerate answers the tool result again (the last thing asked), not the user's message.
  auto again = chat(t, id, {{"regenerate", true}});
  EXPECT_EQ(tokens_of(again), R"(Echo: {"temp_c": 21})");
  EXPECT_EQ(conversation(t, id)["messages"].size(), 8u);
}

TEST(GatewayChat, ToolsAndToolResultsThatDoNotFitAreRefusedByName) {
  TestGateway t("tools2");
  struct Case {
    const char* body;
    const char* names;
  };
  for (const Case& k : {Case{R"({"tools":{"a":1}})", "tools must be an array"},
                        Case{R"({"tools":[{"type":"function","function":{"name":"a b"}}]})",
                             "tools[0].function.name"},
                        Case{R"({"tools":[{"type":"retrieval"}]})", "tools[0] must be"},
                        Case{R"({"tools":[{"type":"function","function":{"name":"f",)"
                             R"("parameters":{"type":"object","patternProperties":{}}}}]})",
                             "tools[0].function.parameters"}}) {
    auto r = t.post("/api/conversations", k.body);
    EXPECT_EQ(r.status, 400) << k.body;
    EXPECT_NE(r.body.find(k.names), std::string::npos) << r.body;
  }
  const std::string id = create_conversation(t);
  // A chat turn's tools are checked before anything of the turn is stored.
  auto bad = t.post("/api/conversations/" + id + "/chat",
                    R"({"content":"hi","tools":[{"type":"function","function":{"name":"a b"}}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("tools[0].function.name"), std::string::npos) << bad.body;
  EXPECT_EQ(conversation(t, id)["messages"].size(), 0u);
  chat(t, id, {{"content", "hello"}});
  // The last answer called no tool: there is nothing to give a result to. Nothing is stored.
  auto r = t.post("/api/conversations/" + id + "/chat", R"({"tool_result":"42"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("not a complete tool call"), std::string::npos) << r.body;
  r = t.post("/api/conversations/" + id + "/chat", R"({"tool_result":"42","content":"x"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(conversation(t, id)["messages"].size(), 2u);
  // A conversation's tools can be replaced (and removed) with PATCH.
  r = t.request("PATCH", "/api/conversations/" + id,
                R"({"tools":[{"type":"function","function":{"name":"f"}}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["tools"][0]["function"]["name"], "f");
  r = t.request("PATCH", "/api/conversations/" + id, R"({"tools":[]})");
  EXPECT_EQ(json::parse(r.body)["tools"], json::array());
}

}  // namespace
}  // namespace glm::gateway::testing
