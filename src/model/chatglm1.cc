#include "model/chatglm1.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "model/adapter.h"
#include "model/ops.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace glm::model {
namespace chatglm1 {
namespace {

// First and second rotary position of absolute index p in a sequence whose prompt has n tokens
// (HF ChatGLM-6B: the prompt ends in [gMASK] <sop>; generated tokens keep the [gMASK] position
// n - 2 and count up the block position from 1 at <sop>).
int pos_of(int p, int n) { return std::min(p, n - 2); }
int block_pos_of(int p, int n) { return std::max(p - (n - 2), 0); }

// Rotary tables of dimension head_dim / 2 for one position: [head_dim / 4] each.
void table(const Config& c, int pos, float* cs, float* sn) {
  const int dim = c.head_dim / 2;  // each half of the head is rotated over its own dims
  for (int i = 0; i < dim / 2; ++i) {
    // HF keeps inv_freq in fp16.
    const float inv = fp16_to_fp32(fp32_to_fp16(
        static_cast<float>(1.0 / std::pow(static_cast<double>(c.rope_base), 2.0 * i / dim))));
    const float angle = static_cast<float>(pos) * inv;
    cs[i] = std::cos(angle);
    sn[i] = std::sin(angle);
  }
}

}  // namespace

StatusOr<float> residual_scale(const gguf::File& f, const Config& c) {
  if (c.n_head_kv != c.n_head || c.n_rot != c.head_dim / 2 || c.head_dim % 4 != 0) {
    return bad_file(f.path() +
                    ": chatglm1 needs head_count_kv = head_count, head size a "
                    "multiple of 4 and rope.dimension_count = head size / 2");
  }
  StatusOr<double> alpha = f.get_float_or("chatglm1.residual_scale", std::sqrt(2.0 * 28));
  if (!alpha.ok()) return bad_file(alpha.status().message());
  return static_cast<float>(*alpha);
}

Status prompt_lengths(const std::vector<SeqInput>& batch, const char* who,
                      std::vector<int>* prefixes) {
  GLM_RETURN_IF_ERROR(refuse_lora(batch, who));
  prefixes->clear();
  for (const SeqInput& in : batch) {
    const int prefix = in.prefix_len > 0 ? in.prefix_len : (in.n_past == 0 ? in.n_tokens : 0);
    if (prefix < 2) {
      return invalid_argument(
          "chatglm1: each sequence needs its prompt length (prefix_len >= 2,"
          " the prompt ends in [gMASK] <sop>)");
    }
    if (in.n_past < prefix && (in.n_past != 0 || in.n_tokens < prefix)) {
      return invalid_argument(
          "chatglm1: the prompt is attended bidirectionally and must be "
          "prefilled in one step (no chunked prefill)");
    }
    prefixes->push_back(prefix);
  }
  return Status::Ok();
}

void rope_rows(const Config& c, int p, int n, float* cs, float* sn) {
  const int quarter = c.head_dim / 4;
  table(c, pos_of(p, n), cs, sn);
  table(c, block_pos_of(p, n), cs + quarter, sn + quarter);
}

}  // namespace chatglm1

namespace {

class ChatGLM1 : public Model {
 public:
  ChatGLM1(std::shared_ptr<const gguf::File> file, Config config, Weights weights, float alpha,
           const LoadOptions& options)
      : file_(std::move(file)),
        config_(std::move(config)),
        weights_(std::move(weights)),
        alpha_(alpha),
        pool_(std::make_unique<kernels::ThreadPool>(options.n_threads)) {
    if (options.repack) repacked_bytes_ = repack(&weights_, pool_.get(), options.progress);
  }

  const Config& config() const override { return config_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.bidirectional_prompt = true;
    return c;
  }
  Status forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                 OutputKind kind) override;
  kernels::ThreadPool* host_threads() override { return pool_.get(); }
  size_t repacked_bytes() const override { return repacked_bytes_; }

 private:
  // Attention of one sequence's rows (q_, rotated) over its cache into attn_.
  void attend(const SeqInput& in, int prefix, int layer, const KvPool& kv, int first_row);
  void matmul_bias(const kernels::WeightView& w, const float* b, const float* x, float* y, int n);

  std::shared_ptr<const gguf::File> file_;
  Config config_;
  Weights weights_;
  float alpha_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  size_t repacked_bytes_ = 0;
  // Scratch reused across calls, [T, width]: see Transformer for the meaning of each.
  std::vector<float> x_, cur_, qkv_, q_, k_, v_, attn_, proj_, up_, rows_;
  std::vector<float> cos_, sin_;
  std::vector<int> prefixes_;
  std::vector<const void*> k_ptrs_, v_ptrs_;  // one sequence's block table for the KvView
};

