#include "model/gpu_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/bytes.h"
#include "core/check.h"
#include "core/log.h"
#include "model/ops.h"

namespace glm::model {
namespace {

constexpr size_t kF = sizeof(float);

size_t matrix_bytes(const kernels::WeightView& v) {
  return v.data == nullptr ? size_t{0} : row_bytes(v.type, v.n_cols) * v.n_rows;
}

// A layer's matrices (its norms and biases are a rounding error beside them).
std::array<const kernels::WeightView*, 20> layer_matrices(const LayerWeights& lw) {
  const MoeWeights& m = lw.moe;
  return {&lw.qkv,    &lw.wq,       &lw.wk,        &lw.wv,      &lw.wo,
          &lw.ffn_up, &lw.ffn_gate, &lw.ffn_down,  &m.gate_inp, &m.gate_exps,
          &m.up_exps, &m.down_exps, &m.gate_shexp, &m.up_shexp, &m.down_shexp,
          &lw.wq_a,   &lw.wq_b,     &lw.wkv_a,     &lw.wk_b,    &lw.wv_b};
}

size_t layer_bytes(const LayerWeights& lw) {
  size_t n = 0;
  for (const kernels::WeightView* v : layer_matrices(lw)) n += matrix_bytes(*v);
  return n;
}

// A layer's largest matrix: one buffer on the device (a fused QKV or gate-and-up goes up as its
// parts when the whole is over a buffer: Uploader::stacked).
size_t layer_largest(const LayerWeights& lw) {
  size_t n = 0;
  for (const kernels::WeightView* v : layer_matrices(lw)) n = std::max(n, matrix_bytes(*v));
  return n;
}

}  // namespace

GpuModel::GpuModel(std::shared_ptr<const gguf::File> file, Config config,
                   const kernels::WeightView& token_embd, std::unique_ptr<gpu::Device> device,
                   const GpuLayerPlan& plan, Widths widths)
    : file_(std::move(file)),
      config_(std::move(config)),
      token_embd_(token_embd),
      device_(std::move(device)),
      plan_(plan),
      n_cpu_(config_.n_layer - plan.n_gpu),
      widths_(widths) {
  if (const char* s = std::getenv("GLMSERVE_VULKAN_FAIL_AT_STEP"); s != nullptr && *s != '\0') {
    fail_at_step_ = std::atoi(s);
  }
}

Status GpuModel::grow(gpu::Device* dev, gpu::Buffer* b, size_t bytes, gpu::MemoryKind kind) {
  if (b->valid() && b->size() >= bytes) return Status::Ok();
  b->reset();
  StatusOr<gpu::Buffer> nb = dev->alloc(bytes, kind);
  if (!nb.ok()) return nb.status();
  *b = std::move(*nb);
  return Status::Ok();
}

Status GpuModel::check_head_dim(const Config& config) {
  if (config.head_dim <= gpu::kAttentionMaxHeadDim) return Status::Ok();
  return unsupported("the GPU attention takes head_dim up to " +
                     std::to_string(gpu::kAttentionMaxHeadDim) + ", the model has " +
                     std::to_string(config.head_dim) + " (use --device cpu)");
}

size_t GpuModel::scratch_bytes(const Config& c, Widths w, int n, int r, int b) {
  const size_t t = static_cast<size_t>(n), rr = static_cast<size_t>(r);
  // cur_, qkv_, attn_, proj_, up_, act_, moe_, mla_ and mla_heads_; cur_q8_, act_q8_ and
  // attn_q8_ (36 bytes a 32 values)
  const size_t q8_tokens = std::min<size_t>(t, kQ8Tokens);
  const size_t acts = t * (2 * c.n_embd + c.q_dim() + 2 * c.kv_dim() + c.q_dim() + w.up + w.act +
                           w.moe + w.mla + (w.mla > 0 ? c.n_head : 0)) +
                      q8_tokens * ((c.n_embd / 32 + w.down_in / 32 + c.q_dim() / 32) * 9);
  // rows_, logits_, out_host_; rows_q8_
  const size_t rows = rr * (c.n_embd + c.n_vocab + std::max(c.n_vocab, c.n_embd) + w.out_extra) +
                      std::min<size_t>(rr, kQ8Tokens) * (c.n_embd / 32) * 9;
  // in_host_ and in_dev_; hidden_host_ (an MTP model's)
  const size_t in = 2 * (t * (c.n_embd + 2 * w.rot + 1 + w.mtp_in) + rr + b + 4) +
                    (w.mtp_in > 0 ? t * c.n_embd : 0);
  return (acts + rows + in + gpu::attention_scratch_floats(c.head_dim)) * kF;  // + attn_split_
}

StatusOr<GpuLayerPlan> GpuModel::plan(const gpu::Device& device, const Config& config,
                                      const Weights& weights, Widths widths,
                                      const LoadOptions& options, int requested, bool quiet) {
  const int n_layer = config.n_layer;
  GpuPlanInput in;
  in.layer_kv.assign(n_layer, options.kv_bytes / n_layer);
  for (int l = 0; l < n_layer; ++l) {
    in.layer_weights.push_back(layer_bytes(weights.layers[l]));
    in.layer_largest.push_back(layer_largest(weights.layers[l]));
  }
  const int steps = std::max(options.step_tokens, 1);
  in.scratch = scratch_bytes(config, widths, steps, std::min(steps, 64), 0) + options.adapter_bytes;
  // A budget the driver reports already counts what this process has allocated (another
  // model's uploaded weights); the heap's size does not.
  const gpu::DeviceInfo& info = device.info();
  const size_t reserved =
      info.budget_from_driver ? options.device_reserved_unallocated : options.device_reserved;
  in.budget = info.budget_bytes;  // 0: unknown (everything fits)
  if (in.budget > 0) in.budget = in.budget > reserved ? in.budget - reserved : 1;
  in.max_buffer = gpu::largest_buffer(info);
  // The output head, and the MTP block (with the head's share) and its K/V (with the scratch's)
  // when --spec mtp asks for it: needed whatever the layer count.
  in.head = in.head_largest = matrix_bytes(weights.output);
  if (options.mtp_kv_bytes > 0 && weights.mtp.present()) {
    const MtpWeights& m = weights.mtp;
    in.head += layer_bytes(m.layer) + matrix_bytes(m.eh_proj) + matrix_bytes(m.head);
    in.head_largest = std::max(
        {in.head_largest, layer_largest(m.layer), matrix_bytes(m.eh_proj), matrix_bytes(m.head)});
    in.scratch += options.mtp_kv_bytes;
  }
  StatusOr<GpuLayerPlan> p = plan_gpu_layers(in, requested, info.name);
  if (p.ok() && p->n_gpu > 0 && !quiet) {
    GLM_LOG_INFO("vulkan: %s: %s of %s", info.name.c_str(), p->describe().c_str(),
                 format_gib(in.budget).c_str());
    if (!p->too_large.empty()) {
      GLM_LOG_WARN("vulkan: %s: it and the layers before it stay on the CPU",
                   p->why_too_large(info.name).c_str());
    }
  }
  return p;
}

Status GpuModel::Uploader::matrix(const kernels::WeightView& v, gpu::Matrix* out,
                                  const std::string& what, bool experts) {
  if (v.data == nullptr) return Status::Ok();
  return rows(v, {{0, v.n_rows}}, out, what, experts);
}

Status GpuModel::Uploader::took(StatusOr<gpu::Matrix> m, size_t bytes, gpu::Matrix* out,
                                const std::string& what) {
  if (!m.ok()) return Status(m.status().code(), what + ": " + m.status().message());
  *out = std::move(*m);
  done += bytes;
  if (progress) progress(done, total);
  return Status::Ok();
}

StatusOr<bool> GpuModel::Uploader::stacked(const std::vector<const kernels::WeightView*>& views,
                                           gpu::Matrix* out, const std::string& what,
                                           int n_expert) {
  const kernels::WeightView& first = *views.front();
  size_t bytes = 0;
  for (const kernels::WeightView* v : views) {
    if (v->data == nullptr || v->type != first.type || v->n_cols != first.n_cols ||
        (n_expert > 0 && v->n_rows % n_expert != 0)) {
      return false;
    }
    bytes += matrix_bytes(*v);
  }
  if (bytes > gpu::largest_buffer(device->info())) return false;  // apart, each may still fit
  std::vector<gpu::MatrixRows> parts;
  const int n_runs = std::max(n_expert, 1);
  for (int e = 0; e < n_runs; ++e) {
    for (const kernels::WeightView* v : views) {
      const int64_t rows = v->n_rows / n_runs;
      parts.push_back({static_cast<const uint8_t*>(v->data) +
                           row_bytes(v->type, v->n_cols) * static_cast<size_t>(rows) * e,
                       rows, file});
    }
  }
  GLM_RETURN_IF_ERROR(
      took(gpu::upload_stacked(device, first.type, parts, first.n_cols, /*experts=*/n_expert > 0),
           bytes, out, what));
  return true;
}

Status GpuModel::Uploader::rows(const kernels::WeightView& v,
                                const std::vector<std::pair<int64_t, int64_t>>& runs,
                                gpu::Matrix* out, const std::string& what, bool experts) {
  const size_t rb = row_bytes(v.type, v.n_cols);
  std::vector<gpu::MatrixRows> parts;
  int64_t n_rows = 0;
  for (const auto& [first, count] : runs) {
    GLM_CHECK(first >= 0 && count > 0 && first + count <= v.n_rows);
    parts.push_back(
        {static_cast<const uint8_t*>(v.data) + rb * static_cast<size_t>(first), count, file});
    n_rows += count;
  }
  GLM_CHECK(n_rows == v.n_rows);
  return took(gpu::upload_stacked(device, v.type, parts, v.n_cols, experts), matrix_bytes(v), out,
              what);
}

Status GpuModel::Uploader::vecs(const std::vector<const float*>& v,
                                const std::vector<int64_t>& lens, gpu::Buffer* out) {
  GLM_CHECK(v.size() == lens.size());
  if (std::all_of(v.begin(), v.end(), [](const float* p) { return p == nullptr; })) {
    return Status::Ok();
  }
  std::vector<float> all;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == nullptr) {
      all.insert(all.end(), static_cast<size_t>(lens[i]), 0.0f);
    } else {
      all.insert(all.end(), v[i], v[i] + lens[i]);
    }
  }
  return vec(all.data(), static_cast<int64_t>(all.size()), out);
}

