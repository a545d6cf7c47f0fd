// Anthropic Messages API shapes: requests into the engine's vocabulary (system, blocks,
// tool_use / tool_result, tools and tool_choice, sampling through the one mapping), the message
// object, the stream's event order, and errors.
#include "api/anthropic.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json.h"

namespace glm::api {
namespace {

using json = nlohmann::json;

TEST(Anthropic, MessagesBecomeTheEngineRequest) {
  auto r = parse_messages_request(R"({"model":"claude-x","max_tokens":64,"stream":true,
    "system":[{"type":"text","text":"Be brief."}],"temperature":0.5,"top_k":5,
    "stop_sequences":["END"],"metadata":{"user_id":"u"},
    "messages":[{"role":"user","content":"weather?"},
      {"role":"assistant","content":[{"type":"text","text":"Looking."},
        {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
        {"type":"text","text":"and tomorrow?"}]}]})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model, "claude-x");
  EXPECT_TRUE(r->stream);
  const auto& m = r->request.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[2].content, "Looking.");
  EXPECT_EQ(m[3].metadata, "get_weather");
  EXPECT_EQ(m[3].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(m[4].role, "observation");
  EXPECT_EQ(m[4].content, "sunny");
  EXPECT_EQ(m[5].content, "and tomorrow?");
  EXPECT_EQ(r->request.params.max_tokens, 64);
  EXPECT_FLOAT_EQ(r->request.params.temperature, 0.5f);
  EXPECT_EQ(r->request.params.top_k, 5);
  ASSERT_EQ(r->request.params.stop.size(), 1u);
  EXPECT_EQ(r->request.params.stop[0], "END");
}

TEST(Anthropic, ToolsAndToolChoice) {
  const std::string tools =
      R"("tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object",)"
      R"("properties":{"city":{"type":"string"}},"required":["city"]}}])";
  auto base = [&](const std::string& extra) {
    return parse_messages_request(R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],)" +
                                  tools + extra + "}");
  };
  auto a = base("");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(dump_json(*a->request.tools),
            R"([{"name":"get_weather","description":"d","parameters":{"type":"object",)"
            R"("properties":{"city":{"type":"string"}},"required":["city"]}}])");
  EXPECT_FALSE(a->request.constraint.active());
  auto any = base(R"(,"tool_choice":{"type":"any"})");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->request.constraint.kind, generation::Constraint::Kind::kToolCall);
  auto named = base(R"(,"tool_choice":{"type":"tool","name":"get_weather"})");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->tool_names, std::vector<std::string>{"get_weather"});
  auto none = base(R"(,"tool_choice":{"type":"none"})");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->request.tools.empty());
  EXPECT_FALSE(base(R"(,"tool_choice":{"type":"tool","name":"nope"})").ok());
  auto schema = parse_messages_request(
      R"({"max_tokens":8,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f",)"
      R"("input_schema":{"type":"object","properties":{"t":{"type":"string","pattern":"a"}}}}]})");
  ASSERT_FALSE(schema.ok());
  EXPECT_NE(schema.status().message().find("tools[0].input_schema #/properties/t"),
            std::string::npos)
      << schema.status().message();
}

// thinking: {"type":"disabled"} asks a hybrid reasoning model to answer without thinking (the
// template's enable_thinking); "enabled" keeps its default; anything else is refused by name.
TEST(Anthropic, ThinkingDisabledTurnsTheTemplatesThinkingOff) {
  const std::string base = R"("max_tokens":8,"messages":[{"role":"user","content":"hi"}])";
  auto plain = parse_messages_request("{" + base + "}");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->request.enable_thinking);
  auto off = parse_messages_request("{" + base + R"(,"thinking":{"type":"disabled"}})");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_FALSE(off->request.enable_thinking);
  auto on = parse_messages_request("{" + base +
                                   R"(,"thinking":{"type":"enabled","budget_tokens":1024}})");
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_TRUE(on->request.enable_thinking);
  for (const char* bad :
       {R"(,"thinking":"off")", R"(,"thinking":{"type":5})", R"(,"thinking":{"type":"maybe"})"}) {
    auto r = parse_messages_request("{" + base + bad + "}");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("thinking"), std::string::npos) << r.status().message();
  }
}

