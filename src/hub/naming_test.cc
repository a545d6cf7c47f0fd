#include "hub/naming.h"

#include <gtest/gtest.h>

namespace glm::hub {
namespace {

RemoteFile file(const std::string& path, uint64_t size = 1000) {
  RemoteFile f;
  f.path = path;
  f.size = size;
  return f;
}

TEST(Naming, BaseNameOfRepo) {
  EXPECT_EQ(base_name_for_repo("THUDM/chatglm3-6b-GGUF"), "chatglm3-6b");
  EXPECT_EQ(base_name_for_repo("second-state/glm-4-9b-chat-gguf"), "glm-4-9b-chat");
  EXPECT_EQ(base_name_for_repo("THUDM/chatglm3-6b"), "chatglm3-6b");
  EXPECT_EQ(base_name_for_repo("gpt2"), "gpt2");
  EXPECT_EQ(base_name_for_repo("org/.hidden+x"), "hidden-x");
  EXPECT_EQ(base_name_for_repo("org/-gguf"), "gguf");  // nothing but the suffix: kept
}

TEST(Naming, QuantOfFile) {
  EXPECT_EQ(quant_of_file("chatglm3-6b.Q4_K_M.gguf"), "q4_k_m");
  EXPECT_EQ(quant_of_file("chatglm3-ggml-q4_0.gguf"), "q4_0");
  EXPECT_EQ(quant_of_file("glm-4-9b-chat-Q8_0.gguf"), "q8_0");
  EXPECT_EQ(quant_of_file("sub/dir/model-IQ4_XS.gguf"), "iq4_xs");
  EXPECT_EQ(quant_of_file("model-f16.gguf"), "f16");
  EXPECT_EQ(quant_of_file("model.fp16.gguf"), "f16");
  EXPECT_EQ(quant_of_file("model-BF16.gguf"), "bf16");
  EXPECT_EQ(quant_of_file("q8_0-to-q4_0.gguf"), "q4_0");
  EXPECT_EQ(quant_of_file("qwen2-7b.gguf"), "");  // "qwen2" is no quantization
  EXPECT_EQ(quant_of_file("chatglm3-6b.gguf"), "");
  EXPECT_EQ(tag_for_file("Chatglm3 6B.gguf"), "chatglm3-6b");
  EXPECT_EQ(tag_for_file("x/chatglm3-6b.Q5_1.gguf"), "q5_1");
}

TEST(Naming, ParseModelName) {
  auto n = parse_model_name("ChatGLM3-6B:Q4_0");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->base, "chatglm3-6b");
  EXPECT_EQ(n->tag, "q4_0");
  EXPECT_EQ(n->str(), "chatglm3-6b:q4_0");
  n = parse_model_name("chatglm3-6b");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->tag, "");
  for (const char* bad :
       {"", ":q4_0", "a:", "../x", "a/b", ".a", "a:.b", "a:b:c", "a b", "a:../../x"}) {
    EXPECT_FALSE(parse_model_name(bad)) << bad;
  }
}

TEST(Naming, SelectByNameQuantOrOnly) {
  const std::vector<RemoteFile> files = {
      file("README.md"), file("chatglm3-6b.Q4_0.gguf"), file("chatglm3-6b.Q4_0_4_4.gguf"),
      file("chatglm3-6b.Q4_K_M.gguf"), file("chatglm3-6b.Q4_K_S.gguf")};
  auto f = select_gguf(files, "Q4_0", "o/r");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->path, "chatglm3-6b.Q4_0.gguf");  // exact tag beats the substring q4_0_4_4
  f = select_gguf(files, "q4_k_m", "o/r");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->path, "chatglm3-6b.Q4_K_M.gguf");
  f = select_gguf(files, "chatglm3-6b.Q4_K_S.gguf", "o/r");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->path, "chatglm3-6b.Q4_K_S.gguf");

  f = select_gguf(files, "q4_k", "o/r");  // substring of two files: ambiguous
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("chatglm3-6b.Q4_K_M.gguf"), std::string::npos);
  EXPECT_NE(f.status().message().find("chatglm3-6b.Q4_K_S.gguf"), std::string::npos);

  f = select_gguf(files, "Q8_0", "o/r");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(f.status().message().find("q4_k_m = chatglm3-6b.Q4_K_M.gguf"), std::string::npos)
      << f.status().message();

  f = select_gguf(files, "", "o/r");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("holds 4 GGUF files"), std::string::npos);
  f = select_gguf({file("a.md"), file("only.gguf")}, "", "o/r");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->path, "only.gguf");
  f = select_gguf({file("a.md")}, "", "o/r");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kNotFound);
}

TEST(Naming, SplitFilesAreRefusedClearly) {
  auto f = select_gguf({file("m-Q4_0-00001-of-00002.gguf")}, "q4_0", "o/r");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(f.status().message().find("gguf-split --merge"), std::string::npos);
}

}  // namespace
}  // namespace glm::hub
