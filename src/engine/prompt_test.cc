// Raw prompts: where [gMASK] sop goes (before the text for ChatGLM2/3 and GLM-4, after it for
// ChatGLM-6B, whose prompt is bidirectional and ends in <sop>), BOS otherwise.
#include "engine/prompt.h"

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_convert.h"

namespace glm::engine {
namespace {

std::unique_ptr<tok::Tokenizer> make(const std::vector<std::string>& specials) {
  tok::VocabSpec s;
  s.model = "llama";
  for (const std::string& t :
       {std::string("<unk>"), std::string("<s>"), std::string("\xe2\x96\x81"), std::string("a")}) {
    s.tokens.push_back(t);
    s.scores.push_back(-1.0f);
    s.types.push_back(t == "<unk>" ? tok::kTokenUnknown
                      : t == "<s>" ? tok::kTokenControl
                                   : tok::kTokenNormal);
  }
  for (const std::string& t : specials) {
    s.tokens.push_back(t);
    s.scores.push_back(0.0f);
    s.types.push_back(tok::kTokenControl);
  }
  s.bos = 1;
  auto t = tok::Tokenizer::from_spec(s);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : nullptr;
}

using Ids = std::vector<int32_t>;

TEST(RawPrompt, GlmMarksBeforeTheTextOrAfterItForABidirectionalPrompt) {
  auto v1 = make({"[gMASK]", "<sop>"});  // [gMASK] = 4, <sop> = 5
  ASSERT_NE(v1, nullptr);
  const Ids text = v1->encode("a");
  auto after = plan_raw_prompt(*v1, raw_affixes(*v1, false, true), "a", 8, 64);
  ASSERT_TRUE(after.ok());
  Ids want = text;
  want.push_back(4);
  want.push_back(5);
  EXPECT_EQ(after->prompt, want);
  auto before = plan_raw_prompt(*v1, raw_affixes(*v1, false, false), "a", 8, 64);
  ASSERT_TRUE(before.ok());
  want = {4, 5};
  want.insert(want.end(), text.begin(), text.end());
  EXPECT_EQ(before->prompt, want);
  // Empty text: a v1 prompt needs some; a prefix alone is a prompt.
  EXPECT_FALSE(plan_raw_prompt(*v1, raw_affixes(*v1, false, true), "", 8, 64).ok());
  EXPECT_TRUE(plan_raw_prompt(*v1, raw_affixes(*v1, false, false), "", 8, 64).ok());

  auto llama = make({});
  ASSERT_NE(llama, nullptr);
  const RawAffixes bos = raw_affixes(*llama, true, false);
  EXPECT_EQ(bos.prefix, (Ids{1}));
  EXPECT_TRUE(bos.suffix.empty());
  EXPECT_TRUE(raw_affixes(*llama, false, false).prefix.empty());
}

}  // namespace
}  // namespace glm::engine