TEST(Anthropic, BadRequestsNameTheField) {
  auto error = [](const std::string& body) {
    auto r = parse_messages_request(body);
    EXPECT_FALSE(r.ok()) << body;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(error(R"({"messages":[{"role":"user","content":"x"}]})").find("max_tokens"),
            std::string::npos);
  EXPECT_NE(error(R"({"max_tokens":5,"messages":[{"role":"system","content":"x"}]})")
                .find("messages[0].role"),
            std::string::npos);
  EXPECT_NE(error(R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image"}]}]})")
                .find("messages[0].content[0].type"),
            std::string::npos);
  EXPECT_NE(
      error(R"({"max_tokens":5,"temperature":1.5,"messages":[{"role":"user","content":"x"}]})")
          .find("temperature"),
      std::string::npos);
  EXPECT_NE(
      error(R"({"max_tokens":0,"messages":[{"role":"user","content":"x"}]})").find("max_tokens"),
      std::string::npos);
}

// Splits a stream into its event names, checking each data line parses with its own type.
std::vector<std::string> event_names(const std::string& sse) {
  std::vector<std::string> names;
  std::istringstream in(sse);
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) name = line.substr(7);
    if (line.rfind("data: ", 0) == 0) {
      const json j = json::parse(line.substr(6));
      EXPECT_EQ(j["type"], name) << line;
      names.push_back(name);
    }
  }
  return names;
}

TEST(Anthropic, StreamEventsComeInTheDocumentedOrder) {
  MessagesStream s("msg_1-2", "m");
  protocol::Usage u;
  u.prompt_tokens = 10;
  std::string sse = s.start(u);
  sse += s.delta({ToolDelta::Kind::kContent, "Let me check."});
  sse += s.delta({ToolDelta::Kind::kCallStart, "get_weather"});
  sse += s.delta({ToolDelta::Kind::kArguments, "{\"city\":"});
  sse += s.delta({ToolDelta::Kind::kArguments, "\"Paris\"}"});
  u.completion_tokens = 7;
  sse += s.finish("tool_use", u);
  EXPECT_EQ(event_names(sse),
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_delta",
                                      "content_block_stop", "content_block_start",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_NE(sse.find(R"("id":"toolu_1-2")"), std::string::npos) << sse;
  EXPECT_NE(sse.find(R"("index":1)"), std::string::npos);
  EXPECT_NE(sse.find(R"("stop_reason":"tool_use")"), std::string::npos);
  EXPECT_NE(sse.find(R"("output_tokens":7)"), std::string::npos);
  // An empty answer still has one (empty) text block.
  MessagesStream e("msg_3", "m");
  EXPECT_EQ(event_names(e.start(u) + e.finish("end_turn", u)),
            (std::vector<std::string>{"message_start", "content_block_start", "content_block_stop",
                                      "message_delta", "message_stop"}));
}

TEST(Anthropic, MessageAndErrorShapes) {
  MessageOut m;
  m.id = "msg_1";
  m.model = "m";
  m.calls = {{"toolu_1", "get_weather", R"({"city":"Paris"})"}, {"toolu_1_1", "get_time", R"({})"}};
  m.stop_reason = "tool_use";
  m.usage.prompt_tokens = 10;
  m.usage.cached_tokens = 7;
  m.usage.completion_tokens = 4;
  const json j = json::parse(anthropic_message_json(m));
  EXPECT_EQ(j["type"], "message");
  ASSERT_EQ(j["content"].size(), 2u);  // a tool_use block per call, no empty text
  EXPECT_EQ(j["content"][0]["type"], "tool_use");
  EXPECT_EQ(j["content"][0]["input"]["city"], "Paris");
  EXPECT_EQ(j["content"][1]["id"], "toolu_1_1");
  EXPECT_EQ(j["content"][1]["name"], "get_time");
  EXPECT_EQ(j["content"][1]["input"], json::object());
  // Anthropic's split: input_tokens not read from the cache, cache_read_input_tokens read.
  EXPECT_EQ(j["usage"]["input_tokens"], 3);
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 7);
  EXPECT_EQ(j["usage"]["output_tokens"], 4);
  EXPECT_EQ(anthropic_stop_reason(Outcome::kLength, false), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason(Outcome::kStop, false), "end_turn");
  const json e = json::parse(anthropic_error_json(Status(ErrorCode::kQueueFull, "busy")));
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "rate_limit_error");
  EXPECT_EQ(message_id("chatcmpl-req-5-6"), "msg_5-6");
  EXPECT_EQ(tool_use_id("req-5-6"), "toolu_5-6");
  EXPECT_EQ(tool_use_id("req-5-6", 2), "toolu_5-6_2");
}

}  // namespace
}  // namespace glm::api
