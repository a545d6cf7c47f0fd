// What a fine-tuning adds to its base model, applied per sequence (docs/adapters.md): LoRA
// pairs on the layers' weight matrices (W x + scale * B (A x)) and a P-Tuning v2 prefix (each
// layer's keys and values of pre_seq_len virtual tokens, attended ahead of the sequence's own).
// A sequence names its adapter in SeqInput::adapter; null = the bare base model. Sequences of
// several adapters (and none) share one batch.
// Ownership: the engine owns loaded adapters and keeps each alive while a sequence uses it.
// Thread-safety: immutable after loading.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace glm::model {

// One LoRA pair on a weight matrix W [n_out, n_in]: W' = W + scale * B A. Empty (rank 0) = the
// matrix has no LoRA.
struct LoraPair {
  int rank = 0;
  int n_in = 0;
  int n_out = 0;
  float scale = 0.0f;    // alpha / rank times the user's scale
  std::vector<float> a;  // [rank, n_in]
  std::vector<float> b;  // [n_out, rank]
  bool empty() const { return rank == 0; }
};

// The LoRA pairs of one layer, one per weight matrix of LayerWeights (same names; fused
// matrices carry one pair over their fused rows).
struct LoraLayer {
  LoraPair qkv, wq, wk, wv, wo, ffn_up, ffn_gate, ffn_down;
};

// A P-Tuning v2 prefix: per layer, the keys and values of n_tokens virtual tokens as attention
// reads them (no rotary is applied to them). The sequence's own tokens keep positions from 0.
struct PrefixKv {
  int n_tokens = 0;
  int kv_dim = 0;        // n_head_kv * head_dim of the base model
  std::vector<float> k;  // [n_layer, n_tokens, kv_dim]
  std::vector<float> v;  // [n_layer, n_tokens, kv_dim]
  bool empty() const { return n_tokens == 0; }
};

// A number no Adapter made before it in this process has.
inline uint64_t next_adapter_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

struct Adapter {
  // Its identity for copies a model keeps elsewhere (a GPU model's uploaded pairs): unique per
  // object made; a copy keeps it, so change a copy's pairs only before any model has run it.
  uint64_t id = next_adapter_id();
  std::string name;
  std::vector<LoraLayer> lora;  // [n_layer] or empty (no LoRA)
  PrefixKv prefix;              // empty = no P-Tuning prefix
};

}  // namespace glm::model
