#include "api/openai.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace glm::api {
namespace {

using json = nlohmann::json;
using generation::SamplingParams;

TEST(OpenAI, ParsesMessagesAndSampling) {
  auto r = parse_chat_completion(R"({"model":"m","stream":true,
    "stream_options":{"include_usage":true},
    "messages":[{"role":"developer","content":"be nice"},
                {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
    "temperature":0.2,"top_p":0.9,"max_tokens":64,"seed":7,"stop":"END","conversation":"c1"})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  ASSERT_EQ(r->request.messages.size(), 2u);
  EXPECT_EQ(r->request.messages[0].role, "system");
  EXPECT_EQ(r->request.messages[1].content, "ab");
  EXPECT_FLOAT_EQ(r->request.params.temperature, 0.2);
  EXPECT_FLOAT_EQ(r->request.params.top_p, 0.9);
  EXPECT_EQ(r->request.params.max_tokens, 64);
  EXPECT_EQ(r->request.params.seed, 7u);
  ASSERT_EQ(r->request.params.stop.size(), 1u);
  EXPECT_EQ(r->request.conversation, "c1");
}

TEST(OpenAI, SamplingFieldsShareTheEngineMapping) {
  auto r = parse_chat_completion(R"({"messages":[{"role":"user","content":"x"}],
    "min_p":0.1,"max_completion_tokens":9,"temperature":null})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ(r->request.params.min_p, 0.1f);
  EXPECT_EQ(r->request.params.max_tokens, 9);
  EXPECT_FLOAT_EQ(r->request.params.temperature, SamplingParams{}.temperature);  // null = absent
  auto bad =
      parse_chat_completion(R"({"messages":[{"role":"user","content":"x"}],"temperature":5})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'temperature': must be in [0, 2]"), std::string::npos)
      << bad.status().message();
}

TEST(OpenAI, RejectsBadFieldsByName) {
  struct Case {
    const char* body;
    const char* mentions;
  };
  const Case cases[] = {
      {"[]", "JSON object"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[{"content":"x"}]})", "role"},
      {R"({"messages":[{"role":"user","content":5}]})", "content"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":0})", "n must be"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":129})", "n must be"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":"2"})", "n must be"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":2,"tools":[{"type":"function","function":{"name":"f"}}]})",
       "n > 1 is not supported with tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":1}})",
       "include_usage"},
      {R"({"messages":[{"role":"user","content":[{"type":7,"text":"x"}]}]})", "parts"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})", "logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "logprobs: true"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})",
       "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"frequency_penalty":-2.5})",
       "frequency_penalty"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":[1]})", "logit_bias"},
      {R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"-3":1}})", "-3"},
  };
  for (const Case& c : cases) {
    auto r = parse_chat_completion(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos)
        << c.body << " -> " << r.status().message();
  }
}

TEST(OpenAI, LogprobsTurnOnWithTheirAlternatives) {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  auto on = parse_chat_completion("{" + m + R"(,"logprobs":true,"top_logprobs":4})");
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_EQ(on->request.params.top_logprobs, 4);
  auto bare = parse_chat_completion("{" + m + R"(,"logprobs":true})");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->request.params.top_logprobs, 0);
  auto off = parse_chat_completion("{" + m + R"(,"logprobs":false})");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->request.params.top_logprobs, -1);

  std::vector<generation::GeneratedLogprobs> lp = {
      {{5, " Hi", -0.25f}, {{5, " Hi", -0.25f}, {6, "\xE4", -1.5f}}}};
  const std::string text = " Hi";
  json c = json::parse(completion_chunk_json("id1", 5, "m", &text, false, "", &lp));
  const json& content = c["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], " Hi");
  EXPECT_EQ(content[0]["logprob"], -0.25);
  EXPECT_EQ(content[0]["bytes"], json::array({32, 72, 105}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "\uFFFD");
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], json::array({0xE4}));
  EXPECT_TRUE(c["choices"][0]["logprobs"]["refusal"].is_null());
  json whole = json::parse(completion_json("id1", 5, "m", " Hi", "stop", {}, nullptr, &lp));
  EXPECT_EQ(whole["choices"][0]["logprobs"]["content"], content);
  json none = json::parse(completion_json("id1", 5, "m", " Hi", "stop", {}));
  EXPECT_TRUE(none["choices"][0]["logprobs"].is_null());
}

// chat_template_kwargs.enable_thinking (vLLM's and llama-server's extension) reaches the engine
// request, through the socket line too; other keys are the template's and ignored.
TEST(OpenAI, ChatTemplateKwargsSetEnableThinking) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  auto plain = parse_chat_completion("{" + msgs + "}");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->request.enable_thinking);
  auto off = parse_chat_completion(
      "{" + msgs + R"(,"chat_template_kwargs":{"enable_thinking":false,"other":1}})");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_FALSE(off->request.enable_thinking);
  off->request.id = "r1";
  auto wire = protocol::parse_request(protocol::serialize_request(off->request));
  ASSERT_TRUE(wire.ok()) << wire.status().to_string();
  EXPECT_FALSE(wire->enable_thinking);
  auto on =
      parse_chat_completion("{" + msgs + R"(,"chat_template_kwargs":{"enable_thinking":true}})");
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->request.enable_thinking);
  for (const char* bad :
       {R"(,"chat_template_kwargs":[1])", R"(,"chat_template_kwargs":{"enable_thinking":"no"})"}) {
    auto r = parse_chat_completion("{" + msgs + bad + "}");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("chat_template_kwargs"), std::string::npos);
  }
}

TEST(OpenAI, ErrorJsonShape) {
  json j = json::parse(openai_error_json(Status(ErrorCode::kQueueFull, "busy, retry")));
  EXPECT_EQ(j["error"]["message"], "busy, retry");
  EXPECT_EQ(j["error"]["type"], "rate_limit_error");
  EXPECT_EQ(j["error"]["code"], "busy");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_STREQ(openai_error_type(ErrorCode::kUnauthorized), "authentication_error");
}

