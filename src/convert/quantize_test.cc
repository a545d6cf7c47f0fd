#include "convert/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "convert/gen_model.h"
#include "convert/model_writer.h"
#include "convert/test_util.h"
#include "gguf/gguf.h"

namespace glm::convert {
namespace {

using testing::open_or_die;
using testing::read_bytes;
using testing::TempDir;

std::vector<float> floats_of(const gguf::TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  decode_rows(t.type, t.data, t.n_rows(), t.shape[0], out.data());
  return out;
}

// Root-mean-square error of `got` relative to the RMS of `want`.
double relative_rms_error(const std::vector<float>& want, const std::vector<float>& got) {
  double e = 0, w = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    e += (want[i] - got[i]) * (want[i] - got[i]);
    w += want[i] * want[i];
  }
  return std::sqrt(e / w);
}

class QuantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GenOptions o;
    o.family = Family::kChatGLM3;
    o.preset = "tiny";
    o.type = DType::kF32;
    o.seed = 11;
    ASSERT_TRUE(generate_model(o, src_path(), nullptr).ok());
  }
  std::string src_path() const { return dir_.file("f32.gguf"); }
  TempDir dir_;
};

TEST_F(QuantizeTest, RoundTripErrorsFollowTheFormat) {
  auto src = open_or_die(src_path());
  ASSERT_NE(src, nullptr);
  // Expected relative RMS error of each format on Gaussian weights: the step of a b-bit
  // quantizer over a block's range, about max|x| / 2^(b-1) with max|x| ~ 2.5 sd in a block of 32
  // (uniform rounding error: step / sqrt(12)). Bounds are 2x those estimates.
  struct Case {
    DType type;
    double bound;
  };
  const Case cases[] = {{DType::kF16, 1e-3}, {DType::kBF16, 8e-3}, {DType::kQ8_0, 0.01},
                        {DType::kQ4_0, 0.2}, {DType::kQ4_K, 0.2},  {DType::kQ6_K, 0.05}};
  for (const Case& c : cases) {
    SCOPED_TRACE(dtype_name(c.type));
    const std::string out = dir_.file("out.gguf");
    QuantizeReport rep;
    Status s = quantize_file(src_path(), out, c.type, &rep);
    ASSERT_TRUE(s.ok()) << s.to_string();
    auto q = open_or_die(out);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(q->tensors().size(), src->tensors().size());
    EXPECT_EQ(*q->get_int("general.file_type"), file_type_of(c.type));
    EXPECT_EQ(*q->get_string("general.architecture"), "chatglm");
    EXPECT_EQ(q->find("tokenizer.ggml.tokens")->array_size(),
              src->find("tokenizer.ggml.tokens")->array_size());
    for (size_t i = 0; i < src->tensors().size(); ++i) {
      const gguf::TensorInfo& a = src->tensors()[i];
      const gguf::TensorInfo& b = q->tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.shape, b.shape);
      if (a.shape.size() == 1) {
        EXPECT_EQ(b.type, DType::kF32) << a.name;
        EXPECT_EQ(0, std::memcmp(a.data, b.data, a.n_bytes)) << a.name;
        continue;
      }
      EXPECT_EQ(b.type, choose_type(c.type, role_from_name(a.name, 2), a.shape[0])) << a.name;
      EXPECT_LT(relative_rms_error(floats_of(a), floats_of(b)), c.bound) << a.name;
    }
  }
}

TEST_F(QuantizeTest, QuantizedOutputMatchesTheReferenceQuantizer) {
  const std::string out = dir_.file("q4.gguf");
  ASSERT_TRUE(quantize_file(src_path(), out, DType::kQ4_0, nullptr).ok());
  auto src = open_or_die(src_path());
  auto q = open_or_die(out);
  const gguf::TensorInfo* a = src->tensor("blk.0.attn_qkv.weight");
  const gguf::TensorInfo* b = q->tensor("blk.0.attn_qkv.weight");
  ASSERT_EQ(b->type, DType::kQ4_0);
  std::vector<uint8_t> want(b->n_bytes);
  encode_rows(DType::kQ4_0, reinterpret_cast<const float*>(a->data), a->n_rows(), a->shape[0],
              want.data());
  EXPECT_EQ(0, std::memcmp(want.data(), b->data, b->n_bytes));
  // The output head: Q6_K does not fit rows of 64, so Q8_0, as llama.cpp does.
  EXPECT_EQ(q->tensor("output.weight")->type, DType::kQ8_0);
}

TEST_F(QuantizeTest, SameTypeIsCopiedAndFallbacksAreReported) {
  const std::string q8 = dir_.file("q8.gguf");
  ASSERT_TRUE(quantize_file(src_path(), q8, DType::kQ8_0, nullptr).ok());
  QuantizeReport rep;
  const std::string again = dir_.file("q8b.gguf");
  ASSERT_TRUE(quantize_file(q8, again, DType::kQ8_0, &rep).ok());
  EXPECT_EQ(rep.n_converted, 0u);
  EXPECT_EQ(testing::first_difference(read_bytes(q8), read_bytes(again)), -1);

  QuantizeReport k;
  ASSERT_TRUE(quantize_file(src_path(), dir_.file("k.gguf"), DType::kQ4_K, &k).ok());
  // Tiny rows are 64 and 160 long: nothing fits a 256 block.
  EXPECT_FALSE(k.notes.empty());
  EXPECT_NE(k.notes[0].find("not a multiple of 256"), std::string::npos);
}

TEST_F(QuantizeTest, BadInputIsAnError) {
  EXPECT_EQ(
      quantize_file(dir_.file("none.gguf"), dir_.file("o.gguf"), DType::kQ8_0, nullptr).code(),
      ErrorCode::kNotFound);
  EXPECT_FALSE(quantize_file(src_path(), src_path(), DType::kQ8_0, nullptr).ok());
  const std::string junk = dir_.file("junk.gguf");
  FILE* f = std::fopen(junk.c_str(), "wb");
  std::fputs("not a gguf file at all", f);
  std::fclose(f);
  EXPECT_FALSE(quantize_file(junk, dir_.file("o.gguf"), DType::kQ8_0, nullptr).ok());
}

}  // namespace
}  // namespace glm::convert
