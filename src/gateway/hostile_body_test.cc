// Bodies an attacker with access to the port could send: every route that reads a body gets
// 100,000 nested brackets (this crashed `glmserve web` once: nlohmann's parser recurses per
// level), wrong field types and non-objects, and answers 400 while the gateway keeps serving.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gateway/http_test_util.h"

namespace glm::gateway::testing {
namespace {

using json = nlohmann::json;

std::string deep_body(int levels) {
  return "{\"title\":" + std::string(levels, '[') + std::string(levels, ']') + "}";
}

TEST(HostileBody, DeeplyNestedJsonOnEveryRouteIsRefused) {
  TestGateway t("deep");
  auto created = t.post("/api/conversations", R"({"title":"x"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = json::parse(created.body)["id"];
  const std::string deep = deep_body(100000);
  struct Route {
    const char* method;
    std::string path;
  };
  const Route routes[] = {{"POST", "/api/conversations"},
                          {"PATCH", "/api/conversations/" + id},
                          {"POST", "/api/conversations/" + id + "/chat"},
                          {"POST", "/api/stop"},
                          {"POST", "/v1/chat/completions"},
                          {"POST", "/v1/completions"},
                          {"POST", "/v1/messages"},
                          {"POST", "/v1/messages/count_tokens"},
                          {"POST", "/v1/responses"},
                          {"POST", "/tokenize"},
                          {"POST", "/detokenize"},
                          {"POST", "/apply-template"}};
  for (const Route& r : routes) {
    auto res = t.request(r.method, r.path, deep);
    EXPECT_EQ(res.status, 400) << r.method << " " << r.path << ": " << res.body;
    EXPECT_NE(res.body.find("nested deeper"), std::string::npos) << res.body;
  }
  // Still serving, and nothing was stored.
  EXPECT_EQ(t.get("/health").status, 200);
  auto list = json::parse(t.get("/api/conversations").body);
  EXPECT_EQ(list["conversations"].size(), 1u);
}

TEST(HostileBody, WrongTypesAreRefusedByName) {
  TestGateway t("types");
  struct Case {
    const char* body;
    const char* mentions;
  };
  const Case cases[] = {
      {R"({"title":123})", "title: expected a string, got number"},
      {R"({"system_prompt":[]})", "system_prompt: expected a string, got array"},
      {R"({"params":"hot"})", "params: expected an object, got string"},
      {R"([1,2])", "must be a JSON object"},
      {R"({"title":)", "not valid JSON"},
  };
  for (const Case& c : cases) {
    auto r = t.post("/api/conversations", c.body);
    EXPECT_EQ(r.status, 400) << c.body << " -> " << r.body;
    EXPECT_NE(r.body.find(c.mentions), std::string::npos) << c.body << " -> " << r.body;
  }
  const std::string id = json::parse(t.post("/api/conversations", "{}").body)["id"];
  auto chat = t.post("/api/conversations/" + id + "/chat", R"({"content":5})");
  EXPECT_EQ(chat.status, 400);
  EXPECT_NE(chat.body.find("content: expected a string"), std::string::npos) << chat.body;
  auto bad_params =
      t.post("/api/conversations/" + id + "/chat", R"({"content":"hi","params":{"top_p":7}})");
  EXPECT_EQ(bad_params.status, 400);
  EXPECT_NE(bad_params.body.find("params.top_p"), std::string::npos) << bad_params.body;
  auto edit =
      t.post("/api/conversations/" + id + "/chat", R"({"content":"hi","edit_message_id":"3"})");
  EXPECT_EQ(edit.status, 400);
  EXPECT_NE(edit.body.find("edit_message_id: expected an integer"), std::string::npos);
  // Nothing was stored by the refused turns.
  auto conv = json::parse(t.get("/api/conversations/" + id).body);
  EXPECT_TRUE(conv["messages"].empty()) << conv.dump();
  // PATCH with a wrong type changes nothing.
  EXPECT_EQ(t.request("PATCH", "/api/conversations/" + id, R"({"title":false})").status, 400);
}

}  // namespace
}  // namespace glm::gateway::testing

namespace glm::gateway::testing {
namespace {

const char* kHiBody = R"({"messages":[{"role":"user","content":"hi"}]})";

// Waits until the engine has a request and the gateway counts it in flight; its id, or "".
std::string wait_for_generation(TestGateway& t) {
  std::string id;
  for (int i = 0; i < 500 && id.empty(); ++i) {
    auto reqs = t.fake().requests();
    if (!reqs.empty()) id = reqs.back().id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int i = 0; i < 500 && !id.empty() && t.gateway().inflight() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return id;
}

TEST(HostileRequest, ApisTakeJsonBodiesOnly) {
  TestGateway t("ctype");
  const char* types[] = {"text/plain", "application/x-www-form-urlencoded",
                         "multipart/form-data; boundary=x", ""};
  // A cross-site page can POST text/plain or a form without a preflight (and the browser
  // always sends its Origin): refused.
  for (const char* type : types) {
    const std::map<std::string, std::string> origin = {{"Origin", "http://evil.example"}};
    auto r = t.post("/v1/chat/completions", kHiBody, origin, type);
    EXPECT_EQ(r.status, 415) << "Content-Type '" << type << "': " << r.body;
    EXPECT_EQ(t.post("/api/conversations", "{}", origin, type).status, 415) << type;
  }
  EXPECT_TRUE(t.fake().requests().empty());
  // Without an Origin (curl -d, scripts) a body that parses as JSON is taken whatever its
  // type claims, and one that does not is a 400 that says so.
  for (const char* type : types) {
    auto r = t.post("/v1/chat/completions", kHiBody, {}, type);
    EXPECT_EQ(r.status, 200) << "Content-Type '" << type << "': " << r.body;
    EXPECT_EQ(t.post("/api/conversations", "{}", {}, type).status, 201) << type;
    auto form = t.post("/v1/chat/completions", "model=m&messages=x", {}, type);
    EXPECT_EQ(form.status, 400) << form.body;
    EXPECT_NE(form.body.find("JSON"), std::string::npos) << form.body;
  }
  EXPECT_EQ(t.fake().requests().size(), 4u);
  // Media types are case-insensitive and may carry parameters.
  EXPECT_EQ(t.post("/v1/chat/completions", kHiBody, {}, "Application/JSON; charset=utf-8").status,
            200);
  EXPECT_EQ(t.post("/api/conversations", "{}", {}, "application/json;charset=UTF-8").status, 201);
}

TEST(HostileRequest, BusyAndUnavailableSayWhenToRetry) {
  TestGateway t("retry");
  auto busy =
      t.post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"[busy] now"}]})");
  EXPECT_EQ(busy.status, 429) << busy.body;
  // The engine's hint (the fake engine says 500 ms), in milliseconds and in whole seconds.
  EXPECT_EQ(busy.header("Retry-After"), "1");
  EXPECT_EQ(busy.header("retry-after-ms"), "500");
}

