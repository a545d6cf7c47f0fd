// tokenizer.json (HF fast BPE) read into a vocabulary: GLM-4's, written as GLM-4-0414 ships it
// (vocab map, merges as pairs, the specials as added tokens), tokenizes as the GGUF it came from.
#include <gtest/gtest.h>

#include <algorithm>

#include "tokenizer/test_fixtures.h"
#include "tokenizer/vocab_convert.h"

namespace glm::tok {
namespace {

TEST(HfTokenizerJson, Glm4VocabularyRoundTripsAndTokenizesTheSame) {
  GLM_LOAD_OR_SKIP(tok, "glm4", testing::Source::kVocabGguf);
  auto spec = read_vocab(*tok_l.file);
  ASSERT_TRUE(spec.ok());
  nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", nlohmann::json::object()}}}};
  j["model"]["merges"] = nlohmann::json::array();
  j["added_tokens"] = nlohmann::json::array();
  for (size_t i = 0; i < spec->tokens.size(); ++i) {
    if (spec->types[i] == kTokenControl) {
      j["added_tokens"].push_back({{"id", i}, {"content", spec->tokens[i]}, {"special", true}});
    } else if (spec->types[i] != kTokenUnused) {
      j["model"]["vocab"][spec->tokens[i]] = i;
    }
  }
  for (const std::string& m : spec->merges) {
    const size_t sp = m.find(' ');
    j["model"]["merges"].push_back({m.substr(0, sp), m.substr(sp + 1)});  // tokenizers >= 0.20
  }
  auto got = parse_hf_tokenizer_json(j.dump(), "tokenizer.json");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  // Up to the last added token (<|end_of_video|>); convert pads to the model's vocab_size.
  ASSERT_EQ(got->tokens.size(), 151343u);
  EXPECT_TRUE(std::equal(got->tokens.begin(), got->tokens.end(), spec->tokens.begin()));
  EXPECT_EQ(got->merges, spec->merges);
  EXPECT_EQ(got->eos, 151329);
  EXPECT_EQ(got->eot, 151336);
  EXPECT_EQ(got->types[151331], kTokenControl);  // [gMASK]
  testing::Loaded l = testing::load_spec(*got, "hf-json-glm4", "glm4");
  ASSERT_NE(l.tok, nullptr) << l.error;
  for (const char* text : {"Hello, world! 你好，世界。", "  spaces\n\n\ttabs 12345 ☃ emoji 🙂",
                           "执行 function_call(x=1)"}) {
    EXPECT_EQ(l.tok->encode(text), tok.encode(text)) << text;
  }
}

TEST(HfTokenizerJson, RefusesOtherModels) {
  EXPECT_EQ(parse_hf_tokenizer_json(R"({"model":{"type":"Unigram","vocab":[]}})", "t.json")
                .status()
                .code(),
            ErrorCode::kUnsupported);
  EXPECT_EQ(parse_hf_tokenizer_json("{}", "t.json").status().code(), ErrorCode::kBadFile);
  EXPECT_EQ(
      parse_hf_tokenizer_json(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]}})", "t.json")
          .status()
          .code(),
      ErrorCode::kBadFile);  // no <|endoftext|>
}

}  // namespace
}  // namespace glm::tok
