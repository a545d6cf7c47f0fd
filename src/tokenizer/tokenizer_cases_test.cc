// Every tokenizer case of ../shared/data/tokenizers/cases.json (ids from the real HF tokenizers),
// through the vocab GGUFs and through GGUFs written by write_vocab from tokenizer.model files.
#include <gtest/gtest.h>

#include "tokenizer/test_fixtures.h"

namespace glm::tok {
namespace {

using testing::Source;
using Ids = std::vector<int32_t>;

class TokenizerCases : public ::testing::TestWithParam<Source> {};

Ids json_ids(const nlohmann::json& j) { return j.get<Ids>(); }
Ids drop2(const Ids& ids) { return Ids(ids.begin() + 2, ids.end()); }

TEST_P(TokenizerCases, ChatGlm2And3Encode) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", GetParam());
  GLM_CASES_OR_SKIP(c);
  int n = 0;
  for (const char* model : {"chatglm2", "chatglm3"}) {
    for (const auto& k : (*c)[model]["encode"]) {
      const std::string prompt = k["prompt"];
      const Ids ids = json_ids(k["ids"]);
      ASSERT_EQ(ids[0], tok.find("[gMASK]"));
      ASSERT_EQ(ids[1], tok.find("sop"));
      EXPECT_EQ(tok.encode(prompt), drop2(ids)) << model << " lines " << k["lines"];
      // With the special prefix parsed from text (the dummy prefix follows a special token).
      EXPECT_EQ(tok.encode("[gMASK]sop" + prompt, /*allow_special=*/true), ids) << prompt;
      EXPECT_EQ(tok.decode(ids), prompt);
      ++n;
    }
  }
  EXPECT_EQ(n, 5);
}

TEST_P(TokenizerCases, ChatGlm3SpecialIds) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", GetParam());
  GLM_CASES_OR_SKIP(c);
  int n = 0;
  for (const auto& [text, id] : (*c)["chatglm3"]["special_ids"].items()) {
    if (text[0] == '_') continue;
    EXPECT_EQ(tok.find(text), id.get<int32_t>()) << text;
    EXPECT_TRUE(tok.is_control(id.get<int32_t>())) << text;
    EXPECT_EQ(tok.encode(text, true), Ids{id.get<int32_t>()}) << text;
    ++n;
  }
  EXPECT_EQ(n, 9);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.n_vocab(), 65024);
}

TEST_P(TokenizerCases, Glm4EncodeOrdinary) {
  GLM_LOAD_OR_SKIP(tok, "glm4", GetParam());
  GLM_CASES_OR_SKIP(c);
  int n = 0;
  for (const auto& k : (*c)["chatglm4"]["encode_ordinary"]) {
    const std::string text = k["text"];
    const Ids ids = json_ids(k["ids"]);
    EXPECT_EQ(tok.encode(text), ids) << "lines " << k["lines"];
    EXPECT_EQ(tok.decode(ids), text);
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST_P(TokenizerCases, Glm4EncodeWithPrefix) {
  GLM_LOAD_OR_SKIP(tok, "glm4", GetParam());
  GLM_CASES_OR_SKIP(c);
  for (const auto& k : (*c)["chatglm4"]["encode"]) {
    const std::string prompt = k["prompt"];
    const Ids ids = json_ids(k["ids"]);
    EXPECT_EQ(tok.encode(prompt), drop2(ids));
    EXPECT_EQ(tok.encode("[gMASK]<sop>" + prompt, true), ids);
    EXPECT_EQ(tok.decode(ids), prompt);
  }
}

TEST_P(TokenizerCases, Glm4SpecialIds) {
  GLM_LOAD_OR_SKIP(tok, "glm4", GetParam());
  GLM_CASES_OR_SKIP(c);
  int n = 0;
  for (const auto& [text, id] : (*c)["chatglm4"]["special_ids"].items()) {
    if (text[0] == '_') continue;
    EXPECT_EQ(tok.find(text), id.get<int32_t>()) << text;
    EXPECT_EQ(tok.encode(text, true), Ids{id.get<int32_t>()}) << text;
    EXPECT_NE(tok.encode(text, false), Ids{id.get<int32_t>()}) << text;
    ++n;
  }
  EXPECT_EQ(n, 14);
  EXPECT_EQ(tok.eos_id(), 151329);
}

INSTANTIATE_TEST_SUITE_P(Sources, TokenizerCases,
                         ::testing::Values(Source::kVocabGguf, Source::kWrittenGguf),
                         [](const auto& info) { return testing::source_name(info.param); });

TEST(SpmTokenizer, Stories260KOnceUponATime) {
  GLM_LOAD_OR_SKIP(tok, "stories", Source::kVocabGguf);
  EXPECT_EQ(tok.encode("Once upon a time"), (Ids{403, 407, 261, 378}));
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.decode({1, 403, 407, 261, 378}), "Once upon a time");
}

TEST(SpmTokenizer, NeverMergesIntoControlTokens) {
  // llama.cpp merges "sop"/"eop" (CONTROL, score 0) out of words; sentencepiece never does.
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  const std::string text = "videophone hyssop eop sop stop";
  const Ids ids = tok.encode(text);
  for (int32_t id : ids) EXPECT_FALSE(tok.is_control(id)) << id;
  EXPECT_EQ(tok.decode(ids), text);
  // With specials allowed, the text "sop" is the token.
  const Ids sp = tok.encode("sop", true);
  EXPECT_EQ(sp, Ids{tok.find("sop")});
}

TEST(SpmTokenizer, ByteFallbackAndWhitespaceRuns) {
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  // U+1F44B (👋) is not a piece: its four bytes <0xF0><0x9F><0x91><0x8B> = ids 243 162 148 142.
  const Ids ids = tok.encode("\xf0\x9f\x91\x8b");
  EXPECT_EQ(ids, (Ids{30910, 243, 162, 148, 142}));
  const std::string ws = "a  b\t\tc\n\n  d   ";
  EXPECT_EQ(tok.decode(tok.encode(ws)), ws);
  EXPECT_TRUE(tok.encode("").empty());
}

}  // namespace
}  // namespace glm::tok