Status GpuModel::Uploader::vec(const float* v, int64_t n, gpu::Buffer* out) {
  if (v == nullptr) return Status::Ok();
  StatusOr<gpu::Buffer> b = gpu::upload_floats(device, v, static_cast<size_t>(n));
  if (!b.ok()) return b.status();
  *out = std::move(*b);
  return Status::Ok();
}

Status GpuModel::upload_head(const Weights& w, Uploader* up) {
  GLM_RETURN_IF_ERROR(up->vec(w.output_norm, config_.n_embd, &output_norm_));
  GLM_RETURN_IF_ERROR(up->vec(w.output_norm_b, config_.n_embd, &output_norm_b_));
  return up->matrix(w.output, &output_, "the output matrix");
}

std::vector<WarmUpStep> GpuModel::warm_up_steps() const {
  return {{0, 2}, {2, 1}, {0, gpu::matmul_tuning().tiled_min_tokens}};
}

kernels::ThreadPool* GpuModel::host_threads() {
  if (host_pool_ == nullptr) host_pool_ = std::make_unique<kernels::ThreadPool>(host_n_threads_);
  return host_pool_.get();
}

std::string GpuModel::device_name() const {
  std::string s =
      "vulkan:" + std::to_string(device_->info().index) + " (" + device_->info().name + ")";
  if (n_cpu_ > 0) {
    s += ", " + std::to_string(gpu_layers()) + " of " + std::to_string(config_.n_layer) + " layers";
  }
  return s;
}

