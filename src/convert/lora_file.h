// LoRA adapter files in llama.cpp's GGUF layout (what its convert_lora_to_gguf.py writes, what
// llama.cpp's --lora and glmserve's --lora / --adapter read; docs/adapters.md#lora):
//   general.type = "adapter", general.architecture = the base's, adapter.type = "lora",
//   adapter.lora.alpha (f32); per adapted matrix W [n_out, n_in] of the base (e.g.
//   blk.N.attn_qkv.weight), tensors W.lora_a: ggml {n_in, rank} = [rank, n_in] (PEFT's lora_A,
//   as is) and W.lora_b: ggml {rank, n_out} = [n_out, rank] (PEFT's lora_B, as is).
// Writers: random adapters for a base file (gen-model --lora-of) and PEFT directories (convert).
// Reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf.h"

namespace glm::convert {

struct LoraTensor {
  std::string base;  // the base model's tensor: "blk.0.attn_qkv.weight"
  int64_t rank = 0;
  int64_t n_in = 0;
  int64_t n_out = 0;
  std::vector<float> a;  // [rank, n_in]
  std::vector<float> b;  // [n_out, rank]
};

struct LoraFile {
  std::string arch;  // general.architecture of the base
  float alpha = 0;   // adapter.lora.alpha; scale = alpha / rank
  std::vector<LoraTensor> tensors;
};

// Writes `lora` to `path` with its A and B as `type` (f32, f16 or bf16), atomically.
Status write_lora_file(const LoraFile& lora, DType type, const std::string& path);

// Random LoRA for every weight matrix of the layers of `base` (names blk.N.<attn_qkv, attn_q,
// attn_k, attn_v, attn_output, ffn_up, ffn_gate, ffn_down>.weight): A and B ~ N(0, 0.05),
// from the counter-based streams of random.h keyed by (seed, "<tensor>.lora_a" / ".lora_b"),
// so a seed gives the same numbers everywhere. `targets` (e.g. {"attn_qkv", "ffn_up"}) keeps
// only those matrices; empty = all of them.
StatusOr<LoraFile> random_lora(const gguf::File& base, int64_t rank, float alpha, uint64_t seed,
                               const std::vector<std::string>& targets = {});

}  // namespace glm::convert
