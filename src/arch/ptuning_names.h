// The names of a P-Tuning v2 adapter file (docs/adapters.md#p-tuning-v2), one table read by the
// reader (model/ptuning.cc) and the writer (convert/ptuning_convert.cc). GGUF shapes are in ggml
// order (row length first); E = the embedding's width, H = the projection's hidden width,
// W = n_layer * 2 * kv_dim (the encoder's output row).
#pragma once

namespace glm::arch::ptuning {

constexpr char kAdapterType[] = "ptuning";                              // adapter.type
constexpr char kKeyType[] = "adapter.type";                             // string
constexpr char kKeyPreSeqLen[] = "adapter.ptuning.pre_seq_len";         // u32
constexpr char kKeyProjection[] = "adapter.ptuning.prefix_projection";  // bool
constexpr char kKeyBlockCount[] = "adapter.ptuning.block_count";        // u32, the base's layers
constexpr char kKeyKvDim[] = "adapter.ptuning.kv_dim";  // u32, the base's n_head_kv * head_dim

constexpr char kEmbedding[] = "prefix_encoder.embedding.weight";   // {E, pre_seq_len}
constexpr char kTrans0Weight[] = "prefix_encoder.trans.0.weight";  // {E, H} (projection only)
constexpr char kTrans0Bias[] = "prefix_encoder.trans.0.bias";      // {H}
constexpr char kTrans2Weight[] = "prefix_encoder.trans.2.weight";  // {H, W}
constexpr char kTrans2Bias[] = "prefix_encoder.trans.2.bias";      // {W}

}  // namespace glm::arch::ptuning
