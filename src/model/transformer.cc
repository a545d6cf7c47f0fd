#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/check.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/lora.h"
#include "model/ops.h"

namespace glm::model {

Status check_prefix(const Config& c, const PrefixKv& p) {
  if (p.empty()) return Status::Ok();
  const size_t n = static_cast<size_t>(c.n_layer) * p.n_tokens * c.kv_dim();
  if (p.n_tokens < 0 || p.kv_dim != c.kv_dim() || p.k.size() != n || p.v.size() != n) {
    return invalid_argument("forward: the P-Tuning prefix was made for another model shape");
  }
  return Status::Ok();
}

void mtp_input_row(const Config& c, const kernels::WeightView& embed, const float* enorm,
                   const float* hnorm, int32_t token, const float* hidden, float* e, float* row) {
  const int d = c.n_embd;
  ops::get_row(embed.type, embed.data, token, d, e);
  ops::rms_norm(e, enorm, c.norm_eps, row, d);
  ops::rms_norm(hidden, hnorm, c.norm_eps, row + d, d);
}

Status validate_batch(const Config& c, const std::vector<SeqInput>& batch, const KvPool* kv) {
  if (batch.empty()) return Status::Ok();
  if (kv == nullptr) return invalid_argument("forward: no KV cache given");
  if (kv->n_layer() != c.n_layer || kv->row_elems() != c.kv_dim()) {
    return invalid_argument("forward: the KV cache was made for another model shape");
  }
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    // Built only on error: the decode path does not allocate.
    auto where = [s] { return "forward: sequence " + std::to_string(s) + ": "; };
    if (in.n_tokens < 1 || in.tokens == nullptr) return invalid_argument(where() + "no tokens");
    if (in.n_past < 0) return invalid_argument(where() + "negative n_past");
    if (in.adapter != nullptr && !in.adapter->lora.empty() &&
        in.adapter->lora.size() != static_cast<size_t>(c.n_layer)) {
      return invalid_argument(where() + "adapter '" + in.adapter->name + "' has LoRA pairs for " +
                              std::to_string(in.adapter->lora.size()) + " layers, the model has " +
                              std::to_string(c.n_layer));
    }
    for (int t = 0; t < in.n_tokens; ++t) {
      if (in.tokens[t] < 0 || in.tokens[t] >= c.n_vocab) {
        return invalid_argument(where() + "token id " + std::to_string(in.tokens[t]) +
                                " is out of range (the vocabulary has " +
                                std::to_string(c.n_vocab) + " tokens)");
      }
    }
    const int64_t n_pos = int64_t{in.n_past} + in.n_tokens;
    const int64_t needed = (n_pos + kv->block_tokens() - 1) / kv->block_tokens();
    if (in.blocks == nullptr || in.n_blocks < needed) {
      return invalid_argument(where() + std::to_string(n_pos) + " positions need " +
                              std::to_string(needed) + " KV blocks, the block table has " +
                              std::to_string(in.n_blocks));
    }
    for (int64_t b = 0; b < needed; ++b) {
      if (in.blocks[b] < 0 || in.blocks[b] >= kv->n_blocks()) {
        return invalid_argument(where() + "KV block id " + std::to_string(in.blocks[b]) +
                                " is out of range (the pool has " + std::to_string(kv->n_blocks()) +
                                " blocks)");
      }
    }
    if (in.adapter != nullptr && c.is_mla()) {
      return unsupported(where() + "adapter '" + in.adapter->name +
                         "': adapters on deepseek2 (GLM-4.7-Flash) are not supported");
    }
    if (in.adapter != nullptr) GLM_RETURN_IF_ERROR(check_prefix(c, in.adapter->prefix));
  }
  return Status::Ok();
}

Status refuse_lora(const std::vector<SeqInput>& batch, const char* model) {
  for (const SeqInput& in : batch) {
    if (in.adapter != nullptr && !in.adapter->lora.empty()) {
      return unsupported("adapter '" + in.adapter->name + "': LoRA per request is not supported " +
                         "on " + model);
    }
  }
  return Status::Ok();
}

