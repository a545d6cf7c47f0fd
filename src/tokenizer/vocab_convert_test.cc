// vocab_convert: tokenizer.model files -> GGUF vocabularies identical to llama.cpp's layout
// (compared key by key with ../shared/data/vocab/*.gguf).
#include "tokenizer/vocab_convert.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace glm::tok {
namespace {

using testing::shared;
using testing::temp_path;

// Writes `spec` as a vocab-only GGUF and opens it.
std::unique_ptr<gguf::File> write_and_open(const VocabSpec& spec, const std::string& name) {
  gguf::Writer w;
  write_vocab(spec, &w);
  const std::string path = temp_path(name);
  EXPECT_TRUE(w.begin(path).ok());
  EXPECT_TRUE(w.finish().ok());
  auto f = gguf::File::open(path);
  std::remove(path.c_str());  // the mapping stays valid after unlink
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? std::move(f.value()) : nullptr;
}

// Deep equality of two metadata values, including their types.
void expect_same_value(const std::string& key, const gguf::Value& a, const gguf::Value& b) {
  ASSERT_EQ(a.type(), b.type()) << key;
  if (a.type() == gguf::ValueType::kArray) {
    ASSERT_EQ(a.array_type(), b.array_type()) << key;
    ASSERT_EQ(a.array_size(), b.array_size()) << key;
    if (a.array_type() == gguf::ValueType::kString) {
      const auto& sa = a.strings();
      const auto& sb = b.strings();
      for (size_t i = 0; i < sa.size(); ++i) ASSERT_EQ(sa[i], sb[i]) << key << "[" << i << "]";
    } else if (a.array_type() == gguf::ValueType::kFloat32) {
      auto fa = a.floats(), fb = b.floats();
      ASSERT_EQ(0, std::memcmp(fa.data(), fb.data(), fa.size() * sizeof(float))) << key;
    } else {
      ASSERT_EQ(a.ints(), b.ints()) << key;
    }
  } else if (a.type() == gguf::ValueType::kString) {
    EXPECT_EQ(a.as_string(), b.as_string()) << key;
  } else if (a.type() == gguf::ValueType::kBool) {
    EXPECT_EQ(a.as_bool(), b.as_bool()) << key;
  } else if (a.is_integer()) {
    EXPECT_EQ(a.as_int(), b.as_int()) << key;
  } else {
    EXPECT_EQ(a.as_double(), b.as_double()) << key;
  }
}

// Every tokenizer.* key of `ref` is in `ours` with the same type and value, and vice versa.
void expect_same_tokenizer_keys(const gguf::File& ours, const gguf::File& ref) {
  int n_ref = 0;
  for (const auto& [key, value] : ref.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ++n_ref;
    const gguf::Value* mine = ours.find(key);
    ASSERT_NE(mine, nullptr) << "missing key " << key;
    expect_same_value(key, *mine, value);
  }
  int n_ours = 0;
  for (const auto& [key, value] : ours.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) {
      ++n_ours;
      EXPECT_NE(ref.find(key), nullptr) << "extra key " << key;
    }
  }
  EXPECT_EQ(n_ours, n_ref);
  EXPECT_GT(n_ref, 5);
}

TEST(VocabConvert, ChatGlm3MatchesLlamaCppLayout) {
  const std::string model = shared("tokenizers/chatglm3.tokenizer.model");
  const std::string vocab = shared("vocab/chatglm3-vocab.gguf");
  GLM_SKIP_IF_ABSENT(model);
  GLM_SKIP_IF_ABSENT(vocab);
  auto spec = read_tokenizer_model(model);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->model, "llama");
  EXPECT_EQ(spec->tokens.size(), 65024u);
  EXPECT_EQ(spec->tokens[64790], "[gMASK]");
  auto ref = gguf::File::open(vocab);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  auto ours = write_and_open(*spec, "chatglm3.gguf");
  ASSERT_NE(ours, nullptr);
  expect_same_tokenizer_keys(*ours, **ref);
}