Status GpuModel::health() const {
  if (!device_->lost()) return Status::Ok();
  return Status(ErrorCode::kUnavailable, "the GPU (" + device_->info().name +
                                             ") was lost; restart the engine to serve again");
}

gpu::Addr GpuModel::q8_rows(const gpu::Buffer& buf, const gpu::Matrix& w, int n) const {
  // uses_int_dot: a quantized w (rows of whole 32-value blocks); buf: up to kQ8Tokens rows.
  if (!gpu::uses_int_dot(*device_, w, n) || !buf.valid()) return 0;
  return buf.size() >= gpu::q8_bytes(n, w.n_cols) ? at(buf) : 0;
}

gpu::Addr GpuModel::head_q8(const gpu::Matrix* head, int n_out, OutputKind kind) const {
  if (kind == OutputKind::kHidden) return 0;
  return q8_rows(rows_q8_, head != nullptr ? *head : output_, n_out);
}

gpu::MatmulInput GpuModel::attn_input(const gpu::Matrix& next, int n) const {
  return {at(attn_), q8_rows(attn_q8_, next, n)};  // none where reserve() made no attn_q8_
}

Status GpuModel::reserve(int n, int r, int b) {
  const Config& c = config_;
  gpu::Device* dev = device_.get();
  const auto kDev = gpu::MemoryKind::kDevice;
  if (n > cap_tokens_) {
    const size_t t = static_cast<size_t>(n);
    GLM_RETURN_IF_ERROR(grow(dev, &cur_, t * c.n_embd * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &qkv_, t * (c.q_dim() + 2 * c.kv_dim()) * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &attn_, t * c.q_dim() * kF, kDev));
    GLM_RETURN_IF_ERROR(
        grow(dev, &attn_split_, gpu::attention_scratch_floats(c.head_dim) * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &proj_, t * c.n_embd * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &up_, t * widths_.up * kF, kDev));
    if (widths_.act > 0) GLM_RETURN_IF_ERROR(grow(dev, &act_, t * widths_.act * kF, kDev));
    if (widths_.moe > 0) GLM_RETURN_IF_ERROR(grow(dev, &moe_, t * widths_.moe * kF, kDev));
    if (widths_.mla > 0) {
      GLM_RETURN_IF_ERROR(grow(dev, &mla_, t * widths_.mla * kF, kDev));
      std::vector<int32_t> heads(t * c.n_head);
      for (size_t i = 0; i < heads.size(); ++i) heads[i] = static_cast<int32_t>(i % c.n_head);
      GLM_RETURN_IF_ERROR(grow(dev, &mla_heads_, heads.size() * sizeof(int32_t), kDev));
      GLM_RETURN_IF_ERROR(dev->upload(heads.data(), heads.size() * sizeof(int32_t), mla_heads_, 0));
    }
    const int q8_tokens = std::min(n, kQ8Tokens);
    GLM_RETURN_IF_ERROR(grow(dev, &cur_q8_, gpu::q8_bytes(q8_tokens, c.n_embd), kDev));
    if (c.head_dim % 32 == 0) {  // attention writes a head's dims as whole 32-value blocks
      GLM_RETURN_IF_ERROR(grow(dev, &attn_q8_, gpu::q8_bytes(q8_tokens, c.q_dim()), kDev));
    }
    if (widths_.down_in > 0) {
      GLM_RETURN_IF_ERROR(grow(dev, &act_q8_, gpu::q8_bytes(q8_tokens, widths_.down_in), kDev));
    }
    cap_tokens_ = n;
  }
  if (r > cap_rows_) {
    const size_t rr = static_cast<size_t>(r);
    GLM_RETURN_IF_ERROR(grow(dev, &rows_, rr * c.n_embd * kF, kDev));
    GLM_RETURN_IF_ERROR(
        grow(dev, &rows_q8_, gpu::q8_bytes(std::min(r, kQ8Tokens), c.n_embd), kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &logits_, rr * c.n_vocab * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &out_host_,
                             rr * (std::max(c.n_vocab, c.n_embd) + widths_.out_extra) * kF,
                             gpu::MemoryKind::kReadback));
    cap_rows_ = r;
  }
  const size_t in_bytes =
      (static_cast<size_t>(cap_tokens_) * (c.n_embd + 2 * widths_.rot + 1 + widths_.mtp_in) +
       cap_rows_ + b + 4) *
      kF;
  if (b > cap_blocks_ || !in_dev_.valid() || in_dev_.size() < in_bytes) {
    GLM_RETURN_IF_ERROR(grow(dev, &in_host_, in_bytes, gpu::MemoryKind::kUpload));
    GLM_RETURN_IF_ERROR(grow(dev, &in_dev_, in_bytes, kDev));
    cap_blocks_ = std::max(cap_blocks_, b);
  }
  return Status::Ok();
}

