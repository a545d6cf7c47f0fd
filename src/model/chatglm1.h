// ChatGLM-6B (v1): glmserve's own GGUF architecture "chatglm1" (docs/models.md). Differs from
// the pre-norm decoder of transformer.h: LayerNorm with bias, residual on the normalised input
// scaled by alpha (`chatglm1.residual_scale`, default sqrt(2 * 28)), 2D rotary (first half of
// each head by position, second half by block position, rotate-half pairs), GELU MLP with
// biases, a bidirectional prompt prefix whose last token (<sop>) is hidden from earlier rows.
// A sequence's P-Tuning v2 prefix (SeqInput::adapter, docs/adapters.md) is attended by every row
// ahead of its own positions, which keep their 2D positions from 0 (on the GPU too: gpu_model.h).
// The QKV rows are stored q heads, k heads, v heads (the converter un-interleaves HF's per-head
// [q k v] order). Ownership and thread-safety as Transformer.
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"

namespace glm::model {

StatusOr<std::unique_ptr<Model>> load_chatglm1(std::shared_ptr<const gguf::File> file,
                                               Config config, const LoadOptions& options);

// What the CPU model and the GPU one (chatglm1_gpu.h) share. Pure functions; thread-safe.
namespace chatglm1 {

// Checks the file's geometry (head_count_kv = head_count, head size a multiple of 4,
// rope.dimension_count = head size / 2) and returns its residual scale alpha
// (chatglm1.residual_scale, default sqrt(2 * 28)). Errors: bad_file naming the file.
StatusOr<float> residual_scale(const gguf::File& file, const Config& config);

// Validates the batch as ChatGLM-6B needs it (no LoRA; `who` names the model in the errors) and
// gives each sequence's prompt length, its bidirectional prefix (SeqInput::prefix_len, or the
// n_tokens of a step with n_past 0): prefixes [batch]. A P-Tuning v2 prefix is the caller's to
// attend or refuse (the CPU model attends it, the GPU one refuses it). Errors: invalid_argument
// when a prompt is shorter than 2 tokens ([gMASK] <sop>) or is not prefilled in one step (no
// chunked prefill).
Status prompt_lengths(const std::vector<SeqInput>& batch, const char* who,
                      std::vector<int>* prefixes);

// The rotary rows of the token at absolute position p of a sequence whose prompt has n tokens:
// cs, sn [2 (position, block position), head_dim / 4], each over head_dim / 2 dims with HF's
// inv_freq rounded through fp16.
void rope_rows(const Config& config, int p, int n, float* cs, float* sn);

}  // namespace chatglm1

}  // namespace glm::model