TEST(HostileRequest, ApiKeySchemeIsCaseInsensitiveAndXApiKeyWorks) {
  GatewayOptions o;
  o.api_key = "s3cret";
  TestGateway t("key", o);
  EXPECT_EQ(t.get("/v1/models").status, 401);
  EXPECT_EQ(t.get("/v1/models", {{"Authorization", "bearer s3cret"}}).status, 200);
  EXPECT_EQ(t.get("/v1/models", {{"Authorization", "BEARER s3cret"}}).status, 200);
  EXPECT_EQ(t.get("/v1/models", {{"x-api-key", "s3cret"}}).status, 200);
  EXPECT_EQ(t.get("/v1/models", {{"x-api-key", "s3cre"}}).status, 401);
  EXPECT_EQ(t.get("/v1/models", {{"Authorization", "Basic s3cret"}}).status, 401);
}

TEST(HostileRequest, DatabaseFileIsPrivate) {
  char dir[] = "/tmp/glm-db-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/c.db";
  {
    auto s = Store::open(path);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    ASSERT_TRUE((*s)->create_conversation("t", "", "{}").ok());
  }
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::filesystem::remove_all(dir);
}

TEST(HostileRequest, DeletingAConversationCancelsItsGeneration) {
  TestGateway t("delconv");
  const std::string id = nlohmann::json::parse(t.post("/api/conversations", "{}").body)["id"];
  std::thread chat(
      [&] { t.post("/api/conversations/" + id + "/chat", R"({"content":"[slow] go"})"); });
  // Wait for the engine to get the request, then delete the conversation.
  const std::string request_id = wait_for_generation(t);
  ASSERT_FALSE(request_id.empty());
  EXPECT_EQ(t.request("DELETE", "/api/conversations/" + id).status, 200);
  EXPECT_TRUE(t.fake().wait_cancelled(request_id, 5000));
  chat.join();
}

TEST(HostileRequest, ACutOpenAiStreamEndsInAnErrorNotStop) {
  TestGateway t("cut");
  HttpResult res;
  std::thread client([&] {
    res = t.post("/v1/chat/completions",
                 R"({"stream":true,"messages":[{"role":"user","content":"[slow] go"}]})");
  });
  const std::string request_id = wait_for_generation(t);
  ASSERT_FALSE(request_id.empty());
  // An operator's stop (as a drain bound does): the client must not see a complete answer.
  auto stop = t.post("/api/stop", nlohmann::json{{"request_id", request_id}}.dump());
  EXPECT_EQ(stop.status, 200) << stop.body;
  client.join();
  const auto events = sse_data(res.body);
  ASSERT_FALSE(events.empty()) << res.body;
  EXPECT_NE(events.back().find("\"error\""), std::string::npos) << events.back();
  EXPECT_NE(events.back().find("cut off"), std::string::npos) << events.back();
  for (const std::string& e : events) {
    EXPECT_EQ(e.find("\"finish_reason\":\"stop\""), std::string::npos) << e;
    EXPECT_NE(e, "[DONE]");
  }
}

}  // namespace
}  // namespace glm::gateway::testing