TEST(VocabConvert, Glm4MatchesLlamaCppLayoutIncludingMerges) {
  const std::string model = shared("tokenizers/glm4.tokenizer.model");
  const std::string vocab = shared("vocab/glm4-vocab.gguf");
  GLM_SKIP_IF_ABSENT(model);
  GLM_SKIP_IF_ABSENT(vocab);
  auto spec = read_tokenizer_model(model);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->model, "gpt2");
  EXPECT_EQ(spec->tokens.size(), 151552u);
  EXPECT_EQ(spec->merges.size(), 318088u);
  auto ref = gguf::File::open(vocab);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  auto ours = write_and_open(*spec, "glm4.gguf");
  ASSERT_NE(ours, nullptr);
  expect_same_tokenizer_keys(*ours, **ref);
}

TEST(VocabConvert, ReadVocabInvertsWriteVocab) {
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>", "<0x41>", "\u2581a"};
  s.scores = {0, 0, 0, 0, -1.5f};
  s.types = {kTokenUnknown, kTokenControl, kTokenControl, kTokenByte, kTokenNormal};
  s.bos = 1;
  s.eos = 2;
  s.unk = 0;
  s.add_bos = true;
  s.add_space_prefix = false;
  auto f = write_and_open(s, "small.gguf");
  ASSERT_NE(f, nullptr);
  auto back = read_vocab(*f);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->tokens, s.tokens);
  EXPECT_EQ(back->scores, s.scores);
  EXPECT_EQ(back->types, s.types);
  EXPECT_EQ(back->bos, 1);
  EXPECT_EQ(back->eos, 2);
  EXPECT_EQ(back->unk, 0);
  EXPECT_EQ(back->pad, -1);
  EXPECT_TRUE(back->add_bos);
  EXPECT_FALSE(back->add_space_prefix);
}

TEST(VocabConvert, RejectsBadInput) {
  auto missing = read_tokenizer_model("/nonexistent/tokenizer.model");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(parse_tokenizer_model("", "x").status().code(), ErrorCode::kBadFile);
  EXPECT_EQ(parse_tokenizer_model("hello world", "x").status().code(), ErrorCode::kBadFile);
  // Truncated protobuf: a pieces field claiming more bytes than present.
  EXPECT_EQ(parse_tokenizer_model(std::string("\x0a\x50\x0a\x01", 4), "x").status().code(),
            ErrorCode::kBadFile);
  // tiktoken with ranks out of order.
  EXPECT_EQ(parse_tokenizer_model("IQ== 0\nIg== 5\n", "x").status().code(), ErrorCode::kBadFile);
  auto tiny = parse_tokenizer_model("IQ== 0\nIg== 1\nISI= 2\n", "x");
  ASSERT_TRUE(tiny.ok()) << tiny.status().to_string();
  EXPECT_EQ(tiny->tokens, (std::vector<std::string>{"!", "\"", "!\""}));
  EXPECT_EQ(tiny->merges, (std::vector<std::string>{"! \""}));
}

TEST(VocabConvert, ReadVocabRejectsFileWithoutTokenizer) {
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("llama"));
  const std::string path = temp_path("notok.gguf");
  ASSERT_TRUE(w.begin(path).ok());
  ASSERT_TRUE(w.finish().ok());
  auto f = gguf::File::open(path);
  std::remove(path.c_str());
  ASSERT_TRUE(f.ok());
  auto v = read_vocab(**f);
  EXPECT_EQ(v.status().code(), ErrorCode::kBadFile);
  EXPECT_NE(v.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

TEST(ByteToUnicode, IsABijectionOverBytes) {
  for (int b = 0; b < 256; ++b) {
    const std::string& u = byte_to_unicode(static_cast<uint8_t>(b));
    size_t pos = 0;
    uint32_t cp = utf8_next(u, &pos);
    EXPECT_EQ(pos, u.size());
    EXPECT_EQ(unicode_to_byte(cp), b);
  }
  EXPECT_EQ(byte_to_unicode(' '), "\xc4\xa0");   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), "\xc4\x8a");  // Ċ
  EXPECT_EQ(byte_to_unicode('a'), "a");
}

}  // namespace
}  // namespace glm::tok
