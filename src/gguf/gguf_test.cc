// GGUF reader/writer: round trips of every metadata and tensor type, and third-party files.
#include "gguf/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>

#include "gguf/gguf_test_util.h"

namespace glm::gguf {
namespace {

std::string shared(const std::string& rel) { return std::string(GLM_SHARED_DATA) + "/" + rel; }

bool exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

#define SKIP_IF_ABSENT(path) \
  if (!exists(path)) GTEST_SKIP() << path << " is absent (see ../shared/data/README.md)"

TEST(GgufRoundTrip, EveryMetadataType) {
  Writer w;
  w.set("u8", Value::u8(250));
  w.set("i8", Value::i8(-100));
  w.set("u16", Value::u16(65000));
  w.set("i16", Value::i16(-32000));
  w.set("u32", Value::u32(4000000000u));
  w.set("i32", Value::i32(-2000000000));
  w.set("u64", Value::u64(18000000000000000000ull));
  w.set("i64", Value::i64(-9000000000000000000ll));
  w.set("f32", Value::f32(3.25f));
  w.set("f64", Value::f64(-1e300));
  w.set("bool_t", Value::boolean(true));
  w.set("bool_f", Value::boolean(false));
  w.set("str", Value::string("héllo, 世界"));
  w.set("empty_str", Value::string(""));
  w.set("strs", Value::string_array({"a", "", "ccc"}));
  w.set("empty_strs", Value::string_array({}));
  w.set("f32s", Value::f32_array({1.5f, -2.0f, 0.0f}));
  w.set("i32s", Value::i32_array({-1, 0, 7}));
  w.set("u8s", Value::array(ValueType::kUint8, {Value::u8(1), Value::u8(255)}));
  w.set("i16s", Value::array(ValueType::kInt16, {Value::i16(-5)}));
  w.set("u64s", Value::array(ValueType::kUint64, {Value::u64(1ull << 40)}));
  w.set("f64s", Value::array(ValueType::kFloat64, {Value::f64(0.125), Value::f64(-7)}));
  w.set("bools", Value::array(ValueType::kBool, {Value::boolean(true), Value::boolean(false)}));
  w.set("empty_i64s", Value::array(ValueType::kInt64, {}));
  w.set("nested",
        Value::array(ValueType::kArray, {Value::i32_array({1, 2}), Value::string_array({"x", ""}),
                                         Value::array(ValueType::kArray, {Value::i32_array({})}),
                                         Value::array(ValueType::kUint8, {})}));
  w.set("u8", Value::u8(251));  // replaces, does not duplicate
  const std::string path = temp_path("meta.gguf");
  ASSERT_TRUE(w.begin(path).ok());
  ASSERT_TRUE(w.finish().ok());

  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const File& file = **f;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata().size(), 25u);
  EXPECT_EQ(*file.get_int("u8"), 251);
  EXPECT_EQ(*file.get_int("i8"), -100);
  EXPECT_EQ(*file.get_int("u16"), 65000);
  EXPECT_EQ(*file.get_int("i16"), -32000);
  EXPECT_EQ(*file.get_int("u32"), 4000000000ll);
  EXPECT_EQ(*file.get_int("i32"), -2000000000);
  EXPECT_EQ(file.find("u64")->as_uint(), 18000000000000000000ull);
  EXPECT_FALSE(file.get_int("u64").ok());  // does not fit int64: an error, not a wrap
  EXPECT_EQ(*file.get_int("i64"), -9000000000000000000ll);
  EXPECT_EQ(*file.get_float("f32"), 3.25);
  EXPECT_EQ(*file.get_float("f64"), -1e300);
  EXPECT_TRUE(*file.get_bool("bool_t"));
  EXPECT_FALSE(*file.get_bool("bool_f"));
  EXPECT_EQ(*file.get_string("str"), "héllo, 世界");
  EXPECT_EQ(*file.get_string("empty_str"), "");
  EXPECT_EQ(file.find("strs")->strings(), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(file.find("empty_strs")->array_size(), 0u);
  EXPECT_EQ(file.find("empty_strs")->array_type(), ValueType::kString);
  EXPECT_EQ(file.find("f32s")->floats(), (std::vector<float>{1.5f, -2.0f, 0.0f}));
  EXPECT_EQ(file.find("i32s")->ints(), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(file.find("u8s")->ints(), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(file.find("i16s")->ints(), (std::vector<int64_t>{-5}));
  EXPECT_EQ(file.find("u64s")->ints(), (std::vector<int64_t>{1ll << 40}));
  EXPECT_EQ(file.find("f64s")->floats(), (std::vector<float>{0.125f, -7.0f}));
  EXPECT_EQ(file.find("bools")->array_type(), ValueType::kBool);
  EXPECT_EQ(file.find("bools")->ints(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(file.find("empty_i64s")->array_size(), 0u);
  EXPECT_EQ(file.find("empty_i64s")->array_type(), ValueType::kInt64);
  const Value& nested = *file.find("nested");
  ASSERT_EQ(nested.array_type(), ValueType::kArray);
  ASSERT_EQ(nested.items().size(), 4u);
  EXPECT_EQ(nested.items()[0].ints(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested.items()[1].strings(), (std::vector<std::string>{"x", ""}));
  ASSERT_EQ(nested.items()[2].items().size(), 1u);
  EXPECT_EQ(nested.items()[2].items()[0].array_type(), ValueType::kInt32);
  EXPECT_EQ(nested.items()[2].items()[0].array_size(), 0u);
  EXPECT_EQ(nested.items()[3].array_type(), ValueType::kUint8);
  // Typed getters: absent -> not_found, wrong type -> bad_file, defaults.
  EXPECT_EQ(file.get_int("nope").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(file.get_int("str").status().code(), ErrorCode::kBadFile);
  EXPECT_EQ(file.get_string("u8").status().code(), ErrorCode::kBadFile);
  EXPECT_EQ(*file.get_int_or("nope", 42), 42);
  EXPECT_EQ(*file.get_float_or("nope", 0.5), 0.5);
  EXPECT_FALSE(file.get_int_or("str", 1).ok());
  EXPECT_TRUE(file.tensors().empty());
  unlink(path.c_str());
}

TEST(GgufRoundTrip, EveryTensorTypeWithAlignment) {
  for (size_t alignment : {32u, 64u, 1u, 4096u}) {
    Writer w;
    w.set("general.architecture", Value::string("test"));
    w.set_alignment(alignment);
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<const DTypeInfo*> types;
    for (uint32_t id = 0; id < 64; ++id) {
      const DTypeInfo* info = dtype_info(id);
      if (info == nullptr) continue;
      types.push_back(info);
      const int64_t row = info->block_size * 2;
      w.add_tensor("t." + std::string(info->name), info->type, {row, 3});
      std::vector<uint8_t> bytes(row_bytes(info->type, row) * 3);
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + id);
      payloads.push_back(std::move(bytes));
    }
    const std::string path = temp_path("tensors.gguf");
    ASSERT_TRUE(w.begin(path).ok());
    for (const auto& p : payloads) {  // in two parts, to exercise partial writes
      ASSERT_TRUE(w.write_tensor_data(p.data(), p.size() / 2).ok());
      ASSERT_TRUE(w.write_tensor_data(p.data() + p.size() / 2, p.size() - p.size() / 2).ok());
    }
    ASSERT_TRUE(w.finish().ok());
    auto f = File::open(path);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ((*f)->alignment(), alignment);
    ASSERT_EQ((*f)->tensors().size(), types.size());
    for (size_t i = 0; i < types.size(); ++i) {
      const TensorInfo* t = (*f)->tensor("t." + std::string(types[i]->name));
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->type, types[i]->type);
      EXPECT_EQ(t->shape, (std::vector<int64_t>{types[i]->block_size * 2, 3}));
      EXPECT_EQ(t->n_rows(), 3);
      EXPECT_EQ(t->n_elements(), types[i]->block_size * 6);
      EXPECT_EQ(t->offset % alignment, 0u);
      ASSERT_EQ(t->n_bytes, payloads[i].size());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % std::min<size_t>(alignment, 4096), 0u);
      EXPECT_EQ(std::memcmp(t->data, payloads[i].data(), t->n_bytes), 0) << t->name;
    }
    unlink(path.c_str());
  }
}

TEST(GgufWriter, RejectsMisuse) {
  {
    Writer w;
    w.add_tensor("a", DType::kQ4_0, {33});  // not a multiple of the block
    EXPECT_EQ(w.begin(temp_path("x.gguf")).code(), ErrorCode::kInvalidArgument);
  }
  {
    Writer w;
    w.add_tensor("a", DType::kF32, {2});
    w.add_tensor("a", DType::kF32, {2});
    EXPECT_FALSE(w.begin(temp_path("x.gguf")).ok());
  }
  {
    Writer w;
    w.add_tensor("a", DType::kF32, {0});
    EXPECT_FALSE(w.begin(temp_path("x.gguf")).ok());
  }
  {
    Writer w;
    w.set_alignment(48);
    EXPECT_FALSE(w.begin(temp_path("x.gguf")).ok());
  }
  {
    const std::string path = temp_path("partial.gguf");
    Writer w;
    w.add_tensor("a", DType::kF32, {4});
    ASSERT_TRUE(w.begin(path).ok());
    float x[8] = {};
    EXPECT_FALSE(w.write_tensor_data(x, sizeof(x)).ok());  // more than the tensor holds
    ASSERT_TRUE(w.write_tensor_data(x, 8).ok());
    EXPECT_FALSE(w.finish().ok());  // 8 of 16 bytes
    EXPECT_FALSE(exists(path));     // never left under the final name
  }
  {
    const std::string path = temp_path("abandoned.gguf");
    {
      Writer w;
      w.add_tensor("a", DType::kF32, {4});
      ASSERT_TRUE(w.begin(path).ok());
    }
    EXPECT_FALSE(exists(path));
    EXPECT_FALSE(exists(path + ".tmp"));  // the destructor cleans up
  }
  Writer w;
  EXPECT_FALSE(w.begin("/nonexistent-dir/x.gguf").ok());
}

TEST(GgufFiles, ChatGlm3Vocab) {
  const std::string path = shared("vocab/chatglm3-vocab.gguf");
  SKIP_IF_ABSENT(path);
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const File& file = **f;
  EXPECT_EQ(*file.get_string("general.architecture"), "chatglm");
  EXPECT_EQ(*file.get_int("chatglm.embedding_length"), 4096);
  EXPECT_EQ(*file.get_int("chatglm.block_count"), 28);
  EXPECT_EQ(*file.get_int("chatglm.attention.head_count_kv"), 2);
  EXPECT_NEAR(*file.get_float("chatglm.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
  EXPECT_EQ(*file.get_string("tokenizer.ggml.model"), "llama");
  const Value* tokens = file.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->strings().size(), 65024u);
  EXPECT_EQ(tokens->strings()[0], "<unk>");
  EXPECT_EQ(tokens->strings()[64790], "[gMASK]");
  EXPECT_EQ(file.find("tokenizer.ggml.scores")->floats().size(), 65024u);
  EXPECT_EQ(file.find("tokenizer.ggml.token_type")->ints().size(), 65024u);
  EXPECT_FALSE(*file.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_TRUE(file.tensors().empty());
}

TEST(GgufFiles, Glm4VocabLoadsFast) {
  const std::string path = shared("vocab/glm4-vocab.gguf");
  SKIP_IF_ABSENT(path);
  const auto t0 = std::chrono::steady_clock::now();
  auto f = File::open(path);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  // Printed, not asserted (no timed assertions in tests; the budget is < 1 s).
  std::printf("glm4-vocab.gguf parsed in %.1f ms\n", ms);
  EXPECT_EQ((*f)->find("tokenizer.ggml.tokens")->strings().size(), 151552u);
  const auto& merges = (*f)->find("tokenizer.ggml.merges")->strings();
  ASSERT_EQ(merges.size(), 318088u);
  EXPECT_EQ(merges[0], "Ġ Ġ");
  EXPECT_EQ(*(*f)->get_int("tokenizer.ggml.eos_token_id"), 151329);
  EXPECT_EQ(*(*f)->get_float("chatglm.rope.freq_base"), 5000000.0);
}

TEST(GgufFiles, OracleAndReferenceModels) {
  for (const char* rel : {"oracle/glm3-tiny.gguf", "oracle/glm4-tiny.gguf"}) {
    const std::string path = shared(rel);
    SKIP_IF_ABSENT(path);
    auto f = File::open(path);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const TensorInfo* qkv = (*f)->tensor("blk.0.attn_qkv.weight");
    ASSERT_NE(qkv, nullptr) << rel;
    EXPECT_EQ(qkv->type, DType::kF32);
    // hidden 32; 8 query heads of 4 + 2 * 2 kv heads of 4 = 48 rows.
    EXPECT_EQ(qkv->shape, (std::vector<int64_t>{32, 48}));
    EXPECT_EQ(qkv->n_bytes, 32u * 48 * 4);
    EXPECT_EQ((*f)->tensor("output.weight"), nullptr);  // tied
  }
  const std::string small = shared("reference/chatglm3-small.gguf");
  SKIP_IF_ABSENT(small);
  auto f = File::open(small);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const TensorInfo* emb = (*f)->tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::kF16);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 4096}));
  const TensorInfo* up = (*f)->tensor("blk.1.ffn_up.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->shape, (std::vector<int64_t>{512, 2 * 1376}));
  EXPECT_EQ((*f)->tensor("blk.0.attn_qkv.bias")->type, DType::kF32);
  // The last tensor ends inside the file and every data pointer is inside the mapping.
  size_t end = 0;
  for (const TensorInfo& t : (*f)->tensors()) end = std::max(end, t.offset + t.n_bytes);
  EXPECT_GT(end, 19000000u);
}

TEST(GgufFiles, Stories260K) {
  const std::string path = shared("models/stories260K.gguf");
  SKIP_IF_ABSENT(path);
  auto f = File::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*(*f)->get_string("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(*(*f)->get_int("llama.block_count"), 5);
  const TensorInfo* emb = (*f)->tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ((*f)->find("tokenizer.ggml.tokens")->strings().size(), 512u);
}

TEST(GgufFiles, OpenReportsMissingFile) {
  auto f = File::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace glm::gguf