Transformer::Transformer(std::shared_ptr<const gguf::File> file, Config config, Weights weights,
                         const LoadOptions& options)
    : file_(std::move(file)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      pool_(std::make_unique<kernels::ThreadPool>(options.n_threads)) {
  mtp_config_ = mtp_kv_config(config_);
  if (options.repack) repacked_bytes_ = repack(&weights_, pool_.get(), options.progress);
}

void Transformer::reserve(int n, int n_block_ptrs) {
  const Config& c = config_;
  const size_t t = n;
  auto grow = [](std::vector<float>& v, size_t size) {
    if (v.size() < size) v.resize(size);
  };
  grow(x_, t * c.n_embd);
  grow(cur_, t * c.n_embd);
  grow(q_, t * c.q_dim());
  grow(k_, t * c.kv_dim());
  grow(v_, t * c.kv_dim());
  grow(attn_, t * c.q_dim());
  grow(proj_, t * c.n_embd);
  grow(act_, t * c.n_ff);
  grow(rope_cos_, t * (c.n_rot / 2));
  grow(rope_sin_, t * (c.n_rot / 2));
  const LayerWeights& l0 = weights_.layers[0];
  if (l0.qkv.data != nullptr) grow(qkv_, t * (c.q_dim() + 2 * c.kv_dim()));
  grow(up_, t * l0.ffn_up.n_rows);
  if (l0.ffn_gate.data != nullptr) grow(gate_, t * c.n_ff);
  if (pos_.size() < t) pos_.resize(t);
  if (c.is_mla()) {
    const MlaConfig& m = c.mla;
    grow(mla_qa_, t * m.q_lora);
    grow(mla_q_, t * c.n_head * m.k_head);
    // A decode's heads run side by side (per_head_matmul): a head's rows apart.
    const size_t rows =
        std::max(t, static_cast<size_t>(c.n_head) * std::min<size_t>(t, kMlaHeadTasksMaxTokens));
    grow(mla_in_, rows * std::max(c.mla_nope(), m.kv_lora));
    grow(mla_out_, rows * std::max(m.kv_lora, m.v_head));
    grow(mla_v_, t * c.n_head * m.v_head);
  }
  if (k_ptrs_.size() < static_cast<size_t>(n_block_ptrs)) {
    k_ptrs_.resize(n_block_ptrs);
    v_ptrs_.resize(n_block_ptrs);
  }
}

void Transformer::project_qkv(int l, const LayerWeights& lw, int n) {
  const Config& c = config_;
  const int qd = c.q_dim(), kd = c.kv_dim();
  if (c.is_mla()) {
    project_mla(lw, n);
    return;
  }
  if (lw.qkv.data != nullptr) {
    // Fused: [T, q_dim + 2 kv_dim], rows of each token: q heads, k heads, v heads.
    const int w = qd + 2 * kd;
    kernels::matmul(lw.qkv, cur_.data(), qkv_.data(), n, pool_.get());
    add_lora(l, &LoraLayer::qkv, cur_.data(), c.n_embd, qkv_.data(), w);
    for (int t = 0; t < n; ++t) {
      float* row = qkv_.data() + static_cast<size_t>(t) * w;
      if (lw.qkv_b != nullptr) ops::add(lw.qkv_b, row, w);
      std::memcpy(q_.data() + static_cast<size_t>(t) * qd, row, qd * sizeof(float));
      std::memcpy(k_.data() + static_cast<size_t>(t) * kd, row + qd, kd * sizeof(float));
      std::memcpy(v_.data() + static_cast<size_t>(t) * kd, row + qd + kd, kd * sizeof(float));
    }
  } else {
    kernels::matmul(lw.wq, cur_.data(), q_.data(), n, pool_.get());  // [T, q_dim]
    kernels::matmul(lw.wk, cur_.data(), k_.data(), n, pool_.get());  // [T, kv_dim]
    kernels::matmul(lw.wv, cur_.data(), v_.data(), n, pool_.get());  // [T, kv_dim]
    add_lora(l, &LoraLayer::wq, cur_.data(), c.n_embd, q_.data(), qd);
    add_lora(l, &LoraLayer::wk, cur_.data(), c.n_embd, k_.data(), kd);
    add_lora(l, &LoraLayer::wv, cur_.data(), c.n_embd, v_.data(), kd);
    for (int t = 0; t < n; ++t) {
      if (lw.bq) ops::add(lw.bq, q_.data() + static_cast<size_t>(t) * qd, qd);
      if (lw.bk) ops::add(lw.bk, k_.data() + static_cast<size_t>(t) * kd, kd);
      if (lw.bv) ops::add(lw.bv, v_.data() + static_cast<size_t>(t) * kd, kd);
    }
  }
  const int half = c.n_rot / 2;
  const auto rope = c.rope_neox ? ops::rope_neox : ops::rope_interleaved;
  for (int t = 0; t < n; ++t) {
    if (lw.attn_q_norm != nullptr) {  // GLM-4.5: each head normed before its rotary
      ops::rms_norm_heads(q_.data() + static_cast<size_t>(t) * qd, c.n_head, c.head_dim,
                          lw.attn_q_norm, c.norm_eps);
      ops::rms_norm_heads(k_.data() + static_cast<size_t>(t) * kd, c.n_head_kv, c.head_dim,
                          lw.attn_k_norm, c.norm_eps);
    }
    const float* cs = rope_cos_.data() + static_cast<size_t>(t) * half;
    const float* sn = rope_sin_.data() + static_cast<size_t>(t) * half;
    rope(q_.data() + static_cast<size_t>(t) * qd, c.n_head, c.head_dim, c.n_rot, cs, sn);
    rope(k_.data() + static_cast<size_t>(t) * kd, c.n_head_kv, c.head_dim, c.n_rot, cs, sn);
  }
}

void Transformer::attend(const std::vector<SeqInput>& batch, int layer, KvPool* kv) {
  const Config& c = config_;
  const int qd = c.q_dim(), kd = c.kv_dim();
  const int bt = kv->block_tokens();
  const size_t rb = kv->row_bytes();
  int offset = 0;  // first row of this sequence in the batch
  for (const SeqInput& in : batch) {
    // New K/V rows go to their slots first: the attention reads them back from the cache.
    for (int t = 0; t < in.n_tokens; ++t) {
      const int p = in.n_past + t;
      const int block = in.blocks[p / bt];
      const size_t slot = static_cast<size_t>(p % bt) * rb;
      const size_t row = static_cast<size_t>(offset + t) * kd;
      ops::store_row(k_.data() + row, kv->kv_type(),
                     static_cast<uint8_t*>(kv->k(layer, block)) + slot, kd);
      if (kv->parts() == 1) continue;  // K rows only: the values are in them (latent attention)
      ops::store_row(v_.data() + row, kv->kv_type(),
                     static_cast<uint8_t*>(kv->v(layer, block)) + slot, kd);
    }
    const int n_blocks = (in.n_past + in.n_tokens + bt - 1) / bt;
    for (int b = 0; b < n_blocks; ++b) {
      k_ptrs_[b] = kv->k(layer, in.blocks[b]);
      v_ptrs_[b] = kv->v(layer, in.blocks[b]);
    }
    kernels::KvView view;
    view.k_blocks = k_ptrs_.data();
    view.v_blocks = v_ptrs_.data();
    view.n_blocks = n_blocks;
    view.block_tokens = bt;
    view.type = kv->kv_type();
    if (in.adapter != nullptr && !in.adapter->prefix.empty()) {
      // P-Tuning v2: this layer's prefix K/V ahead of the sequence's own (no rotary on them;
      // the sequence's positions still start at 0).
      const PrefixKv& px = in.adapter->prefix;
      const size_t at = static_cast<size_t>(layer) * px.n_tokens * kd;
      view.prefix_k = px.k.data() + at;
      view.prefix_v = px.v.data() + at;
      view.n_prefix = px.n_tokens;
    }
    kernels::AttentionShape shape;
    shape.n_tokens = in.n_tokens;
    shape.n_past = in.n_past;
    shape.n_head = c.n_head;
    shape.n_head_kv = c.n_head_kv;
    shape.head_dim = c.head_dim;
    shape.scale = c.attn_scale();
    kernels::attention(q_.data() + static_cast<size_t>(offset) * qd, view, shape,
                       attn_.data() + static_cast<size_t>(offset) * qd, pool_.get());
    offset += in.n_tokens;
  }
}

void Transformer::mlp(int l, const LayerWeights& lw, int n) {
  if (lw.moe.present()) {  // glm4moe: routed experts + shared expert into proj_ [T, n_embd]
    moe_.forward(lw.moe, config_, cur_.data(), n, proj_.data(), pool_.get());
    return;
  }
  const int ff = config_.n_ff;
  if (lw.ffn_gate.data == nullptr) {
    // Fused: up_ [T, 2 n_ff] = per token [gate (n_ff) | up (n_ff)].
    kernels::matmul(lw.ffn_up, cur_.data(), up_.data(), n, pool_.get());
    add_lora(l, &LoraLayer::ffn_up, cur_.data(), config_.n_embd, up_.data(), 2 * ff);
    for (int t = 0; t < n; ++t) {
      const float* row = up_.data() + static_cast<size_t>(t) * 2 * ff;
      ops::swiglu(row, row + ff, act_.data() + static_cast<size_t>(t) * ff, ff);
    }
  } else {
    kernels::matmul(lw.ffn_gate, cur_.data(), gate_.data(), n, pool_.get());  // [T, n_ff]
    kernels::matmul(lw.ffn_up, cur_.data(), up_.data(), n, pool_.get());      // [T, n_ff]
    add_lora(l, &LoraLayer::ffn_gate, cur_.data(), config_.n_embd, gate_.data(), ff);
    add_lora(l, &LoraLayer::ffn_up, cur_.data(), config_.n_embd, up_.data(), ff);
    ops::swiglu(gate_.data(), up_.data(), act_.data(), n * ff);
  }
  kernels::matmul(lw.ffn_down, act_.data(), proj_.data(), n, pool_.get());  // [T, n_embd]
  add_lora(l, &LoraLayer::ffn_down, act_.data(), ff, proj_.data(), config_.n_embd);
  if (lw.ffn_down_b != nullptr) {
    for (int t = 0; t < n; ++t) {
      ops::add(lw.ffn_down_b, proj_.data() + static_cast<size_t>(t) * config_.n_embd,
               config_.n_embd);
    }
  }
}

void Transformer::post_norm(const float* w, int n) {
  if (w == nullptr) return;
  const int d = config_.n_embd;
  for (int i = 0; i < n; ++i) {
    float* row = proj_.data() + static_cast<size_t>(i) * d;
    ops::rms_norm(row, w, config_.norm_eps, row, d);
  }
}

void Transformer::group_lora(const std::vector<SeqInput>& batch) {
  lora_groups_.clear();
  int row = 0;
  for (const SeqInput& in : batch) {
    if (in.adapter != nullptr && !in.adapter->lora.empty()) {
      auto g = std::find_if(lora_groups_.begin(), lora_groups_.end(),
                            [&](const LoraGroup& x) { return x.adapter == in.adapter; });
      if (g == lora_groups_.end()) g = lora_groups_.insert(lora_groups_.end(), {in.adapter, {}});
      for (int i = 0; i < in.n_tokens; ++i) g->rows.push_back(row + i);
    }
    row += in.n_tokens;
  }
}

void Transformer::add_lora(int l, LoraPair LoraLayer::*pair, const float* x, int x_stride, float* y,
                           int y_stride) {
  for (const LoraGroup& g : lora_groups_) {
    const LoraPair& p = g.adapter->lora[l].*pair;
    if (!p.empty()) {
      lora_apply_rows(p, x, x_stride, y, y_stride, g.rows, &lora_scratch_, pool_.get());
    }
  }
}

int Transformer::run_layers(const std::vector<SeqInput>& batch, KvPool* kv, int n_layers) {
  const Config& c = config_;
  int n = 0, max_blocks = 0;
  for (const SeqInput& in : batch) {
    n += in.n_tokens;
    max_blocks = std::max(max_blocks,
                          (in.n_past + in.n_tokens + kv->block_tokens() - 1) / kv->block_tokens());
  }
  // Block pointer arrays sized for the whole pool: no regrowth as sequences get longer.
  reserve(n, std::max(max_blocks, kv->n_blocks()));
  const int d = c.n_embd;
  const int half = c.n_rot / 2;

  group_lora(batch);

  // Embeddings and rotary tables: x_ [T, n_embd], rope_* [T, n_rot / 2].
  int t = 0;
  for (const SeqInput& in : batch) {
    for (int i = 0; i < in.n_tokens; ++i, ++t) {
      pos_[t] = in.n_past + i;
      ops::get_row(weights_.token_embd.type, weights_.token_embd.data, in.tokens[i], d,
                   x_.data() + static_cast<size_t>(t) * d);
      ops::rope_table(pos_[t], c.n_rot, c.rope_base,
                      rope_cos_.data() + static_cast<size_t>(t) * half,
                      rope_sin_.data() + static_cast<size_t>(t) * half, c.rope_freq_scale);
    }
  }

  for (int l = 0; l < n_layers; ++l) run_layer(batch, kv, weights_.layers[l], l, n);
  return n;
}

void Transformer::run_layer(const std::vector<SeqInput>& batch, KvPool* kv, const LayerWeights& lw,
                            int l, int n) {
  const Config& c = config_;
  const int d = c.n_embd;
  for (int i = 0; i < n; ++i) {
    const size_t o = static_cast<size_t>(i) * d;
    ops::rms_norm(x_.data() + o, lw.attn_norm, c.norm_eps, cur_.data() + o, d);
  }
  project_qkv(l, lw, n);
  attend(batch, l, kv);
  if (c.is_mla()) {
    expand_mla_values(lw, n);
    kernels::matmul(lw.wo, mla_v_.data(), proj_.data(), n, pool_.get());  // [T, n_embd]
  } else {
    kernels::matmul(lw.wo, attn_.data(), proj_.data(), n, pool_.get());  // [T, n_embd]
    add_lora(l, &LoraLayer::wo, attn_.data(), c.q_dim(), proj_.data(), d);
  }
  post_norm(lw.attn_post_norm, n);
  ops::add(proj_.data(), x_.data(), n * d);
  for (int i = 0; i < n; ++i) {
    const size_t o = static_cast<size_t>(i) * d;
    ops::rms_norm(x_.data() + o, lw.ffn_norm, c.norm_eps, cur_.data() + o, d);
  }
  mlp(l, lw, n);
  post_norm(lw.ffn_post_norm, n);
  ops::add(proj_.data(), x_.data(), n * d);
}

Status Transformer::forward_layers(const std::vector<SeqInput>& batch, KvPool* kv, int n_layers,
                                   std::vector<float>* x) {
  GLM_RETURN_IF_ERROR(validate_batch(config_, batch, kv));
  if (batch.empty()) return Status::Ok();
  const int n = run_layers(batch, kv, n_layers);
  x->insert(x->end(), x_.begin(), x_.begin() + static_cast<size_t>(n) * config_.n_embd);
  return Status::Ok();
}

Status Transformer::forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                            OutputKind kind) {
  const Config& c = config_;
  GLM_RETURN_IF_ERROR(validate_batch(c, batch, kv));
  if (batch.empty()) return Status::Ok();
  int n_out = 0;
  for (const SeqInput& in : batch) n_out += in.all_logits ? in.n_tokens : 1;
  run_layers(batch, kv, c.n_layer);
  const int d = c.n_embd;

  // Final norm of the rows to output: rows_ [R, n_embd]; and of every token's row for the
  // sequences that ask (hidden_out, MTP drafting), whose output rows are copied from those.
  if (rows_.size() < static_cast<size_t>(n_out) * d) rows_.resize(static_cast<size_t>(n_out) * d);
  int r = 0, first = 0;
  for (const SeqInput& in : batch) {
    const int from = in.all_logits ? 0 : in.n_tokens - 1;
    for (int i = 0; in.hidden_out != nullptr && i < in.n_tokens; ++i) {
      ops::rms_norm(x_.data() + static_cast<size_t>(first + i) * d, weights_.output_norm,
                    c.norm_eps, in.hidden_out + static_cast<size_t>(i) * d, d);
    }
    for (int i = from; i < in.n_tokens; ++i, ++r) {
      float* row = rows_.data() + static_cast<size_t>(r) * d;
      if (in.hidden_out != nullptr) {
        std::memcpy(row, in.hidden_out + static_cast<size_t>(i) * d, d * sizeof(float));
      } else {
        ops::rms_norm(x_.data() + static_cast<size_t>(first + i) * d, weights_.output_norm,
                      c.norm_eps, row, d);
      }
    }
    first += in.n_tokens;
  }
  const size_t old = out->size();
  if (kind == OutputKind::kHidden) {
    out->insert(out->end(), rows_.begin(), rows_.begin() + static_cast<size_t>(n_out) * d);
    return Status::Ok();
  }
  out->resize(old + static_cast<size_t>(n_out) * c.n_vocab);  // [R, n_vocab]
  kernels::matmul(weights_.output, rows_.data(), out->data() + old, n_out, pool_.get());
  return Status::Ok();
}

