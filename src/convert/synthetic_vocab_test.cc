#include "convert/synthetic_vocab.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace glm::convert {
namespace {

// llama.cpp maps token text -> id and aborts on a duplicate text; the full-size ChatGLM
// vocabulary once held "sop"/"eop" both as letter triples and as special tokens.
TEST(SyntheticVocab, EveryTokenTextIsUniqueAtFullSize) {
  const struct {
    Family arch;
    int64_t n_vocab;
  } cases[] = {{Family::kChatGLM1, 130528},
               {Family::kChatGLM3, 65024},
               {Family::kChatGLM2, 65024},
               {Family::kGLM4, 151552},
               {Family::kLlama, 32000}};
  for (const auto& c : cases) {
    auto v = synthetic_vocab(c.arch, c.n_vocab);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ASSERT_EQ(static_cast<int64_t>(v->tokens.size()), c.n_vocab);
    std::set<std::string> seen;
    for (const std::string& t : v->tokens) EXPECT_TRUE(seen.insert(t).second) << "duplicate " << t;
  }
}

}  // namespace
}  // namespace glm::convert
