#include "convert/gen_model.h"

#include "convert/random.h"
#include "convert/synthetic_vocab.h"
#include "kernels/thread_pool.h"

namespace glm::convert {

StatusOr<Hparams> gen_hparams(const GenOptions& opts, tok::VocabSpec* vocab) {
  StatusOr<Hparams> hp = preset(opts.family, opts.preset);
  if (!hp.ok()) return hp.status();
  if (!opts.mtp) hp->n_nextn = 0;
  hp->name += " random weights (glmserve gen-model, seed " + std::to_string(opts.seed) + ")";
  if (!opts.vocab_path.empty()) {
    StatusOr<tok::VocabSpec> v = tok::read_tokenizer_model(opts.vocab_path);
    if (!v.ok()) return v.status();
    *vocab = std::move(*v);
    // ChatGLM2 ships ChatGLM3's tokenizer.model but has only 5 special tokens.
    if (opts.family == Family::kChatGLM2) GLM_RETURN_IF_ERROR(tok::to_chatglm2_vocab(vocab));
    if ((opts.family == Family::kChatGLM1) != (vocab->pre == "chatglm1")) {
      return invalid_argument(opts.vocab_path +
                              (opts.family == Family::kChatGLM1
                                   ? ": chatglm1 needs ChatGLM-6B's ice_text.model"
                                   : ": ChatGLM-6B's ice_text.model is only for "
                                     "--arch chatglm1"));
    }
    hp->n_vocab = static_cast<int64_t>(vocab->tokens.size());
  } else {
    StatusOr<tok::VocabSpec> v = synthetic_vocab(opts.family, hp->n_vocab);
    if (!v.ok()) return v.status();
    *vocab = std::move(*v);
  }
  GLM_RETURN_IF_ERROR(hp->validate());
  return hp;
}

RowSource random_rows(uint64_t seed) {
  return [seed](const TensorPlan& t, int64_t row0, int64_t n_rows, float* out) {
    const uint64_t key = stream_key(seed, t.name);
    const uint64_t first = static_cast<uint64_t>(row0) * static_cast<uint64_t>(t.row_len());
    const size_t n = static_cast<size_t>(n_rows * t.row_len());
    if (t.role == Role::kNorm) {
      fill_normal(key, first, n, 1.0f, kNormStd, out);
    } else if (t.role == Role::kRouter || t.role == Role::kExpertBias) {
      fill_normal(key, first, n, 0.0f, kRouterStd, out);
    } else {
      fill_normal(key, first, n, 0.0f, kWeightStd, out);
    }
    return Status::Ok();
  };
}

Status generate_model(const GenOptions& opts, const std::string& path, WriteReport* report) {
  tok::VocabSpec vocab;
  StatusOr<Hparams> hp = gen_hparams(opts, &vocab);
  if (!hp.ok()) return hp.status();
  // random_rows is pure (each value a function of the seed, the tensor and its index), so the
  // chunks are made on every core and the file is the same as with one.
  return write_model_file(path, *hp, vocab, opts.type, random_rows(opts.seed), report,
                          opts.progress, kernels::physical_cores());
}

}  // namespace glm::convert
