// GpuTransformer's run of GLM-4.5's MTP block (docs/engine.md#mtp-drafts, docs/gpu.md).
#include <vector>

#include "model/ops.h"
#include "model/transformer.h"
#include "model/transformer_gpu.h"

namespace glm::model {

Status GpuTransformer::upload_mtp(const Weights& w) {
  const MtpWeights& m = w.mtp;
  const int d = config_.n_embd;
  Uploader up{device_.get(), 0, 0, nullptr};
  auto block = std::make_unique<Mtp>();
  GLM_RETURN_IF_ERROR(upload_layer(&up, m.layer, &block->layer, "the MTP block"));
  GLM_RETURN_IF_ERROR(up.matrix(m.eh_proj, &block->eh_proj, "the MTP block"));
  GLM_RETURN_IF_ERROR(up.matrix(m.head, &block->head, "the MTP block"));
  GLM_RETURN_IF_ERROR(up.vec(m.head_norm, d, &block->head_norm));
  block->enorm.assign(m.enorm, m.enorm + d);
  block->hnorm.assign(m.hnorm, m.hnorm + d);
  block->embed = m.embed.data != nullptr ? m.embed : w.token_embd;
  mtp_ = std::move(block);
  mtp_config_ = mtp_kv_config(config_);
  return Status::Ok();
}

Status GpuTransformer::forward_mtp(const std::vector<MtpInput>& batch, KvPool* kv,
                                   std::vector<float>* logits, std::vector<float>* hidden) {
  if (mtp_ == nullptr) return Model::forward_mtp(batch, kv, logits, hidden);
  const Config& c = config_;
  mtp_seqs_.clear();
  for (const MtpInput& in : batch) {
    if (in.hidden == nullptr || in.seq.adapter != nullptr || in.seq.hidden_out != nullptr) {
      return invalid_argument("forward_mtp: a sequence without hidden rows or with an adapter");
    }
    mtp_seqs_.push_back(in.seq);
    mtp_seqs_.back().all_logits = false;  // the last token's row (dropped without `output`)
  }
  GLM_RETURN_IF_ERROR(validate_batch(mtp_config_, mtp_seqs_, kv));
  if (batch.empty()) return Status::Ok();
  Step step;
  GLM_RETURN_IF_ERROR(begin_step(mtp_seqs_, kv, &step, /*mtp=*/true));
  const Mtp& m = *mtp_;
  const int d = c.n_embd, n = step.n;
  // mtp_in [T, 2 n_embd] = [enorm(embedding of the token); hnorm(its hidden row)], on the host
  // as the CPU model computes it (model/transformer.cc forward_mtp).
  std::vector<float>& e = mtp_embed_;
  e.resize(d);
  int t = 0;
  for (const MtpInput& in : batch) {
    for (int i = 0; i < in.seq.n_tokens; ++i, ++t) {
      float* row = step.mi + static_cast<size_t>(t) * 2 * d;
      ops::get_row(m.embed.type, m.embed.data, in.seq.tokens[i], d, e.data());
      ops::rms_norm(e.data(), m.enorm.data(), c.norm_eps, row, d);
      ops::rms_norm(in.hidden + static_cast<size_t>(i) * d, m.hnorm.data(), c.norm_eps, row + d, d);
    }
  }
  rope_tables(mtp_seqs_, step);

  gpu::Stream& st = record(step);
  const gpu::Addr x = at(in_dev_, step.x);
  gpu::matmul(st, m.eh_proj, at(in_dev_, step.mtp_in), x, n);  // x [T, n_embd]
  lora_rows_.clear();
  run_layer(st, mtp_seqs_, step, m.layer, mtp_cache(), /*l=*/-1);
  const gpu::Buffer& head_norm = m.head_norm.valid() ? m.head_norm : output_norm_;
  gpu::rms_norm(st, x, at(head_norm), at(rows_), step.n_out, d, c.norm_eps, at(in_dev_, step.rows));
  mtp_logits_.clear();
  mtp_rows_.clear();
  GLM_RETURN_IF_ERROR(finish_step(st, step, OutputKind::kLogits, &mtp_logits_,
                                  m.head.buf.valid() ? &m.head : nullptr, &mtp_rows_));
  // One row a sequence: kept where it asked for its output.
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].output) continue;
    const float* l = mtp_logits_.data() + i * c.n_vocab;
    logits->insert(logits->end(), l, l + c.n_vocab);
    const float* h = mtp_rows_.data() + i * d;
    hidden->insert(hidden->end(), h, h + d);
  }
  return Status::Ok();
}

}  // namespace glm::model