Status GpuModel::begin_step(const std::vector<SeqInput>& batch, KvPool* kv, Step* step, bool mtp) {
  const int bt = kv->block_tokens();
  Step& s = *step;
  s = Step{};
  for (const SeqInput& in : batch) {
    s.n += in.n_tokens;
    s.n_out += in.all_logits ? in.n_tokens : 1;
    s.n_table += (in.n_past + in.n_tokens + bt - 1) / bt;
  }
  if (mtp) {
    GLM_CHECK(widths_.mtp_in > 0);
    GLM_RETURN_IF_ERROR(bind_mtp_kv(kv));
  } else {
    GLM_RETURN_IF_ERROR(bind_kv(kv));
  }
  GLM_RETURN_IF_ERROR(reserve(s.n, s.n_out, s.n_table));
  GLM_RETURN_IF_ERROR(prepare_prefixes(mtp ? std::vector<SeqInput>() : batch));
  const size_t n = s.n;
  s.x = 0;
  s.cos = s.x + n * config_.n_embd * kF;
  s.sin = s.cos + n * widths_.rot * kF;
  s.slots = s.sin + n * widths_.rot * kF;
  s.rows = s.slots + n * kF;
  s.table = s.rows + static_cast<size_t>(s.n_out) * kF;
  s.bytes = s.table + static_cast<size_t>(s.n_table) * kF;
  if (mtp) {
    s.mtp_in = (s.bytes + 15) / 16 * 16;
    s.bytes = s.mtp_in + n * widths_.mtp_in * kF;
  }
  uint8_t* host = static_cast<uint8_t*>(in_host_.mapped());
  s.xs = reinterpret_cast<float*>(host + s.x);
  s.cs = reinterpret_cast<float*>(host + s.cos);
  s.sn = reinterpret_cast<float*>(host + s.sin);
  s.mi = mtp ? reinterpret_cast<float*>(host + s.mtp_in) : nullptr;
  int32_t* slots = reinterpret_cast<int32_t*>(host + s.slots);
  int32_t* rows = reinterpret_cast<int32_t*>(host + s.rows);
  s.out_rows = rows;
  int32_t* table = reinterpret_cast<int32_t*>(host + s.table);
  seq_first_row_.resize(batch.size());
  seq_table_at_.resize(batch.size());
  int t = 0, r = 0, tb = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqInput& in = batch[i];
    seq_first_row_[i] = t;
    seq_table_at_[i] = tb;
    const int need = (in.n_past + in.n_tokens + bt - 1) / bt;
    for (int b = 0; b < need; ++b) table[tb++] = in.blocks[b];
    for (int j = 0; j < in.n_tokens; ++j, ++t) {
      const int p = in.n_past + j;
      slots[t] = in.blocks[p / bt] * bt + p % bt;
      if (in.all_logits || j == in.n_tokens - 1) rows[r++] = t;
    }
  }
  return Status::Ok();
}

