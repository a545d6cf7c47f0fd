// Tool calls on the API routes against the FakeEngine: a whole call is sent as the API's call,
// and a call cut by max_tokens is no call on every route, streamed or not: finish_reason
// "length" / stop_reason "max_tokens", and never the model's unfinished syntax as arguments.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gateway/http_test_util.h"

namespace glm::gateway::testing {
namespace {

using json = nlohmann::json;

const char* kTools =
    R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"}},"required":["city"]}}}])";

std::string openai_body(const std::string& keyword, int max_tokens, bool stream) {
  return R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) + R"(,"stream":)" +
         (stream ? "true" : "false") + R"(,"tools":)" + kTools +
         R"(,"messages":[{"role":"user","content":")" + keyword + R"( weather?"}]})";
}

std::string anthropic_body(const std::string& keyword, int max_tokens, bool stream) {
  return R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) + R"(,"stream":)" +
         (stream ? "true" : "false") +
         R"(,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":)"
         R"({"city":{"type":"string"}},"required":["city"]}}],)"
         R"("messages":[{"role":"user","content":")" +
         keyword + R"( weather?"}]})";
}

// The streamed chunks joined as the SDKs join them.
struct Joined {
  std::string content, name, arguments, finish;
  int call_chunks = 0;
};

Joined join_openai_stream(const std::string& body) {
  Joined j;
  for (const SseEvent& e : sse_events(body)) {
    if (e.data == "[DONE]") continue;
    const json c = json::parse(e.data);
    if (c.contains("error")) ADD_FAILURE() << e.data;
    if (c["choices"].empty()) continue;
    const json& ch = c["choices"][0];
    if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
      j.content += ch["delta"]["content"].get<std::string>();
    if (ch["delta"].contains("tool_calls")) {
      ++j.call_chunks;
      const json& f = ch["delta"]["tool_calls"][0]["function"];
      if (f.contains("name")) j.name += f["name"].get<std::string>();
      if (f.contains("arguments")) j.arguments += f["arguments"].get<std::string>();
    }
    if (!ch["finish_reason"].is_null()) j.finish = ch["finish_reason"];
  }
  return j;
}

TEST(GatewayToolCalls, OpenAiWholeCallStreamedAndNot) {
  TestGateway t("tools-whole");
  for (const char* kw : {"[tool]", "[tool-py]"}) {
    SCOPED_TRACE(kw);
    auto r = t.post("/v1/chat/completions", openai_body(kw, 100, false));
    ASSERT_EQ(r.status, 200) << r.body;
    const json m = json::parse(r.body)["choices"][0];
    EXPECT_EQ(m["finish_reason"], "tool_calls");
    ASSERT_EQ(m["message"]["tool_calls"].size(), 1u);
    EXPECT_EQ(
        json::parse(m["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
        json({{"city", "Paris"}}));
    auto s = t.post("/v1/chat/completions", openai_body(kw, 100, true));
    const Joined j = join_openai_stream(s.body);
    EXPECT_EQ(j.finish, "tool_calls");
    EXPECT_EQ(j.name, "get_weather");
    EXPECT_EQ(json::parse(j.arguments), json({{"city", "Paris"}}));
  }
}

// The answer is read once, by the engine: its events' pieces (Event::tool) are what every API
// sends, whatever the text says (the fake engine's text here is no call, its pieces are one).
TEST(GatewayToolCalls, TheEnginesReadingIsWhatClientsGet) {
  TestGateway t("tools-pieces");
  auto r = t.post("/v1/chat/completions", openai_body("[tool-pieces]", 100, false));
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body)["choices"][0];
  EXPECT_EQ(m["finish_reason"], "tool_calls");
  ASSERT_EQ(m["message"]["tool_calls"].size(), 1u) << r.body;
  EXPECT_EQ(json::parse(m["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Rome"}}));
  EXPECT_EQ(r.body.find("just"), std::string::npos) << r.body;
  auto s = t.post("/v1/chat/completions", openai_body("[tool-pieces]", 100, true));
  const Joined j = join_openai_stream(s.body);
  EXPECT_EQ(j.finish, "tool_calls");
  EXPECT_EQ(j.name, "get_weather");
  EXPECT_EQ(json::parse(j.arguments), json({{"city", "Rome"}}));
  EXPECT_EQ(j.content, "");
}

TEST(GatewayToolCalls, OpenAiCutCallIsNoCallStreamedAndNot) {
  TestGateway t("tools-cut");
  // 2 pieces: the name line and the start of the arguments; 3: part of the arguments.
  for (const char* kw : {"[tool]", "[tool-py]"}) {
    for (int max_tokens : {1, 2, 3}) {
      SCOPED_TRACE(std::string(kw) + " max_tokens " + std::to_string(max_tokens));
      auto r = t.post("/v1/chat/completions", openai_body(kw, max_tokens, false));
      ASSERT_EQ(r.status, 200) << r.body;
      const json m = json::parse(r.body)["choices"][0];
      EXPECT_EQ(m["finish_reason"], "length");
      EXPECT_FALSE(m["message"].contains("tool_calls")) << r.body;
      EXPECT_EQ(r.body.find("```"), std::string::npos) << r.body;
      EXPECT_EQ(r.body.find("tool_call("), std::string::npos) << r.body;

      auto s = t.post("/v1/chat/completions", openai_body(kw, max_tokens, true));
      ASSERT_EQ(s.status, 200);
      const Joined j = join_openai_stream(s.body);
      EXPECT_EQ(j.finish, "length");
      EXPECT_EQ(j.call_chunks, 0) << s.body;
      EXPECT_EQ(j.content, "");
      EXPECT_EQ(s.body.find("```"), std::string::npos) << s.body;
    }
  }
}

TEST(GatewayToolCalls, AnthropicCutCallIsNoToolUseStreamedAndNot) {
  TestGateway t("tools-anthropic");
  for (const char* kw : {"[tool]", "[tool-py]"}) {
    SCOPED_TRACE(kw);
    // Whole: a tool_use block with the input object.
    auto whole = t.post("/v1/messages", anthropic_body(kw, 100, false));
    ASSERT_EQ(whole.status, 200) << whole.body;
    const json w = json::parse(whole.body);
    EXPECT_EQ(w["stop_reason"], "tool_use");
    EXPECT_EQ(w["content"].back()["input"], json({{"city", "Paris"}}));

    auto r = t.post("/v1/messages", anthropic_body(kw, 2, false));
    ASSERT_EQ(r.status, 200) << r.body;
    const json m = json::parse(r.body);
    EXPECT_EQ(m["stop_reason"], "max_tokens");
    for (const json& b : m["content"]) EXPECT_NE(b["type"], "tool_use") << r.body;

    auto s = t.post("/v1/messages", anthropic_body(kw, 2, true));
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(s.body.find("tool_use"), std::string::npos) << s.body;
    EXPECT_EQ(s.body.find("input_json_delta"), std::string::npos) << s.body;
    EXPECT_NE(s.body.find(R"("stop_reason":"max_tokens")"), std::string::npos) << s.body;
  }
}

}  // namespace
}  // namespace glm::gateway::testing
