// OpenAI legacy completions: a raw prompt with OpenAI's default of 16 tokens, the sampling
// fields through the one mapping, clear refusals, and the text_completion shapes.
#include "api/completions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

namespace glm::api {
namespace {

using json = nlohmann::json;

TEST(Completions, PromptIsContinuedRaw) {
  auto r = parse_completion_request(
      R"({"model":"m","prompt":"Once upon a time","echo":true,"stream":true,"temperature":0,"stop":["\n"]})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->request.raw);
  EXPECT_EQ(r->request.prompt, "Once upon a time");
  EXPECT_TRUE(r->echo);
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->request.params.max_tokens, 16);
  EXPECT_FLOAT_EQ(r->request.params.temperature, 0.0f);
  ASSERT_EQ(r->request.params.stop.size(), 1u);
  auto one = parse_completion_request(R"({"prompt":["a"],"max_tokens":3})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->request.prompt, "a");
  EXPECT_EQ(one->request.params.max_tokens, 3);
}

TEST(Completions, SeveralChoices) {
  auto r = parse_completion_request(R"({"prompt":"a","n":2})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->request.n, 2);
  json w = json::parse(text_completion_json(
      "c", 1, "m", {{"x", "stop", nullptr}, {"yz", "length", nullptr}}, protocol::Usage{3, 0, 5}));
  ASSERT_EQ(w["choices"].size(), 2u);
  EXPECT_EQ(w["choices"][1]["index"], 1);
  EXPECT_EQ(w["choices"][1]["text"], "yz");
  EXPECT_EQ(w["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(json::parse(completion_chunk_text_json("c", 1, "m", "q", "", nullptr, 0,
                                                   3))["choices"][0]["index"],
            3);
}

TEST(Completions, UnsupportedFieldsAreRefusedByName) {
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":["a","b"]})", "prompt"},
           {R"({"prompt":[[1,2,3]]})", "prompt"},
           {R"({"prompt":"a","suffix":"z"})", "suffix"},
           {R"({"prompt":"a","n":0})", "n"},
           {R"({"prompt":"a","n":2.5})", "n"},
           {R"({"prompt":"a","logprobs":6})", "logprobs"},
           {R"({"prompt":"a","logprobs":true})", "logprobs"},
           {R"({"prompt":"a","logprobs":2,"echo":true})", "echo"},
           {R"({"prompt":"a","best_of":2})", "best_of"},
           {R"({"prompt":"a","logit_bias":{"x":1}})", "logit_bias"},
           {R"({"prompt":"a","logit_bias":{"5":101}})", "logit_bias"},
           {R"({"prompt":"a","presence_penalty":3})", "presence_penalty"},
           {R"({"prompt":"a","echo":"yes"})", "echo"},
           {R"({"prompt":""})", "prompt"},
           {R"({"max_tokens":4})", "prompt"},
           {R"({"prompt":"a","temperature":9})", "temperature"}}) {
    auto r = parse_completion_request(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  }
}

TEST(Completions, LogprobsAndPenaltiesReachTheRequest) {
  auto r = parse_completion_request(
      R"({"prompt":"a","logprobs":3,"presence_penalty":0.5,"frequency_penalty":-1,)"
      R"("logit_bias":{"7":-100,"12":2.5}})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->request.params.top_logprobs, 3);
  EXPECT_FLOAT_EQ(r->request.params.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r->request.params.frequency_penalty, -1.0f);
  auto bias = r->request.params.logit_bias;  // in the JSON object's (sorted) key order
  std::sort(bias.begin(), bias.end(), [](auto& a, auto& b) { return a.token < b.token; });
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias[0], (generation::LogitBias{7, -100.0f}));
  EXPECT_EQ(bias[1], (generation::LogitBias{12, 2.5f}));
  auto off = parse_completion_request(R"({"prompt":"a"})");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->request.params.top_logprobs, -1);
}

TEST(Completions, LogprobsInTheLegacyShape) {
  // " Hi" then a token ending inside "é" (0xC3 0xA9): the token shows U+FFFD, offsets count
  // bytes from the chunk's start.
  std::vector<generation::GeneratedLogprobs> lp = {
      {{5, " Hi", -0.25f}, {{5, " Hi", -0.25f}, {6, " Ho", -1.5f}}},
      {{9, "\xC3", -0.5f}, {{9, "\xC3", -0.5f}, {3, "!", -2.0f}}}};
  const json c = json::parse(completion_chunk_text_json("cmpl-1", 9, "m", " Hi", "", &lp, 4));
  const json& l = c["choices"][0]["logprobs"];
  EXPECT_EQ(l["tokens"], json::array({" Hi", "\uFFFD"}));
  EXPECT_EQ(l["token_logprobs"], json::array({-0.25, -0.5}));
  EXPECT_EQ(l["top_logprobs"][0], json({{" Hi", -0.25}, {" Ho", -1.5}}));
  EXPECT_EQ(l["text_offset"], json::array({4, 7}));
  const json plain = json::parse(completion_chunk_text_json("cmpl-1", 9, "m", "x", ""));
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST(Completions, Shapes) {
  protocol::Usage u;
  u.prompt_tokens = 4;
  u.completion_tokens = 2;
  const json whole = json::parse(text_completion_json("cmpl-1", 9, "m", "ab", "length", u));
  EXPECT_EQ(whole["object"], "text_completion");
  EXPECT_EQ(whole["choices"][0]["text"], "ab");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole["usage"]["total_tokens"], 6);
  const json chunk = json::parse(completion_chunk_text_json("cmpl-1", 9, "m", "a", ""));
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(chunk["choices"][0]["text"], "a");
}

}  // namespace
}  // namespace glm::api
