// Bad files and bad input give clear Status errors, never crashes.
#include <gtest/gtest.h>

#include "model/config.h"
#include "model/test_util.h"

namespace glm::model {
namespace {

using testing::RandomSpec;

Status load_spec(const RandomSpec& spec, const std::string& name) {
  const std::string path = testing::temp_path(name);
  Status w = testing::write_random_model(spec, path);
  if (!w.ok()) return w;
  auto m = testing::load(path);
  return m.ok() ? Status::Ok() : m.status();
}

TEST(Errors, GoodFileLoads) {
  RandomSpec s;
  EXPECT_TRUE(load_spec(s, "good.gguf").ok());
  s.arch = "llama";
  EXPECT_TRUE(load_spec(s, "good_llama.gguf").ok());
}

TEST(Errors, UnknownArchitecture) {
  RandomSpec s;
  s.arch = "mamba";
  Status st = load_spec(s, "mamba.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  EXPECT_NE(st.message().find("mamba"), std::string::npos) << st.message();
}

TEST(Errors, MissingTensorIsNamed) {
  RandomSpec s;
  s.skip = {"blk.1.ffn_down.weight"};
  Status st = load_spec(s, "missing.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kBadFile);
  EXPECT_NE(st.message().find("blk.1.ffn_down.weight"), std::string::npos) << st.message();
}

TEST(Errors, WrongShapeIsNamed) {
  RandomSpec s;
  s.reshape = [](const std::string& name, std::vector<int64_t>* shape) {
    if (name == "blk.0.attn_qkv.weight") (*shape)[1] -= 4;
  };
  Status st = load_spec(s, "shape.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kBadFile);
  EXPECT_NE(st.message().find("blk.0.attn_qkv.weight"), std::string::npos) << st.message();
}

TEST(Errors, InconsistentMetadata) {
  RandomSpec s;
  s.extra_metadata = [](gguf::Writer* w) {
    w->set("chatglm.attention.head_count", gguf::Value::u32(5));  // 64 % 5 != 0
  };
  Status st = load_spec(s, "heads.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kBadFile);
  EXPECT_NE(st.message().find("head_count"), std::string::npos) << st.message();

  s.extra_metadata = [](gguf::Writer* w) {
    w->set("chatglm.attention.head_count_kv", gguf::Value::u32(3));  // 4 % 3 != 0
  };
  st = load_spec(s, "kvheads.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kBadFile);

  s.extra_metadata = [](gguf::Writer* w) {
    w->set("chatglm.rope.dimension_count", gguf::Value::u32(17));
  };
  st = load_spec(s, "rot.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kBadFile);
  EXPECT_NE(st.message().find("rope.dimension_count"), std::string::npos) << st.message();

  s.extra_metadata = [](gguf::Writer* w) {
    w->set("chatglm.block_count", gguf::Value::string("two"));
  };
  st = load_spec(s, "type.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kBadFile);
  EXPECT_NE(st.message().find("block_count"), std::string::npos) << st.message();
}

// The head width a file states (attention.key_length / value_length: GLM-4.5-Air's 96 of 128
// over 4096) is the one its tensors must have: stated wider than the file's q rows, the shape
// error names the tensor; keys and values of different widths are refused as not supported.
TEST(Errors, AStatedHeadWidthIsTheTensorsOne) {
  RandomSpec s;  // llama, 4 heads over 64: 16 wide
  s.arch = "llama";
  s.extra_metadata = [](gguf::Writer* w) {
    w->set("llama.attention.key_length", gguf::Value::u32(32));
    w->set("llama.attention.value_length", gguf::Value::u32(32));
  };
  Status st = load_spec(s, "wide_heads.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kBadFile) << st.message();
  EXPECT_NE(st.message().find("blk.0.attn_q.weight"), std::string::npos) << st.message();
  s.extra_metadata = [](gguf::Writer* w) {
    w->set("llama.attention.key_length", gguf::Value::u32(16));
    w->set("llama.attention.value_length", gguf::Value::u32(32));
  };
  st = load_spec(s, "kv_widths.gguf");
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.message();
  EXPECT_NE(st.message().find("keys of 16 and values of 32"), std::string::npos) << st.message();
  s.extra_metadata = [](gguf::Writer* w) {
    w->set("llama.attention.key_length", gguf::Value::u32(16));
    w->set("llama.attention.value_length", gguf::Value::u32(16));
  };
  EXPECT_TRUE(load_spec(s, "stated_heads.gguf").ok());
}

// Any value of any hyperparameter either loads a model that runs, or gives an error.
TEST(Errors, MetadataValuesNeverCrash) {
  const std::vector<std::string> keys = {
      "embedding_length",     "feed_forward_length",     "block_count",
      "attention.head_count", "attention.head_count_kv", "rope.dimension_count",
      "context_length",       "attention.key_length",    "attention.value_length"};
  const std::vector<uint32_t> values = {0, 1, 2, 3, 4, 8, 16, 63, 64, 65, 1u << 20, 0xffffffffu};
  int loaded = 0, failed = 0;
  for (const std::string& key : keys) {
    for (uint32_t value : values) {
      RandomSpec s;
      s.n_layer = 1;
      s.extra_metadata = [&](gguf::Writer* w) {
        w->set("chatglm." + key, gguf::Value::u32(value));
      };
      const std::string path = testing::temp_path("meta.gguf");
      ASSERT_TRUE(testing::write_random_model(s, path).ok());
      auto m = testing::load(path);
      if (!m.ok()) {
        EXPECT_FALSE(m.status().message().empty());
        ++failed;
        continue;
      }
      ++loaded;
      KvPool kv((*m)->config(), 1, 4, DType::kF32);
      std::vector<int32_t> tokens = {1, 2}, blocks = {0};
      std::vector<float> out;
      SeqInput in{tokens.data(), 2, 0, blocks.data(), 1, true};
      ASSERT_TRUE((*m)->forward({in}, &kv, &out).ok()) << key << " = " << value;
      EXPECT_EQ(out.size(), 2u * (*m)->config().n_vocab);
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(failed, 0);
}

// A block_count a file cannot hold (more layers than it has tensors) is refused by name before
// anything is sized by it: 2^24 layers would otherwise allocate tens of gigabytes of views.
TEST(Errors, ABlockCountPastTheFilesTensorsIsRefusedBeforeAllocating) {
  RandomSpec s;
  s.extra_metadata = [](gguf::Writer* w) {
    w->set("chatglm.block_count", gguf::Value::u32(1u << 24));
  };
  const std::string path = testing::temp_path("many_layers.gguf");
  ASSERT_TRUE(testing::write_random_model(s, path).ok());
  auto m = testing::load(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kBadFile);
  EXPECT_NE(m.status().message().find("block_count = 16777216 but the file holds"),
            std::string::npos)
      << m.status().message();
}

// rope.scaling (llama.cpp's keys): "linear" divides positions by the factor; an unknown type is
// refused by name rather than run as if there were none.
TEST(Errors, RopeScalingLinearIsReadOthersAreRefused) {
  for (const char* type : {"linear", "none", "yarn"}) {
    SCOPED_TRACE(type);
    RandomSpec s;
    s.extra_metadata = [type](gguf::Writer* w) {
      w->set("chatglm.rope.scaling.type", gguf::Value::string(type));
      w->set("chatglm.rope.scaling.factor", gguf::Value::f32(16.0f));
    };
    const std::string path = testing::temp_path(std::string("scaling_") + type + ".gguf");
    ASSERT_TRUE(testing::write_random_model(s, path).ok());
    auto f = gguf::File::open(path);
    ASSERT_TRUE(f.ok());
    auto c = read_config(**f);
    if (std::string(type) == "yarn") {
      ASSERT_FALSE(c.ok());
      EXPECT_EQ(c.status().code(), ErrorCode::kUnsupported);
      EXPECT_NE(c.status().message().find("'yarn'"), std::string::npos) << c.status().message();
    } else {
      ASSERT_TRUE(c.ok()) << c.status().message();
      EXPECT_FLOAT_EQ(c->rope_freq_scale, std::string(type) == "linear" ? 1.0f / 16.0f : 1.0f);
    }
  }
}

TEST(Errors, ConfigReadsDefaultsAndVocab) {
  RandomSpec s;
  s.n_vocab = 77;
  s.tied = true;
  const std::string path = testing::temp_path("cfg.gguf");
  ASSERT_TRUE(testing::write_random_model(s, path).ok());
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f.ok());
  auto c = read_config(**f);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->n_vocab, 77);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->n_rot, 8);
  EXPECT_TRUE(c->tied_output);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_EQ(c->n_head_kv, 2);
}

TEST(Errors, VocabOnlyFileIsNotAModel) {
  const std::string path = testing::data_path("vocab/chatglm3-vocab.gguf");
  if (!testing::file_exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = testing::load(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kBadFile);
  EXPECT_NE(m.status().message().find("token_embd.weight"), std::string::npos)
      << m.status().message();
}

TEST(Errors, BadBatchInput) {
  RandomSpec s;
  const std::string path = testing::temp_path("input.gguf");
  ASSERT_TRUE(testing::write_random_model(s, path).ok());
  auto m = testing::load(path);
  ASSERT_TRUE(m.ok());
  KvPool kv((*m)->config(), 2, 4, DType::kF16);
  std::vector<int32_t> blocks = {0, 1};
  std::vector<float> out = {42.0f};
  std::vector<int32_t> tokens = {1, 2, 64};  // 64 == n_vocab: out of range
  SeqInput in{tokens.data(), 3, 0, blocks.data(), 2, false};
  Status st = (*m)->forward({in}, &kv, &out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("64"), std::string::npos) << st.message();
  EXPECT_EQ(out, std::vector<float>{42.0f});  // untouched on error

  tokens = {1, 2, 3};
  in.n_past = 6;  // 9 positions need 3 blocks of 4
  st = (*m)->forward({in}, &kv, &out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  blocks = {0, 7};  // block id outside the pool
  in.n_past = 3;
  st = (*m)->forward({in}, &kv, &out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  in.n_past = -1;
  st = (*m)->forward({in}, &kv, &out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(out, std::vector<float>{42.0f});

  Config smaller = (*m)->config();  // a KV cache made for another model
  smaller.n_layer = 1;
  KvPool other(smaller, 2, 4, DType::kF16);
  blocks = {0, 1};
  in.n_past = 0;
  st = (*m)->forward({in}, &other, &out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace glm::model
