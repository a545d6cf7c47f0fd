// GpuTransformer's run of GLM-4.5's MTP block (docs/engine.md#mtp-drafts, docs/gpu.md).
#include <vector>

#include "model/ops.h"
#include "model/transformer.h"
#include "model/transformer_gpu.h"

namespace glm::model {

Status GpuTransformer::upload_mtp(const Weights& w) {
  const MtpWeights& m = w.mtp;
  const int d = config_.n_embd;
  Uploader up{device_.get(), 0, 0, nullptr, &file_->mapping()};
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
  // Only the sequences that ask for their output go through the head (a catch-up writes K/V
  // only): the head is most of a pass.
  int n_out = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].output) step.out_rows[n_out++] = step.out_rows[i];
  }
  step.n_out = n_out;
  const Mtp& m = *mtp_;
  const int d = c.n_embd, n = step.n;
  // mtp_in [T, 2 n_embd]: the input rows, on the host as the CPU model makes them.
  mtp_embed_.resize(d);
  int t = 0;
  for (const MtpInput& in : batch) {
    for (int i = 0; i < in.seq.n_tokens; ++i, ++t) {
      mtp_input_row(c, m.embed, m.enorm.data(), m.hnorm.data(), in.seq.tokens[i],
                    in.hidden + static_cast<size_t>(i) * d, mtp_embed_.data(),
                    step.mi + static_cast<size_t>(t) * 2 * d);
    }
  }
  rope_tables(mtp_seqs_, step);

  gpu::Stream& st = record(step);
  const gpu::Addr x = at(in_dev_, step.x);
  gpu::matmul(st, m.eh_proj, at(in_dev_, step.mtp_in), x, n);  // x [T, n_embd]
  lora_rows_.clear();
  GLM_RETURN_IF_ERROR(run_layer(st, mtp_seqs_, step, m.layer, mtp_cache(), /*l=*/-1));
  const gpu::Buffer& head_norm = m.head_norm.valid() ? m.head_norm : output_norm_;
  const gpu::Matrix* head = m.head.buf.valid() ? &m.head : nullptr;
  gpu::rms_norm(st, x, at(head_norm), at(rows_), step.n_out, d, c.norm_eps, at(in_dev_, step.rows),
                head_q8(head, step.n_out, OutputKind::kLogits));
  return finish_step(st, step, OutputKind::kLogits, logits, head, hidden);
}

}  // namespace glm::model
