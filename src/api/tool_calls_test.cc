// The OpenAI tools / tool_choice / tool_calls / tool mapping of parse_chat_completion (reading
// calls out of answers is tokenizer/tool_call_stream_test.cc).
#include "api/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/anthropic.h"
#include "api/openai.h"
#include "core/json.h"
#include "protocol/protocol.h"

namespace glm::api {
namespace {

const char* kTwoTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},)"
    R"({"type":"function","function":{"parameters":{"type":"object"},"name":"now"}}])";

StatusOr<ChatCompletionRequest> parse_with(const std::string& extra) {
  return parse_chat_completion(R"({"messages":[{"role":"user","content":"hi"}],)" +
                               std::string(kTwoTools) + extra + "}");
}

TEST(OpenAITools, ToolsKeepTheClientsOrderAndAutoReadsCalls) {
  auto r = parse_with("");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // The function objects, in the client's key order ("parameters" before "name" for now).
  EXPECT_EQ(dump_json(*r->request.tools),
            R"([{"name":"get_weather","description":"d","parameters":{"type":"object",)"
            R"("properties":{"city":{"type":"string"}},"required":["city"]}},)"
            R"({"parameters":{"type":"object"},"name":"now"}])");
  EXPECT_EQ(r->tool_names, (std::vector<std::string>{"get_weather", "now"}));
  EXPECT_FALSE(r->request.constraint.active());  // auto: the model chooses
}

// A body is parsed once, as ordered JSON: its tools and its response schema come out of that one
// parse (the client's key order kept), and the request written to the engine socket embeds the
// parsed tools without parsing them again. The same for the Anthropic Messages body.
TEST(OpenAITools, ABodyIsParsedOnce) {
  int64_t before = json_parses();
  auto r = parse_with(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x",)"
                      R"("schema":{"type":"object","properties":{"zeta":{"type":"string"},)"
                      R"("alpha":{"type":"string"}}}}})");
  EXPECT_EQ(json_parses() - before, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NE(r->request.constraint.text.find(R"("zeta":{"type":"string"},"alpha")"),
            std::string::npos);
  before = json_parses();
  r->request.constraint = {};
  const std::string line = protocol::serialize_request(r->request);
  EXPECT_EQ(json_parses() - before, 0);
  EXPECT_NE(line.find(R"({"parameters":{"type":"object"},"name":"now"})"), std::string::npos);
  before = json_parses();
  auto a = parse_messages_request(
      R"({"max_tokens":8,"messages":[{"role":"assistant","content":[{"type":"tool_use",)"
      R"("id":"t1","name":"f","input":{"z":1,"a":2}}]},{"role":"user","content":"x"}],)"
      R"("tools":[{"input_schema":{"type":"object"},"name":"f"}]})");
  EXPECT_EQ(json_parses() - before, 1);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->request.messages[0].arguments, R"({"z":1,"a":2})");
}

TEST(OpenAITools, ForcedChoicesBecomeAToolCallConstraint) {
  auto req = parse_with(R"(,"tool_choice":"required")");
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  EXPECT_EQ(req->request.constraint.kind, generation::Constraint::Kind::kToolCall);
  EXPECT_EQ(req->request.constraint.text,
            R"([{"name":"get_weather","parameters":{"type":"object","properties":)"
            R"({"city":{"type":"string"}},"required":["city"]}},)"
            R"({"name":"now","parameters":{"type":"object"}}])");
  auto named = parse_with(R"(,"tool_choice":{"type":"function","function":{"name":"now"}})");
  ASSERT_TRUE(named.ok()) << named.status().to_string();
  EXPECT_EQ(named->request.constraint.text, R"([{"name":"now","parameters":{"type":"object"}}])");
  EXPECT_EQ(named->tool_names, std::vector<std::string>{"now"});
  EXPECT_FALSE(named->request.tools.empty());  // the prompt still lists every tool
  auto none = parse_with(R"(,"tool_choice":"none")");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->request.tools.empty());
  EXPECT_TRUE(none->tool_names.empty());
  EXPECT_FALSE(none->request.constraint.active());
}