void ChatGLM1::matmul_bias(const kernels::WeightView& w, const float* b, const float* x, float* y,
                           int n) {
  kernels::matmul(w, x, y, n, pool_.get());
  if (b == nullptr) return;
  for (int t = 0; t < n; ++t) ops::add(b, y + static_cast<size_t>(t) * w.n_rows, w.n_rows);
}

void ChatGLM1::attend(const SeqInput& in, int prefix, int layer, const KvPool& kv, int first_row) {
  const Config& c = config_;
  const int d = c.n_embd, bt = kv.block_tokens();
  // Prompt rows see the whole prompt but <sop> (position prefix - 1) only from itself on;
  // generated rows are causal: row p sees [0, max(p + 1, prefix - 1)), the tiled kernel's
  // bidirectional prefix of prefix - 1 positions.
  const int n_blocks = (std::max(in.n_past + in.n_tokens, prefix - 1) + bt - 1) / bt;
  k_ptrs_.resize(n_blocks);
  v_ptrs_.resize(n_blocks);
  for (int b = 0; b < n_blocks; ++b) {
    k_ptrs_[b] = kv.k(layer, in.blocks[b]);
    v_ptrs_[b] = kv.v(layer, in.blocks[b]);
  }
  kernels::KvView view;
  view.k_blocks = k_ptrs_.data();
  view.v_blocks = v_ptrs_.data();
  view.n_blocks = n_blocks;
  view.block_tokens = bt;
  view.type = kv.kv_type();
  if (in.adapter != nullptr && !in.adapter->prefix.empty()) {
    // P-Tuning v2 (HF ChatGLM-6B: past_key_values from get_prompt, the prefix_attention_mask of
    // ones): this layer's prefix K/V, unrotated, seen by every row ahead of the cache's
    // positions; the bidirectional prompt and the causal rows below apply to those positions.
    const PrefixKv& px = in.adapter->prefix;
    const size_t at = static_cast<size_t>(layer) * px.n_tokens * d;  // [n_layer, P, n_embd]
    view.prefix_k = px.k.data() + at;
    view.prefix_v = px.v.data() + at;
    view.n_prefix = px.n_tokens;
  }
  kernels::AttentionShape shape;
  shape.n_tokens = in.n_tokens;
  shape.n_past = in.n_past;
  shape.n_head = c.n_head;
  shape.n_head_kv = c.n_head;
  shape.head_dim = c.head_dim;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  shape.bidir_prefix = prefix - 1;
  kernels::attention(q_.data() + static_cast<size_t>(first_row) * d, view, shape,
                     attn_.data() + static_cast<size_t>(first_row) * d, pool_.get());
}

