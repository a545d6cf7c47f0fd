// evaluate(): the procedure behind `glmserve eval` (docs/cli.md) and the golden tests: prefill
// `prompt` in one batch (outputs for every position), then feed each `decode` token as its own
// single-token step through the KV cache. Uses a private contiguous KV cache.
// Cost: one model forward per step; allocates the KV cache for prompt + decode positions.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/model.h"

namespace glm::model {

struct EvalRow {
  int pos = 0;
  int32_t token = 0;
  std::vector<float> values;  // [n_vocab] logits or [n_embd] hidden
};

struct EvalOptions {
  OutputKind output = OutputKind::kLogits;
  DType kv_type = DType::kF32;  // kF32, kF16 or kQ8_0
  int block_tokens = 16;
  const Adapter* adapter = nullptr;  // every step's SeqInput::adapter (e.g. a P-Tuning prefix)
};

// One row per position: the prompt's positions first, then one per decode token.
StatusOr<std::vector<EvalRow>> evaluate(Model& model, const std::vector<int32_t>& prompt,
                                        const std::vector<int32_t>& decode,
                                        const EvalOptions& options);

}  // namespace glm::model
