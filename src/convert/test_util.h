// Helpers shared by the convert module's tests: those of checkpoint/test_util.h.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/test_util.h"
#include "gguf/gguf.h"

namespace glm::convert::testing {

// The config.json of ChatGLM3's HF checkpoint (transformers' ChatGLMConfig field names) for a
// chatglm GGUF model such as gen-model writes, f32 weights.
inline nlohmann::json chatglm3_hf_config(const gguf::File& m, const std::string& name_or_path) {
  auto i = [&](const std::string& k) { return *m.get_int("chatglm." + k); };
  return {{"model_type", "chatglm"},
          {"_name_or_path", name_or_path},
          {"hidden_size", i("embedding_length")},
          {"num_layers", i("block_count")},
          {"num_attention_heads", i("attention.head_count")},
          {"multi_query_attention", true},
          {"multi_query_group_num", i("attention.head_count_kv")},
          {"kv_channels", i("embedding_length") / i("attention.head_count")},
          {"ffn_hidden_size", i("feed_forward_length")},
          {"padded_vocab_size", m.tensor("token_embd.weight")->shape[1]},
          {"seq_length", i("context_length")},
          {"layernorm_epsilon", *m.get_float("chatglm.attention.layer_norm_rms_epsilon")},
          {"rope_ratio", *m.get_float("chatglm.rope.freq_base") / 10000.0},
          {"add_qkv_bias", true},
          {"rmsnorm", true},
          {"torch_dtype", "float32"}};
}

// The GGUF file at path, or null with the reason as a test failure.
inline std::unique_ptr<gguf::File> open_or_die(const std::string& path) {
  StatusOr<std::unique_ptr<gguf::File>> f = gguf::File::open(path);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? std::move(*f) : nullptr;
}

using checkpoint::testing::first_difference;
using checkpoint::testing::read_bytes;
using checkpoint::testing::shared_data;
using checkpoint::testing::TempDir;

}  // namespace glm::convert::testing