Status Transformer::forward_mtp(const std::vector<MtpInput>& batch, KvPool* kv,
                                std::vector<float>* logits, std::vector<float>* hidden) {
  const MtpWeights& m = weights_.mtp;
  if (!m.present()) return Model::forward_mtp(batch, kv, logits, hidden);
  mtp_seqs_.clear();
  int n = 0, n_out = 0, max_blocks = 0;
  for (const MtpInput& in : batch) {
    if (in.hidden == nullptr || in.seq.adapter != nullptr || in.seq.hidden_out != nullptr) {
      return invalid_argument("forward_mtp: a sequence without hidden rows or with an adapter");
    }
    mtp_seqs_.push_back(in.seq);
    n += std::max(in.seq.n_tokens, 0);
    n_out += in.output ? 1 : 0;
  }
  GLM_RETURN_IF_ERROR(validate_batch(mtp_config_, mtp_seqs_, kv));
  if (batch.empty()) return Status::Ok();
  for (const SeqInput& in : mtp_seqs_) {
    max_blocks = std::max(max_blocks,
                          (in.n_past + in.n_tokens + kv->block_tokens() - 1) / kv->block_tokens());
  }
  reserve(n, std::max(max_blocks, kv->n_blocks()));
  lora_groups_.clear();
  const Config& c = config_;
  const int d = c.n_embd, half = c.n_rot / 2;
  const kernels::WeightView& embed = m.embed.data != nullptr ? m.embed : weights_.token_embd;
  if (mtp_in_.size() < static_cast<size_t>(n) * 2 * d)
    mtp_in_.resize(static_cast<size_t>(n) * 2 * d);

  // mtp_in_ [T, 2 n_embd] = [enorm(embedding of the token); hnorm(its hidden row)]; rotary
  // tables of the MTP positions.
  int t = 0;
  for (const MtpInput& in : batch) {
    for (int i = 0; i < in.seq.n_tokens; ++i, ++t) {
      mtp_input_row(c, embed, m.enorm, m.hnorm, in.seq.tokens[i],
                    in.hidden + static_cast<size_t>(i) * d,
                    cur_.data() + static_cast<size_t>(t) * d,
                    mtp_in_.data() + static_cast<size_t>(t) * 2 * d);
      pos_[t] = in.seq.n_past + i;
      ops::rope_table(pos_[t], c.n_rot, c.rope_base,
                      rope_cos_.data() + static_cast<size_t>(t) * half,
                      rope_sin_.data() + static_cast<size_t>(t) * half, c.rope_freq_scale);
    }
  }
  kernels::matmul(m.eh_proj, mtp_in_.data(), x_.data(), n, pool_.get());  // x_ [T, n_embd]
  run_layer(mtp_seqs_, kv, m.layer, 0, n);

  // The head norm of each output row: rows_ [R, n_embd]; then the head: [R, n_vocab].
  if (rows_.size() < static_cast<size_t>(n_out) * d) rows_.resize(static_cast<size_t>(n_out) * d);
  const float* head_norm = m.head_norm != nullptr ? m.head_norm : weights_.output_norm;
  int r = 0, first = 0;
  for (const MtpInput& in : batch) {
    first += in.seq.n_tokens;
    if (!in.output) continue;
    ops::rms_norm(x_.data() + static_cast<size_t>(first - 1) * d, head_norm, c.norm_eps,
                  rows_.data() + static_cast<size_t>(r++) * d, d);
  }
  hidden->insert(hidden->end(), rows_.begin(), rows_.begin() + static_cast<size_t>(n_out) * d);
  const size_t old = logits->size();
  logits->resize(old + static_cast<size_t>(n_out) * c.n_vocab);
  if (n_out > 0) {
    kernels::matmul(m.head.data != nullptr ? m.head : weights_.output, rows_.data(),
                    logits->data() + old, n_out, pool_.get());
  }
  return Status::Ok();
}

}  // namespace glm::model
