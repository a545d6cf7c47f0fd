// Our SentencePiece BPE against the real sentencepiece library (libsentencepiece, an independent
// implementation) on random mixed-script text with the ChatGLM2/3 model: identical ids.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <random>

#include "tokenizer/test_fixtures.h"
#include "tokenizer/unicode.h"

namespace glm::tok {
namespace {

using testing::Source;

std::string random_mixed(std::mt19937& rng) {
  static const char* kWords[] = {"hello",
                                 "world",
                                 "ChatGLM3-6B",
                                 "的",
                                 "我们",
                                 "模型",
                                 "推理",
                                 "速度",
                                 "token",
                                 "videophone",
                                 "hyssop",
                                 "sop",
                                 "eop",
                                 "<|user|>",
                                 "[gMASK]",
                                 "3.14159",
                                 "2024年",
                                 "，",
                                 "。",
                                 "！",
                                 "?",
                                 "\xf0\x9f\x91\x8b",
                                 "\xf0\x9f\xa6\x99",
                                 "\xe2\x9c\x85",
                                 "naïve",
                                 "Ünïcödé",
                                 "Привет",
                                 "مرحبا",
                                 "こんにちは",
                                 "안녕하세요",
                                 "\t",
                                 "\n",
                                 "\n\n",
                                 "  ",
                                 "   ",
                                 "    ",
                                 "def",
                                 "print('x')",
                                 "{\"a\": 1}",
                                 "http://example.com/a?b=c",
                                 "___",
                                 "---",
                                 "...",
                                 "ﬁ",
                                 "\xe3\x80\x80"};
  std::string s;
  const int n = static_cast<int>(rng() % 40);
  for (int i = 0; i < n; ++i) {
    if (rng() % 3 == 0) s += " ";
    if (rng() % 5 == 0) {
      s += utf8_encode(0x4E00 + rng() % 0x5200);  // any CJK ideograph, many not in the vocab
    } else {
      s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    }
  }
  return s;
}

TEST(SpmOracle, SameIdsAsLibSentencePiece) {
  const std::string model = testing::shared("tokenizers/chatglm3.tokenizer.model");
  GLM_SKIP_IF_ABSENT(model);
  GLM_LOAD_OR_SKIP(tok, "chatglm3", Source::kVocabGguf);
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(model).ok());
  std::mt19937 rng(2024);
  int n_ids = 0;
  for (int it = 0; it < 2000; ++it) {
    const std::string s = random_mixed(rng);
    std::vector<int> ref;
    ASSERT_TRUE(sp.Encode(s, &ref).ok());
    const std::vector<int32_t> ours = tok.encode(s);
    ASSERT_EQ(ours, std::vector<int32_t>(ref.begin(), ref.end())) << "text: " << s;
    n_ids += static_cast<int>(ours.size());
  }
  EXPECT_GT(n_ids, 20000);
}

}  // namespace
}  // namespace glm::tok
