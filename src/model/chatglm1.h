// ChatGLM-6B (v1): glmserve's own GGUF architecture "chatglm1" (docs/models.md). Differs from
// the pre-norm decoder of transformer.h: LayerNorm with bias, residual on the normalised input
// scaled by alpha (`chatglm1.residual_scale`, default sqrt(2 * 28)), 2D rotary (first half of
// each head by position, second half by block position, rotate-half pairs), GELU MLP with
// biases, a bidirectional prompt prefix whose last token (<sop>) is hidden from earlier rows.
// The QKV rows are stored q heads, k heads, v heads (the converter un-interleaves HF's per-head
// [q k v] order). Ownership and thread-safety as Transformer.
#pragma once

#include <memory>

#include "gguf/gguf.h"
#include "model/model.h"

namespace glm::model {

StatusOr<std::unique_ptr<Model>> load_chatglm1(std::shared_ptr<const gguf::File> file,
                                               Config config, const LoadOptions& options);

}  // namespace glm::model