TEST(OpenAITools, BadToolsAreRefusedByName) {
  auto error = [](const std::string& body) {
    auto r = parse_chat_completion(body);
    EXPECT_FALSE(r.ok()) << body;
    return r.ok() ? std::string() : r.status().message();
  };
  const std::string m = R"({"messages":[{"role":"user","content":"hi"}],)";
  EXPECT_NE(error(m + R"("tools":[{"type":"retrieval"}]})").find("tools[0]"), std::string::npos);
  EXPECT_NE(error(m + R"("tools":[{"type":"function","function":{"name":"a b"}}]})")
                .find("tools[0].function.name"),
            std::string::npos);
  EXPECT_NE(error(m + R"("tools":[{"type":"function","function":{"name":"f","parameters":)"
                      R"({"type":"object","properties":{"t":{"type":"string","pattern":"x"}}}}}]})")
                .find("tools[0].function.parameters #/properties/t"),
            std::string::npos);
  EXPECT_NE(error(m + std::string(kTwoTools) +
                  R"(,"tool_choice":{"type":"function","function":{"name":"nope"}}})")
                .find("'nope' is not one of the tools"),
            std::string::npos);
  EXPECT_NE(error(m + std::string(kTwoTools) +
                  R"(,"tool_choice":"required","response_format":{"type":"json_object"}})")
                .find("cannot be combined"),
            std::string::npos);
  EXPECT_NE(error(m + R"("tool_choice":"required"})").find("needs tools"), std::string::npos);
  EXPECT_NE(
      error(m + std::string(kTwoTools) + R"(,"tool_choice":"sometimes"})").find("tool_choice"),
      std::string::npos);
  EXPECT_NE(error(m + std::string(kTwoTools) + R"(,"parallel_tool_calls":"yes"})")
                .find("parallel_tool_calls"),
            std::string::npos);
}

// parallel_tool_calls false reaches the engine's request (through the socket line too);
// Anthropic's tool_choice.disable_parallel_tool_use likewise.
TEST(OpenAITools, ParallelToolCallsFalseReachesTheEngine) {
  auto plain = parse_with("");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->request.parallel_tool_calls);
  auto one = parse_with(R"(,"parallel_tool_calls":false)");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_FALSE(one->request.parallel_tool_calls);
  one->request.id = "r1";
  auto wire = protocol::parse_request(protocol::serialize_request(one->request));
  ASSERT_TRUE(wire.ok()) << wire.status().to_string();
  EXPECT_FALSE(wire->parallel_tool_calls);
  auto back = protocol::parse_request(protocol::serialize_request(plain->request));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->parallel_tool_calls);
  EXPECT_FALSE(protocol::parse_request(R"({"id":"x","messages":[{"role":"user","content":"a"}],)"
                                       R"("parallel_tool_calls":1})")
                   .ok());
  const std::string anthropic =
      R"({"max_tokens":8,"messages":[{"role":"user","content":"hi"}],)"
      R"("tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":)";
  auto a =
      parse_messages_request(anthropic + R"({"type":"auto","disable_parallel_tool_use":true}})");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_FALSE(a->request.parallel_tool_calls);
  auto b = parse_messages_request(anthropic + R"({"type":"auto"}})");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->request.parallel_tool_calls);
  auto bad =
      parse_messages_request(anthropic + R"({"type":"auto","disable_parallel_tool_use":1}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("disable_parallel_tool_use"), std::string::npos);
}

