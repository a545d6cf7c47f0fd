// OpenAI legacy completions: a raw prompt with OpenAI's default of 16 tokens, the sampling
// fields through the one mapping, clear refusals, and the text_completion shapes.
#include "gateway/completions.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace glm::gateway {
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

TEST(Completions, UnsupportedFieldsAreRefusedByName) {
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":["a","b"]})", "prompt"},
           {R"({"prompt":[[1,2,3]]})", "prompt"},
           {R"({"prompt":"a","suffix":"z"})", "suffix"},
           {R"({"prompt":"a","n":2})", "n"},
           {R"({"prompt":"a","logprobs":5})", "logprobs"},
           {R"({"prompt":"a","echo":"yes"})", "echo"},
           {R"({"prompt":""})", "prompt"},
           {R"({"max_tokens":4})", "prompt"},
           {R"({"prompt":"a","temperature":9})", "temperature"}}) {
    auto r = parse_completion_request(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  }
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
}  // namespace glm::gateway
