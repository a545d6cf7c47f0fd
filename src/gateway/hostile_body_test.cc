// Bodies an attacker with access to the port could send: every route that reads a body gets
// 100,000 nested brackets (this crashed `glmserve web` once: nlohmann's parser recurses per
// level), wrong field types and non-objects, and answers 400 while the gateway keeps serving.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

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
                          {"POST", "/v1/chat/completions"}};
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
  auto edit = t.post("/api/conversations/" + id + "/chat",
                     R"({"content":"hi","edit_message_id":"3"})");
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