TEST(OpenAITools, CallsAndResultsInTheHistory) {
  auto r = parse_chat_completion(R"({"messages":[{"role":"user","content":"weather?"},
    {"role":"assistant","content":"Let me look.","tool_calls":[
      {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
      {"id":"call_2","type":"function","function":{"name":"now","arguments":"{}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"sunny"},
    {"role":"tool","tool_call_id":"call_2","content":"noon"}]})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& m = r->request.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].role, "assistant");
  EXPECT_EQ(m[1].content, "Let me look.");
  EXPECT_EQ(m[2].metadata, "get_weather");
  EXPECT_EQ(m[2].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(m[3].metadata, "now");
  EXPECT_EQ(m[4].role, "observation");
  EXPECT_EQ(m[4].content, "sunny");
  auto bad = parse_chat_completion(R"({"messages":[{"role":"assistant","content":null,
    "tool_calls":[{"type":"function","function":{"name":"f","arguments":"[1]"}}]},
    {"role":"user","content":"x"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("messages[0].tool_calls[0].function.arguments"),
            std::string::npos)
      << bad.status().message();
}

TEST(OpenAITools, ResponseShapes) {
  const std::vector<ToolCallOut> calls = {{"call_9", "get_weather", R"({"city":"Paris"})"},
                                          {"call_9_1", "now", "{}"}};
  auto j = nlohmann::json::parse(
      completion_json("chatcmpl-1", 1, "m", "", "tool_calls", protocol::Usage{}, &calls));
  const auto& msg = j["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][0]["id"], "call_9");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(msg["tool_calls"][1]["id"], "call_9_1");
  EXPECT_EQ(msg["tool_calls"][1]["function"]["name"], "now");
  const std::vector<ToolCallOut> none;
  auto plain = nlohmann::json::parse(
      completion_json("chatcmpl-1", 1, "m", "Hi", "stop", protocol::Usage{}, &none));
  EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  auto start = nlohmann::json::parse(tool_call_chunk_json("c", 1, "m", "call_9", "f", ""));
  const auto& t = start["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(t["index"], 0);
  EXPECT_EQ(t["id"], "call_9");
  EXPECT_EQ(t["function"]["name"], "f");
  EXPECT_EQ(t["function"]["arguments"], "");
  auto frag = nlohmann::json::parse(tool_call_chunk_json("c", 1, "m", "", "", "{\"a"));
  const auto& f = frag["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_FALSE(f.contains("id"));
  EXPECT_EQ(f["function"]["arguments"], "{\"a");
  EXPECT_EQ(tool_call_id("chatcmpl-req-12-3"), "call_12-3");
  EXPECT_EQ(tool_call_id("chatcmpl-req-12-3", 1), "call_12-3_1");
  // A streamed call i is tool_calls[i]: its start (with call i's id) and its fragments.
  auto second = nlohmann::json::parse(
      tool_delta_chunk_json("chatcmpl-req-12-3", 1, "m", {ToolDelta::Kind::kCallStart, "now"}, 1));
  EXPECT_EQ(second["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(second["choices"][0]["delta"]["tool_calls"][0]["id"], "call_12-3_1");
  ToolCallIndex index;
  std::vector<int> seen;
  for (auto k :
       {ToolDelta::Kind::kContent, ToolDelta::Kind::kCallStart, ToolDelta::Kind::kArguments,
        ToolDelta::Kind::kCallStart, ToolDelta::Kind::kArguments}) {
    seen.push_back(index.of({k, ""}));
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 0, 0, 1, 1}));
}

// An answer's text read as the engine reads it (tok::ToolCallStream: the events' pieces), then
// sent as the routes send it (ToolAnswerStream).
struct TextAnswer {
  explicit TextAnswer(const std::vector<std::string>& names) : reader(names), stream(names) {}
  std::vector<ToolDelta> feed(const std::string& text) { return stream.feed(reader.feed(text)); }
  std::vector<ToolDelta> finish(Outcome o) { return stream.finish(o, reader.finish()); }
  bool cut_call() const { return stream.cut_call(); }
  bool is_call() const { return stream.is_call(); }
  tok::ToolCallStream reader;
  ToolAnswerStream stream;
};
ToolAnswer read_whole_text(const std::vector<std::string>& names, const std::string& text,
                           Outcome outcome) {
  tok::ToolCallStream reader(names);
  const std::vector<ToolDelta> pieces = reader.feed(text);
  return read_whole_answer(names, pieces, reader.finish(), outcome);
}

// GLM-4.5's XML call after text: the text goes out as content, the call whole when the answer
// stops; cut by max_tokens inside the call, the text before it went out and nothing of the call.
TEST(OpenAITools, Glm45CallsAfterTextAndCutCalls) {
  const std::vector<std::string> names = {"get_weather", "now"};
  const std::string call =
      "Let me check.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris"
      "</arg_value>\n</tool_call>";
  const ToolAnswer a = read_whole_text(names, call, Outcome::kStop);
  EXPECT_EQ(a.content, "Let me check.");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris"})");
  TextAnswer s(names);
  std::string sent;
  for (size_t i = 0; i < 30; i += 3) {
    for (const ToolDelta& d : s.feed(call.substr(i, 3))) sent += d.text;
  }
  EXPECT_TRUE(s.finish(Outcome::kLength).empty());
  EXPECT_TRUE(s.cut_call());
  EXPECT_FALSE(s.is_call());
  EXPECT_EQ(sent, "Let me check.");
  // Stopped (not cut) inside an unclosed call: it is text.
  EXPECT_EQ(read_whole_text(names, "<tool_call>now", Outcome::kStop).content, "<tool_call>now");
}

// Several GLM-4.5 calls: all of them go out when the answer stops, in order; none when
// max_tokens cut the answer after the first (the answer is unfinished).
TEST(OpenAITools, Glm45SeveralCalls) {
  const std::vector<std::string> names = {"get_weather", "now"};
  const std::string two =
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
      "</tool_call>\n<tool_call>now\n</tool_call>";
  const ToolAnswer a = read_whole_text(names, two, Outcome::kStop);
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[1].name, "now");
  EXPECT_EQ(a.calls[1].arguments, "{}");
  const std::vector<ToolCallOut> out = tool_calls_out("chatcmpl-req-1-2", a);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].id, "call_1-2");
  EXPECT_EQ(out[1].id, "call_1-2_1");
  TextAnswer s(names);
  for (size_t i = 0; i < two.size(); i += 5) EXPECT_TRUE(s.feed(two.substr(i, 5)).empty());
  EXPECT_TRUE(s.finish(Outcome::kLength).empty());
  EXPECT_TRUE(s.cut_call());
}

}  // namespace
}  // namespace glm::api
