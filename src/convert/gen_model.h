// `glmserve gen-model`: random-weight models in llama.cpp's layouts, for tests and benchmarks.
// Weights are drawn from the counter-based generator of random.h (one stream per tensor, keyed by
// the seed and the tensor name), so a seed gives identical bytes everywhere:
//   matrices and embeddings N(0, 0.02), qkv biases N(0, 0.02), norm weights 1 + N(0, 0.02),
//   glm4moe's router and selection bias N(0, 0.2) (clear top-k margins, and a bias that
//   changes the choice)
// (the scale of a trained model: activations stay finite, generation does not collapse).
// The file streams to disk tensor by tensor (model_writer.h): the 6b preset needs a few MB.
// Reentrant; not cancellable.
#pragma once

#include <cstdint>
#include <string>

#include "convert/model_spec.h"
#include "convert/model_writer.h"
#include "core/status.h"
#include "tokenizer/vocab_convert.h"

namespace glm::convert {

constexpr float kWeightStd = 0.02f;
constexpr float kNormStd = 0.02f;
constexpr float kRouterStd = 0.2f;

struct GenOptions {
  Family family = Family::kChatGLM3;
  std::string preset = "tiny";
  DType type = DType::kF16;  // target weight type
  uint64_t seed = 0;
  std::string vocab_path;  // a real tokenizer.model; its size replaces the preset's vocabulary
  ProgressFn progress;     // tensor bytes written of the total (may be empty)
  bool mtp = true;         // glm4moe: write the preset's MTP block (false: a trunk-only file)
};

// The hyperparameters and vocabulary gen-model would write for `opts` (reads vocab_path).
StatusOr<Hparams> gen_hparams(const GenOptions& opts, tok::VocabSpec* vocab);

// The RowSource of random weights for `seed` (see the header comment).
RowSource random_rows(uint64_t seed);

// Writes the model to `path`. Errors: invalid_argument for bad options, not_found / bad_file
// for the vocabulary, I/O failures from the writer.
Status generate_model(const GenOptions& opts, const std::string& path, WriteReport* report);

}  // namespace glm::convert
