// LoRA adapters (docs/adapters.md#lora): reading llama.cpp's LoRA GGUF files (general.type =
// adapter, adapter.type = "lora", adapter.lora.alpha, tensors blk.N.<matrix>.weight.lora_a
// [rank, n_in] and .lora_b [n_out, rank]) into model::Adapter, the per-request side path
// (y += scale * B (A x) on the rows of the sequences that use the adapter), and merging into
// the served weights at load (W' = W + scale * B A, re-quantized to W's type).
// Scale, as llama.cpp: alpha / rank * the user's scale; alpha = 0 (absent) = the user's scale.
// Pure functions over immutable data; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"
#include "kernels/thread_pool.h"
#include "model/adapter.h"
#include "model/config.h"
#include "model/weights.h"

namespace glm::model {

// One --lora argument: "A.gguf[:scale]".
struct LoraSpec {
  std::string path;
  float scale = 1.0f;
};
// Parses "PATH" or "PATH:SCALE" (SCALE a finite number). invalid_argument naming the flag.
StatusOr<LoraSpec> parse_lora_spec(const std::string& arg);

// The LoRA pair of `layer` for a matrix slot (kAttnQkv, kAttnQ, ..., kFfnDown); null for the
// slots a LoRA cannot target (embeddings, norms, biases, the LM head).
LoraPair* lora_pair(LoraLayer* layer, arch::Slot slot);
inline const LoraPair* lora_pair(const LoraLayer* layer, arch::Slot slot) {
  return lora_pair(const_cast<LoraLayer*>(layer), slot);
}

// Reads the pairs of a LoRA GGUF for a base model of `config` into *out ([n_layer]); `scale`
// is the user's scale. Errors (bad_file / unsupported / invalid_argument) name the tensor or
// key that does not fit: another architecture, a tensor the base lacks, a shape or rank that
// does not match, a lone lora_a or lora_b. *out is untouched on error.
Status load_lora(const gguf::File& file, const Config& config, float scale,
                 std::vector<LoraLayer>* out);

// The one entry point for adapter files: dispatches on adapter.type ("lora" -> load_lora,
// "ptuning" -> load_ptuning). Nothing is returned half-loaded.
StatusOr<std::shared_ptr<const Adapter>> load_adapter(const gguf::File& file, const Config& config,
                                                      float scale, const std::string& name);
// Same, opening `path` (errors name it).
StatusOr<std::shared_ptr<const Adapter>> load_adapter(const std::string& path, const Config& config,
                                                      float scale, const std::string& name);

// The side path, scalar reference: y[t] += p.scale * B (A x[t]) for t in [0, n).
//   x: [n, p.n_in], y: [n, p.n_out]. Accumulates in double.
void lora_apply_ref(const LoraPair& p, const float* x, float* y, int n);

// The side path over a set of rows of a batch: for each listed row r,
//   y[r * y_stride ..][0, n_out) += p.scale * B (A x[r * x_stride ..][0, n_in)).
// A and B each run once over all listed rows (two small f32 matmuls). scratch grows to
// [n_rows, n_in + rank + n_out] floats and is reused.
void lora_apply_rows(const LoraPair& p, const float* x, int x_stride, float* y, int y_stride,
                     const std::vector<int>& rows, std::vector<float>* scratch,
                     kernels::ThreadPool* pool);

// Merges the adapter's pairs into *weights: W' = W + scale * B A per matrix, each row
// dequantized to f32, added to, and quantized back to W's type into memory owned by *weights
// (Weights::merged), the view pointed at it. Call after load_weights and before repack().
// unsupported when a matrix's type cannot be re-quantized; the weights are untouched on error.
// Cost: O(n_rows * n_in * rank) per matrix, once at load.
Status merge_lora(const Adapter& adapter, Weights* weights, kernels::ThreadPool* pool);

}  // namespace glm::model