TEST(OpenAI, ChunkShapes) {
  const std::string text = "<b>你</b>";
  json c = json::parse(completion_chunk_json("id1", 5, "m", &text, false, ""));
  EXPECT_EQ(c["choices"][0]["delta"]["content"], text);
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(c["choices"][0]["delta"].contains("role"));
  json f = json::parse(completion_chunk_json("id1", 5, "m", nullptr, false, "length"));
  EXPECT_EQ(f["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(f["choices"][0]["delta"].empty());
  EXPECT_EQ(openai_finish_reason(Outcome::kLength), "length");
  EXPECT_EQ(openai_finish_reason(Outcome::kStop), "stop");
  // Invalid UTF-8 from anywhere never breaks the JSON.
  const std::string bad = "a\xff";
  json parsed;
  EXPECT_NO_THROW(parsed = json::parse(completion_chunk_json("i", 1, "m", &bad, false, "")));
  EXPECT_TRUE(parsed.is_object());
}

TEST(OpenAI, SeveralChoicesKeepTheirIndexAndShareTheUsage) {
  EXPECT_EQ(
      parse_chat_completion(R"({"messages":[{"role":"user","content":"x"}],"n":3})")->request.n, 3);
  EXPECT_EQ(parse_chat_completion(R"({"messages":[{"role":"user","content":"x"}]})")->request.n, 1);
  const std::string t = "b";
  json c = json::parse(completion_chunk_json("id1", 5, "m", &t, false, "", nullptr, 2));
  EXPECT_EQ(c["choices"][0]["index"], 2);
  const std::vector<generation::GeneratedLogprobs> lp = {{{7, "a", -0.5f}, {}}};
  const protocol::Usage usage{10, 4, 9};
  json w = json::parse(completion_json(
      "id1", 5, "m", {{"a", "stop", nullptr, &lp}, {"bcd", "length", nullptr, nullptr}}, usage));
  ASSERT_EQ(w["choices"].size(), 2u);
  EXPECT_EQ(w["choices"][0]["index"], 0);
  EXPECT_EQ(w["choices"][0]["message"]["content"], "a");
  EXPECT_EQ(w["choices"][0]["logprobs"]["content"][0]["logprob"], -0.5);
  EXPECT_EQ(w["choices"][1]["index"], 1);
  EXPECT_EQ(w["choices"][1]["message"]["content"], "bcd");
  EXPECT_EQ(w["choices"][1]["finish_reason"], "length");
  EXPECT_TRUE(w["choices"][1]["logprobs"].is_null());
  EXPECT_EQ(w["usage"]["completion_tokens"], 9);
  EXPECT_EQ(w["usage"]["prompt_tokens"], 10);
}

TEST(OpenAI, ResponseFormatAndGrammarBecomeTheConstraint) {
  using Kind = generation::Constraint::Kind;
  const std::string head = R"({"messages":[{"role":"user","content":"x"}],)";
  auto none = parse_chat_completion(head + R"("response_format":{"type":"text"}})");
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(none->request.constraint.kind, Kind::kNone);
  auto obj = parse_chat_completion(head + R"("response_format":{"type":"json_object"}})");
  ASSERT_TRUE(obj.ok()) << obj.status().to_string();
  EXPECT_EQ(obj->request.constraint.kind, Kind::kJsonObject);
  // The schema keeps the client's key order (zeta before alpha).
  auto schema = parse_chat_completion(
      head + R"("response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,)" +
      R"("schema":{"type":"object","properties":{"zeta":{"type":"string"},)" +
      R"("alpha":{"type":"integer"}},"required":["zeta"],"additionalProperties":false}}}})");
  ASSERT_TRUE(schema.ok()) << schema.status().to_string();
  EXPECT_EQ(schema->request.constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(
      schema->request.constraint.text,
      R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},)"
      R"("required":["zeta"],"additionalProperties":false})");
  auto gbnf = parse_chat_completion(head + R"("grammar":"root ::= \"yes\" | \"no\""})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().to_string();
  EXPECT_EQ(gbnf->request.constraint.kind, Kind::kGbnf);
  EXPECT_EQ(gbnf->request.constraint.text, R"(root ::= "yes" | "no")");
  // And it reaches the engine socket.
  EXPECT_NE(protocol::serialize_request(gbnf->request).find(R"("constraint":{"type":"gbnf")"),
            std::string::npos);
}

TEST(OpenAI, BadSchemasAndGrammarsNameThePart) {
  struct Case {
    std::string body;
    const char* mentions;
  };
  const std::string head = R"({"messages":[{"role":"user","content":"x"}],)";
  const Case cases[] = {
      {head + R"("response_format":"json"})", "response_format must be"},
      {head + R"("response_format":{"type":"xml"}})", "response_format.type"},
      {head + R"("response_format":{"type":"json_schema"}})", "response_format.json_schema"},
      {head + R"("response_format":{"type":"json_schema","json_schema":{"name":"n"}}})",
       "response_format.json_schema.schema must be"},
      {head + R"("response_format":{"type":"json_schema","json_schema":{"schema":)" +
           R"({"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}}}}})",
       "response_format.json_schema.schema #/properties/tags: keyword 'uniqueItems'"},
      {head + R"("grammar":"root ::= vaule"})", "grammar: line 1"},
      {head + R"("grammar":5})", "grammar must be"},
      {head + R"("grammar":"root ::= \"a\"","response_format":{"type":"json_object"}})",
       "not both"},
  };
  for (const Case& c : cases) {
    auto r = parse_chat_completion(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace glm::api