void GpuModel::embed(int32_t token, float* dst) const {
  ops::get_row(token_embd_.type, token_embd_.data, token, config_.n_embd, dst);
}

gpu::Stream& GpuModel::record(const Step& step) {
  gpu::Stream& st = device_->stream();
  st.begin();
  st.copy(in_host_, 0, in_dev_, 0, step.bytes);
  return st;
}

GpuModel::CacheRef GpuModel::layer_cache(int l) const { return kv_bound_.ref(at(kv_[l])); }

GpuModel::CacheRef GpuModel::mtp_cache() const { return mtp_bound_.ref(at(mtp_kv_)); }

Status GpuModel::grow_device(gpu::Buffer* b, size_t bytes) {
  return grow(device_.get(), b, bytes, gpu::MemoryKind::kDevice);
}

Status GpuModel::reserve_hidden(int n) {
  return grow(device_.get(), &hidden_host_, static_cast<size_t>(n) * config_.n_embd * kF,
              gpu::MemoryKind::kReadback);
}

Status GpuModel::prepare_prefixes(const std::vector<SeqInput>& batch) {
  seq_prefix_.assign(batch.size(), nullptr);
  prefixes_.next_step();
  const int kd = config_.kv_dim();
  // One copy an adapter and cache type. Its shape was checked against the model's by
  // validate_batch (check_prefix).
  auto upload = [&](const PrefixKv& px, GpuPrefix* g) -> Status {
    g->n_tokens = px.n_tokens;
    const size_t part = static_cast<size_t>(px.n_tokens) * kv_bound_.row_bytes;  // a layer's K or V
    std::vector<uint8_t> bytes(static_cast<size_t>(gpu_layers()) * 2 * part);
    for (int l = 0; l < gpu_layers(); ++l) {
      const size_t from = static_cast<size_t>(n_cpu_ + l) * px.n_tokens * kd;
      for (int i = 0; i < px.n_tokens; ++i) {
        uint8_t* k = bytes.data() + (2 * static_cast<size_t>(l)) * part + i * kv_bound_.row_bytes;
        ops::store_row(px.k.data() + from + static_cast<size_t>(i) * kd, kv_bound_.type, k, kd);
        ops::store_row(px.v.data() + from + static_cast<size_t>(i) * kd, kv_bound_.type, k + part,
                       kd);
      }
    }
    StatusOr<gpu::Buffer> b = device_->alloc(bytes.size(), gpu::MemoryKind::kDevice);
    if (!b.ok()) return b.status();
    GLM_RETURN_IF_ERROR(device_->upload(bytes.data(), bytes.size(), *b, 0));
    g->rows = std::move(*b);
    return Status::Ok();
  };
  for (size_t i = 0; i < batch.size(); ++i) {
    const Adapter* a = batch[i].adapter;
    if (a == nullptr || a->prefix.empty()) continue;
    StatusOr<GpuPrefix*> g = prefixes_.get(a->id << 8 | static_cast<uint64_t>(kv_bound_.type),
                                           [&](GpuPrefix* out) { return upload(a->prefix, out); });
    if (!g.ok()) return g.status();
    seq_prefix_[i] = *g;
  }
  return Status::Ok();
}

