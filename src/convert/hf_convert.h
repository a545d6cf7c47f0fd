// `glmserve convert HF_DIR -o M.gguf [--type T]`: a HuggingFace ChatGLM2-6B / ChatGLM3-6B /
// GLM-4-9B checkpoint directory (THUDM layout: config.json, weights, tokenizer.model) to a GGUF
// file in llama.cpp's `chatglm` layout; a GLM-4-0414 / GLM-Z1 one (transformers' Glm4ForCausalLM:
// model_type "glm4", model.layers.N.* names, tokenizer.json) to llama.cpp's `glm4` layout. Weights:
// *.safetensors (single, or sharded with model.safetensors.index.json) when the directory has them,
// else PyTorch pytorch_model*.bin (single, or with pytorch_model.bin.index.json; read by
// torch_zip.h, no code is ever run) (docs/models.md). HF Linear weights are [out, in] row-major,
// which is exactly ggml's {in, out}: no transposition. Tensor order, metadata and types are the
// ones gen-model writes (model_spec.h), so a checkpoint holding gen-model's weights converts to the
// same bytes. Streams tensor by tensor from the mapped weight files. Reentrant.
#pragma once

#include <functional>
#include <string>

#include "convert/model_spec.h"
#include "convert/model_writer.h"
#include "core/status.h"

namespace glm::convert {

// Where a conversion stands, reported after each chunk of rows it reads.
struct ConvertProgress {
  size_t tensor = 0;  // 1-based index of the tensor being written, of n_tensors
  size_t n_tensors = 0;
  const std::string* name = nullptr;  // its GGUF name
  uint64_t bytes_read = 0;            // checkpoint bytes read so far, of bytes_total
  uint64_t bytes_total = 0;
};

struct ConvertOptions {
  std::string hf_dir;
  DType type = DType::kF16;
  // Called from the converting thread; empty: no reports. Cost: one call per ~1M values.
  std::function<void(const ConvertProgress&)> progress;
};

// The HF tensor name holding the GGUF tensor `gguf_name`, or "" when there is none. ChatGLM2/3 and
// GLM-4 ("blk.3.attn_qkv.weight" ->
// "transformer.encoder.layers.3.self_attention.query_key_value.weight"); ChatGLM-6B (kChatGLM1:
// "transformer.layers.3.attention.query_key_value.weight", "lm_head.weight", biases).
std::string hf_tensor_name(const std::string& gguf_name, Family family = Family::kChatGLM3);

// Hyperparameters from a ChatGLM config.json text. ChatGLM2/3, GLM-4: hidden_size, num_layers,
// num_attention_heads, multi_query_group_num, ffn_hidden_size, padded_vocab_size, seq_length,
// layernorm_epsilon, rope_ratio (rope.freq_base = 10000 x rope_ratio; convert_hf turns it into
// linear position scaling for ChatGLM2, whose 32K model divides positions by it). ChatGLM-6B, told
// by its `position_encoding_2d` / `inner_hidden_size`: hidden_size, num_layers,
// num_attention_heads, inner_hidden_size, vocab_size, max_sequence_length, layernorm_epsilon.
// GLM-4-0414 / GLM-Z1 (model_type "glm4"): hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, max_position_embeddings, vocab_size, rms_norm_eps,
// rope_theta and partial_rotary_factor (top level or in rope_parameters; only 0.5 and no
// scaling are supported), head_dim (must be hidden_size / heads), attention_bias (must be true).
// bad_file naming the missing or odd field.
StatusOr<Hparams> hparams_from_hf_config(const std::string& json_text, const std::string& label);

// The tokenizer is tokenizer.model (ChatGLM2/3, GLM-4), ice_text.model (ChatGLM-6B) or, for
// GLM-4-0414 without a tokenizer.model, tokenizer.json; v1's
// fused QKV rows are un-interleaved from HF's per head [q k v] to glmserve's [q heads, k heads,
// v heads] (docs/models.md). Errors: not_found for a missing config/tokenizer/weights (with what
// to do), bad_file for inconsistent files, unsupported for other architectures or weight dtypes.
Status convert_hf(const ConvertOptions& opts, const std::string& out_path, WriteReport* report);

}  // namespace glm::convert