Status ChatGLM1::forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                         OutputKind kind) {
  const Config& c = config_;
  GLM_RETURN_IF_ERROR(validate_batch(c, batch, kv));
  std::vector<int>& prefixes = prefixes_;
  GLM_RETURN_IF_ERROR(chatglm1::prompt_lengths(batch, "ChatGLM-6B (v1)", &prefixes));
  int n = 0, n_out = 0;
  for (const SeqInput& in : batch) {
    n += in.n_tokens;
    n_out += in.all_logits ? in.n_tokens : 1;
  }
  if (batch.empty()) return Status::Ok();
  const int d = c.n_embd, hd = c.head_dim, ff = c.n_ff, quarter = hd / 4;
  const size_t t = n;
  for (auto* v : {&x_, &cur_, &q_, &k_, &v_, &attn_, &proj_}) v->resize(t * d);
  qkv_.resize(t * 3 * d);
  up_.resize(t * ff);
  std::vector<float>& cs = cos_;  // [T, 2 (position, block position), head_dim / 4]
  std::vector<float>& sn = sin_;
  cs.resize(2 * t * quarter);
  sn.resize(2 * t * quarter);

  int r = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    for (int i = 0; i < in.n_tokens; ++i, ++r) {
      ops::get_row(weights_.token_embd.type, weights_.token_embd.data, in.tokens[i], d,
                   x_.data() + static_cast<size_t>(r) * d);
      chatglm1::rope_rows(c, in.n_past + i, prefixes[s], &cs[(2 * r) * quarter],
                          &sn[(2 * r) * quarter]);
    }
  }
  const int bt = kv->block_tokens();
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = weights_.layers[l];
    for (int i = 0; i < n; ++i) {
      const size_t o = static_cast<size_t>(i) * d;
      ops::layer_norm(x_.data() + o, lw.attn_norm, lw.attn_norm_b, c.norm_eps, cur_.data() + o, d);
    }
    matmul_bias(lw.qkv, lw.qkv_b, cur_.data(), qkv_.data(), n);  // [T, 3 n_embd]
    for (int i = 0; i < n; ++i) {
      const float* row = qkv_.data() + static_cast<size_t>(i) * 3 * d;
      float* q = q_.data() + static_cast<size_t>(i) * d;
      float* k = k_.data() + static_cast<size_t>(i) * d;
      std::memcpy(q, row, d * sizeof(float));
      std::memcpy(k, row + d, d * sizeof(float));
      std::memcpy(v_.data() + static_cast<size_t>(i) * d, row + 2 * d, d * sizeof(float));
      for (int h = 0; h < c.n_head; ++h) {
        for (int half = 0; half < 2; ++half) {
          const float* c0 = &cs[(2 * i + half) * quarter];
          const float* s0 = &sn[(2 * i + half) * quarter];
          const int off = h * hd + half * hd / 2;
          ops::rope_neox(q + off, 1, hd / 2, hd / 2, c0, s0);
          ops::rope_neox(k + off, 1, hd / 2, hd / 2, c0, s0);
        }
      }
    }
    int first = 0;
    for (size_t s = 0; s < batch.size(); ++s) {
      const SeqInput& in = batch[s];
      for (int i = 0; i < in.n_tokens; ++i) {
        const int p = in.n_past + i;
        const size_t slot = static_cast<size_t>(p % bt) * kv->row_bytes();
        const size_t row = static_cast<size_t>(first + i) * d;
        ops::store_row(k_.data() + row, kv->kv_type(),
                       static_cast<uint8_t*>(kv->k(l, in.blocks[p / bt])) + slot, d);
        ops::store_row(v_.data() + row, kv->kv_type(),
                       static_cast<uint8_t*>(kv->v(l, in.blocks[p / bt])) + slot, d);
      }
      attend(in, prefixes[s], l, *kv, first);
      first += in.n_tokens;
    }
    matmul_bias(lw.wo, lw.wo_b, attn_.data(), proj_.data(), n);  // [T, n_embd]
    // h = LN1(x) * alpha + attn
    for (size_t i = 0; i < t * d; ++i) x_[i] = cur_[i] * alpha_ + proj_[i];
    for (int i = 0; i < n; ++i) {
      const size_t o = static_cast<size_t>(i) * d;
      ops::layer_norm(x_.data() + o, lw.ffn_norm, lw.ffn_norm_b, c.norm_eps, cur_.data() + o, d);
    }
    matmul_bias(lw.ffn_up, lw.ffn_up_b, cur_.data(), up_.data(), n);  // [T, n_ff]
    ops::gelu_tanh(up_.data(), n * ff);
    matmul_bias(lw.ffn_down, lw.ffn_down_b, up_.data(), proj_.data(), n);  // [T, n_embd]
    for (size_t i = 0; i < t * d; ++i) x_[i] = cur_[i] * alpha_ + proj_[i];
  }

  rows_.resize(static_cast<size_t>(n_out) * d);
  int row = 0, first = 0;
  for (const SeqInput& in : batch) {
    for (int i = in.all_logits ? 0 : in.n_tokens - 1; i < in.n_tokens; ++i, ++row) {
      ops::layer_norm(x_.data() + static_cast<size_t>(first + i) * d, weights_.output_norm,
                      weights_.output_norm_b, c.norm_eps,
                      rows_.data() + static_cast<size_t>(row) * d, d);
    }
    first += in.n_tokens;
  }
  if (kind == OutputKind::kHidden) {
    out->insert(out->end(), rows_.begin(), rows_.end());
    return Status::Ok();
  }
  const size_t old = out->size();
  out->resize(old + static_cast<size_t>(n_out) * c.n_vocab);
  kernels::matmul(weights_.output, rows_.data(), out->data() + old, n_out, pool_.get());
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Model>> load_chatglm1(std::shared_ptr<const gguf::File> file, Config c,
                                               const LoadOptions& options) {
  const gguf::File& f = *file;
  StatusOr<float> alpha = chatglm1::residual_scale(f, c);
  if (!alpha.ok()) return alpha.status();
  Weights w;
  GLM_RETURN_IF_ERROR(load_weights(f, c, &w));
  return std::unique_ptr<Model>(
      std::make_unique<ChatGLM1>(std::move(file), std::move(c), std::move(w), *alpha, options));
}

}  // namespace glm::model