void GpuModel::attend(gpu::Stream& st, const std::vector<SeqInput>& batch, const Step& step,
                      const CacheRef& cache, const int* bidir_prefix, int prefix_layer,
                      const Rope* rope, gpu::Addr out_q8) {
  const Config& c = config_;
  const int qd = c.q_dim(), kd = c.kv_dim(), w = qd + 2 * kd;
  // Latent attention's qkv_: q rows [T, q_dim], then the K rows [T, kv_dim], no V rows.
  const bool mla = c.is_mla();
  const int q_stride = mla ? qd : w;
  const uint32_t vb = cache.v_base;
  gpu::KvStoreArgs ka;
  ka.src = mla ? at(qkv_, static_cast<size_t>(step.n) * qd * kF) : at(qkv_);
  ka.kv = cache.kv;
  ka.slots = at(in_dev_, step.slots);
  ka.n_tokens = step.n;
  ka.src_stride = mla ? kd : w;
  ka.k_col = mla ? 0 : qd;
  ka.v_col = qd + kd;
  ka.store_v = cache.parts == 2;
  ka.v_base = vb;
  ka.row_elems = kd;
  ka.row_bytes = cache.row_bytes;
  if (rope != nullptr) {  // the q heads (column 0) and the k heads, by the step's tables
    ka.cs = at(in_dev_, step.cos);
    ka.sn = at(in_dev_, step.sin);
    ka.n_q_heads = mla ? 0 : c.n_head;
    ka.head_dim = c.head_dim;
    ka.n_rot = rope->n_rot;
    ka.rot_col = rope->col;
    ka.rope = rope->kind;
  }
  gpu::kv_store(st, cache.type, ka);
  for (size_t s = 0; s < batch.size(); ++s) {
    gpu::AttentionArgs aa;
    aa.q = at(qkv_, static_cast<size_t>(seq_first_row_[s]) * q_stride * kF);
    aa.out = at(attn_);
    aa.out_q8 = out_q8;
    aa.kv = cache.kv;
    aa.blocks = at(in_dev_, step.table + static_cast<size_t>(seq_table_at_[s]) * kF);
    aa.n_tokens = batch[s].n_tokens;
    aa.q_stride = q_stride;
    aa.out_row0 = seq_first_row_[s];
    aa.v_base = vb;
    aa.row_bytes = cache.row_bytes;
    aa.n_past = batch[s].n_past;
    aa.n_head = c.n_head;
    aa.n_head_kv = c.n_head_kv;
    aa.head_dim = c.head_dim;
    aa.v_dims = mla ? c.mla.kv_lora : c.head_dim;
    aa.block_tokens = cache.block_tokens;
    aa.scale = c.attn_scale();
    aa.bidir_prefix = bidir_prefix != nullptr ? bidir_prefix[s] : 0;
    if (prefix_layer >= 0 && s < seq_prefix_.size() && seq_prefix_[s] != nullptr) {
      const GpuPrefix& px = *seq_prefix_[s];
      const size_t part = static_cast<size_t>(px.n_tokens) * cache.row_bytes;
      aa.prefix_kv = at(px.rows, 2 * static_cast<size_t>(prefix_layer) * part);
      aa.n_prefix = px.n_tokens;
      aa.prefix_v_base = static_cast<uint32_t>(part);
    }
    // A lone sequence may split its keys (a decode step at depth); a batch's sequences run
    // side by side, so they do not share the split scratch.
    if (batch.size() == 1) aa.scratch = at(attn_split_);
    // Each sequence reads its own rows of qkv_ and the cache and writes its own rows of attn_:
    // no barrier between them (the one after kv_store stays before the first).
    if (s > 0) st.concurrent_with_last();
    gpu::attention(st, cache.type, aa);
  }
}

Status GpuModel::finish_step(gpu::Stream& st, const Step& step, OutputKind kind,
                             std::vector<float>* out, const gpu::Matrix* head,
                             std::vector<float>* rows_out) {
  const Config& c = config_;
  const size_t width = kind == OutputKind::kHidden ? c.n_embd : c.n_vocab;
  const size_t n_out = static_cast<size_t>(step.n_out);
  if (n_out == 0) {  // K/V rows only (an MTP catch-up): nothing to read back
    if (fail_at_step_ > 0 && ++steps_ == fail_at_step_) device_->inject_failure_after(1);
    return st.submit_and_wait();
  }
  if (kind == OutputKind::kHidden) {
    st.copy(rows_, 0, out_host_, 0, n_out * c.n_embd * kF);
  } else {
    // [R, n_vocab]; rows_'s 8-bit blocks where the final norm wrote them (head_q8)
    const gpu::MatmulInput rows{at(rows_), head_q8(head, step.n_out, kind)};
    gpu::matmul(st, head != nullptr ? *head : output_, rows, at(logits_), step.n_out);
    st.copy(logits_, 0, out_host_, 0, n_out * c.n_vocab * kF);
    if (rows_out != nullptr) {  // the rows after the logits (widths_.out_extra)
      GLM_CHECK(widths_.out_extra >= c.n_embd);
      st.copy(rows_, 0, out_host_, n_out * c.n_vocab * kF, n_out * c.n_embd * kF);
    }
  }
  if (fail_at_step_ > 0 && ++steps_ == fail_at_step_) device_->inject_failure_after(1);
  GLM_RETURN_IF_ERROR(st.submit_and_wait());
  const float* res = static_cast<const float*>(out_host_.mapped());
  out->insert(out->end(), res, res + n_out * width);
  if (rows_out != nullptr && kind == OutputKind::kLogits) {
    const float* r = res + n_out * c.n_vocab;
    rows_out->insert(rows_out->end(), r, r + n_out * c.n_embd);
  }
  return Status::Ok();
}

}  // namespace glm::model
