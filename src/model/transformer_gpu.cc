#include "model/transformer_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/log.h"
#include "model/gpu_plan.h"
#include "model/ops.h"
#include "model/transformer.h"

namespace glm::model {
namespace {

constexpr size_t kF = sizeof(float);

gpu::Addr at(const gpu::Buffer& b, size_t byte_offset = 0) { return b.address() + byte_offset; }

// Grows *b to hold `bytes` (its contents are not kept).
Status grow(gpu::Device* dev, gpu::Buffer* b, size_t bytes, gpu::MemoryKind kind) {
  if (b->valid() && b->size() >= bytes) return Status::Ok();
  b->reset();
  StatusOr<gpu::Buffer> nb = dev->alloc(bytes, kind);
  if (!nb.ok()) return nb.status();
  *b = std::move(*nb);
  return Status::Ok();
}

size_t matrix_bytes(const kernels::WeightView& v) {
  return v.data == nullptr ? size_t{0} : row_bytes(v.type, v.n_cols) * v.n_rows;
}

// A layer's matrices on the device (its norms and biases are a rounding error beside them).
size_t layer_bytes(const LayerWeights& lw) {
  size_t n = 0;
  for (const kernels::WeightView* v :
       {&lw.qkv, &lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.ffn_up, &lw.ffn_gate, &lw.ffn_down}) {
    n += matrix_bytes(*v);
  }
  return n;
}

// The width of a layer's FFN up projection output: fused gate and up, or up alone.
int up_width(const Config& c, const LayerWeights& lw) {
  return lw.ffn_gate.data != nullptr ? 2 * c.n_ff : static_cast<int>(lw.ffn_up.n_rows);
}

// The device scratch of a step of n tokens and r output rows (GpuTransformer::reserve's
// buffers; the host-visible ones are counted too, as they may come from the same heap).
size_t step_bytes(const Config& c, int up, int n, int r, int b) {
  const size_t t = static_cast<size_t>(n), rr = static_cast<size_t>(r);
  const size_t acts = t * (2 * c.n_embd + c.q_dim() + 2 * c.kv_dim() + c.q_dim() + up + c.n_ff);
  const size_t rows = rr * (c.n_embd + c.n_vocab + std::max(c.n_vocab, c.n_embd));
  const size_t in = 2 * (t * (c.n_embd + 2 * (c.n_rot / 2) + 1) + rr + b);
  return (acts + rows + in) * kF;
}

}  // namespace

GpuTransformer::GpuTransformer(std::shared_ptr<const gguf::File> file, Config config,
                               const Weights& weights, std::unique_ptr<gpu::Device> device,
                               int n_cpu)
    : file_(std::move(file)),
      config_(std::move(config)),
      token_embd_(weights.token_embd),
      device_(std::move(device)),
      n_cpu_(n_cpu) {
  if (const char* s = std::getenv("GLMSERVE_VULKAN_FAIL_AT_STEP"); s != nullptr && *s != '\0') {
    fail_at_step_ = std::atoi(s);
  }
}

StatusOr<std::unique_ptr<Model>> GpuTransformer::create(std::shared_ptr<const gguf::File> file,
                                                        Config config, Weights weights,
                                                        std::unique_ptr<gpu::Device> device,
                                                        const LoadOptions& options) {
  if (config.head_dim > 256) {
    return unsupported("the GPU attention takes head_dim up to 256, the model has " +
                       std::to_string(config.head_dim) + " (use --device cpu)");
  }
  if (config.n_rot % 2 != 0 || config.kv_dim() % 2 != 0) {
    return unsupported("the GPU path needs an even rotary and KV width (use --device cpu)");
  }
  // The device's share, planned before anything is uploaded (model/gpu_plan.h).
  const int n_layer = config.n_layer;
  std::vector<size_t> weights_of(n_layer), kv_of(n_layer, options.kv_bytes / n_layer);
  for (int l = 0; l < n_layer; ++l) weights_of[l] = layer_bytes(weights.layers[l]);
  const int steps = std::max(options.step_tokens, 1);
  const size_t scratch =
      step_bytes(config, up_width(config, weights.layers[0]), steps, std::min(steps, 64), 0);
  const gpu::DeviceInfo& info = device->info();
  size_t budget = info.budget_bytes;  // 0: unknown (everything fits)
  if (budget > 0) budget = budget > options.device_reserved ? budget - options.device_reserved : 1;
  StatusOr<GpuLayerPlan> plan = plan_gpu_layers(weights_of, kv_of, matrix_bytes(weights.output),
                                                scratch, budget, options.gpu_layers, info.name);
  if (!plan.ok()) return plan.status();
  if (plan->n_gpu == 0 && options.gpu_layers < 0) {
    GLM_LOG_WARN("vulkan: no layer fits in %s's %s (one layer and the output head need more); "
                 "running on the CPU",
                 info.name.c_str(), format_gib(budget).c_str());
    return std::unique_ptr<Model>(std::make_unique<Transformer>(std::move(file), std::move(config),
                                                                std::move(weights), options));
  }
  GLM_LOG_INFO("vulkan: %s: %s of %s", info.name.c_str(), plan->describe().c_str(),
               format_gib(budget).c_str());
  const int n_cpu = n_layer - plan->n_gpu;
  std::unique_ptr<GpuTransformer> m(
      new GpuTransformer(file, config, weights, std::move(device), n_cpu));
  m->planned_bytes_ = plan->need();
  GLM_RETURN_IF_ERROR(m->upload(weights, options.progress));
  if (n_cpu > 0) {
    // The CPU keeps layers [0, n_cpu): the others' views are dropped before it repacks.
    for (int l = n_cpu; l < n_layer; ++l) weights.layers[l] = LayerWeights{};
    weights.output = kernels::WeightView{};
    m->cpu_ = std::make_unique<Transformer>(std::move(file), std::move(config), std::move(weights),
                                            options);
    GLM_LOG_INFO("vulkan: layers %d-%d on the GPU, 0-%d on the CPU", n_cpu, n_layer - 1, n_cpu - 1);
  }
  return std::unique_ptr<Model>(std::move(m));
}

std::string GpuTransformer::device_name() const {
  std::string s =
      "vulkan:" + std::to_string(device_->info().index) + " (" + device_->info().name + ")";
  if (n_cpu_ > 0) {
    s += ", " + std::to_string(config_.n_layer - n_cpu_) + " of " +
         std::to_string(config_.n_layer) + " layers";
  }
  return s;
}

Status GpuTransformer::health() const {
  if (!device_->lost()) return Status::Ok();
  return Status(ErrorCode::kUnavailable, "the GPU (" + device_->info().name +
                                             ") was lost; restart the engine to serve again");
}

Status GpuTransformer::upload(const Weights& w, const ProgressFn& progress) {
  gpu::Device* dev = device_.get();
  size_t total = matrix_bytes(w.output), done = 0;
  for (size_t l = n_cpu_; l < w.layers.size(); ++l) total += layer_bytes(w.layers[l]);
  auto matrix = [&](const kernels::WeightView& v, gpu::Matrix* out, const char* what) -> Status {
    if (v.data == nullptr) return Status::Ok();
    StatusOr<gpu::Matrix> m = gpu::upload_matrix(dev, v.type, v.data, v.n_rows, v.n_cols);
    if (!m.ok()) return Status(m.status().code(), std::string(what) + ": " + m.status().message());
    *out = std::move(*m);
    done += matrix_bytes(v);
    if (progress) progress(done, total);
    return Status::Ok();
  };
  auto vec = [&](const float* v, int64_t n, gpu::Buffer* out) -> Status {
    if (v == nullptr) return Status::Ok();
    StatusOr<gpu::Buffer> b = gpu::upload_floats(dev, v, static_cast<size_t>(n));
    if (!b.ok()) return b.status();
    *out = std::move(*b);
    return Status::Ok();
  };
  const Config& c = config_;
  layers_.resize(w.layers.size() - n_cpu_);
  for (size_t l = n_cpu_; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    Layer& g = layers_[l - n_cpu_];
    const std::string name = "layer " + std::to_string(l);
    GLM_RETURN_IF_ERROR(vec(lw.attn_norm, c.n_embd, &g.attn_norm));
    GLM_RETURN_IF_ERROR(matrix(lw.qkv, &g.qkv, name.c_str()));
    GLM_RETURN_IF_ERROR(vec(lw.qkv_b, c.q_dim() + 2 * c.kv_dim(), &g.qkv_b));
    GLM_RETURN_IF_ERROR(matrix(lw.wq, &g.wq, name.c_str()));
    GLM_RETURN_IF_ERROR(matrix(lw.wk, &g.wk, name.c_str()));
    GLM_RETURN_IF_ERROR(matrix(lw.wv, &g.wv, name.c_str()));
    GLM_RETURN_IF_ERROR(vec(lw.bq, c.q_dim(), &g.bq));
    GLM_RETURN_IF_ERROR(vec(lw.bk, c.kv_dim(), &g.bk));
    GLM_RETURN_IF_ERROR(vec(lw.bv, c.kv_dim(), &g.bv));
    GLM_RETURN_IF_ERROR(matrix(lw.wo, &g.wo, name.c_str()));
    GLM_RETURN_IF_ERROR(vec(lw.ffn_norm, c.n_embd, &g.ffn_norm));
    GLM_RETURN_IF_ERROR(matrix(lw.ffn_up, &g.ffn_up, name.c_str()));
    GLM_RETURN_IF_ERROR(matrix(lw.ffn_gate, &g.ffn_gate, name.c_str()));
    GLM_RETURN_IF_ERROR(matrix(lw.ffn_down, &g.ffn_down, name.c_str()));
    GLM_RETURN_IF_ERROR(vec(lw.ffn_down_b, c.n_embd, &g.ffn_down_b));
    GLM_RETURN_IF_ERROR(vec(lw.attn_post_norm, c.n_embd, &g.attn_post_norm));
    GLM_RETURN_IF_ERROR(vec(lw.ffn_post_norm, c.n_embd, &g.ffn_post_norm));
  }
  GLM_RETURN_IF_ERROR(vec(w.output_norm, c.n_embd, &output_norm_));
  GLM_RETURN_IF_ERROR(matrix(w.output, &output_, "the output matrix"));
  return Status::Ok();
}

uint32_t GpuTransformer::v_base() const {
  return static_cast<uint32_t>(static_cast<size_t>(kv_blocks_) * kv_block_tokens_ * kv_row_bytes_);
}

Status GpuTransformer::bind_kv(const KvPool* kv) {
  if (kv == kv_pool_ && kv->n_blocks() == kv_blocks_ && kv->block_tokens() == kv_block_tokens_ &&
      kv->kv_type() == kv_type_) {
    return Status::Ok();
  }
  if (kv->kv_type() == DType::kQ8_0 && kv->row_elems() > gpu::kMaxQ8RowElems) {
    return unsupported("a q8_0 KV cache on the GPU takes rows of up to " +
                       std::to_string(gpu::kMaxQ8RowElems) + " values; this model's are " +
                       std::to_string(kv->row_elems()) + " (use --kv f16)");
  }
  const size_t layer_bytes =
      2 * static_cast<size_t>(kv->n_blocks()) * kv->block_tokens() * kv->row_bytes();
  if (layer_bytes >= (size_t{1} << 32)) {
    return unsupported("a KV cache of " + std::to_string(layer_bytes >> 20) +
                       " MiB a layer: the GPU kernels address at most 4 GiB a layer (lower "
                       "--ctx-size)");
  }
  kv_.clear();
  kv_pool_ = nullptr;
  for (size_t l = 0; l < layers_.size(); ++l) {
    StatusOr<gpu::Buffer> b = device_->alloc(layer_bytes, gpu::MemoryKind::kDevice);
    if (!b.ok()) {
      kv_.clear();
      return Status(b.status().code(),
                    "the KV cache (" + std::to_string(layer_bytes * layers_.size() >> 20) +
                        " MiB) does not fit on the GPU: " + b.status().message());
    }
    kv_.push_back(std::move(*b));
  }
  kv_pool_ = kv;
  kv_blocks_ = kv->n_blocks();
  kv_block_tokens_ = kv->block_tokens();
  kv_type_ = kv->kv_type();
  kv_row_bytes_ = kv->row_bytes();
  return Status::Ok();
}

Status GpuTransformer::reserve(int n, int r, int b) {
  const Config& c = config_;
  gpu::Device* dev = device_.get();
  const int half = c.n_rot / 2;
  const auto kDev = gpu::MemoryKind::kDevice;
  if (n > cap_tokens_) {
    const size_t t = static_cast<size_t>(n);
    const int up_width = layers_[0].ffn_gate.buf.valid() ? 2 * c.n_ff
                                                          : static_cast<int>(layers_[0].ffn_up.n_rows);
    GLM_RETURN_IF_ERROR(grow(dev, &cur_, t * c.n_embd * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &qkv_, t * (c.q_dim() + 2 * c.kv_dim()) * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &attn_, t * c.q_dim() * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &proj_, t * c.n_embd * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &up_, t * up_width * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &act_, t * c.n_ff * kF, kDev));
    cap_tokens_ = n;
  }
  if (r > cap_rows_) {
    const size_t rr = static_cast<size_t>(r);
    GLM_RETURN_IF_ERROR(grow(dev, &rows_, rr * c.n_embd * kF, kDev));
    GLM_RETURN_IF_ERROR(grow(dev, &logits_, rr * c.n_vocab * kF, kDev));
    GLM_RETURN_IF_ERROR(
        grow(dev, &out_host_, rr * std::max(c.n_vocab, c.n_embd) * kF, gpu::MemoryKind::kReadback));
    cap_rows_ = r;
  }
  const size_t in_bytes =
      (static_cast<size_t>(cap_tokens_) * (c.n_embd + 2 * half + 1) + cap_rows_ + b) * kF;
  if (b > cap_blocks_ || !in_dev_.valid() || in_dev_.size() < in_bytes) {
    GLM_RETURN_IF_ERROR(grow(dev, &in_host_, in_bytes, gpu::MemoryKind::kUpload));
    GLM_RETURN_IF_ERROR(grow(dev, &in_dev_, in_bytes, kDev));
    cap_blocks_ = std::max(cap_blocks_, b);
  }
  return Status::Ok();
}

void GpuTransformer::add_residual(gpu::Stream& st, const gpu::Buffer& post_norm, gpu::Addr x,
                                  int n) const {
  const int d = config_.n_embd;
  if (post_norm.valid()) {
    // glm4: x += RMSNorm(proj_); cur_ [n, n_embd] is free here (its sub-block has run).
    gpu::rms_norm(st, at(proj_), at(post_norm), at(cur_), n, d, config_.norm_eps);
    gpu::add(st, at(cur_), x, static_cast<int64_t>(n) * d);
  } else {
    gpu::add(st, at(proj_), x, static_cast<int64_t>(n) * d);
  }
}

Status GpuTransformer::forward(const std::vector<SeqInput>& batch, KvPool* kv,
                               std::vector<float>* out, OutputKind kind) {
  const Config& c = config_;
  GLM_RETURN_IF_ERROR(validate_batch(c, batch, kv));
  GLM_RETURN_IF_ERROR(refuse_lora(batch, "the GPU"));
  GLM_RETURN_IF_ERROR(refuse_prefix(batch, "the GPU path"));
  if (batch.empty()) return Status::Ok();
  const int bt = kv->block_tokens();
  int n = 0, n_out = 0, n_table = 0;
  for (const SeqInput& in : batch) {
    n += in.n_tokens;
    n_out += in.all_logits ? in.n_tokens : 1;
    n_table += (in.n_past + in.n_tokens + bt - 1) / bt;
  }
  GLM_RETURN_IF_ERROR(bind_kv(kv));
  GLM_RETURN_IF_ERROR(reserve(n, n_out, n_table));
  if (cpu_ != nullptr) {  // layers [0, n_cpu_) on the CPU: their output is the GPU's input
    cpu_x_.clear();
    GLM_RETURN_IF_ERROR(cpu_->forward_layers(batch, kv, n_cpu_, &cpu_x_));
  }

  const int d = c.n_embd, half = c.n_rot / 2;
  const int qd = c.q_dim(), kd = c.kv_dim(), w = qd + 2 * kd, ff = c.n_ff;
  // The step's inputs, laid out as in_host_'s comment says.
  const size_t x_off = 0;
  const size_t cos_off = x_off + static_cast<size_t>(n) * d * kF;
  const size_t sin_off = cos_off + static_cast<size_t>(n) * half * kF;
  const size_t slots_off = sin_off + static_cast<size_t>(n) * half * kF;
  const size_t rows_off = slots_off + static_cast<size_t>(n) * kF;
  const size_t table_off = rows_off + static_cast<size_t>(n_out) * kF;
  const size_t in_bytes = table_off + static_cast<size_t>(n_table) * kF;
  uint8_t* host = static_cast<uint8_t*>(in_host_.mapped());
  float* xs = reinterpret_cast<float*>(host + x_off);
  float* cs = reinterpret_cast<float*>(host + cos_off);
  float* sn = reinterpret_cast<float*>(host + sin_off);
  int32_t* slots = reinterpret_cast<int32_t*>(host + slots_off);
  int32_t* rows = reinterpret_cast<int32_t*>(host + rows_off);
  int32_t* table = reinterpret_cast<int32_t*>(host + table_off);
  // Per sequence: its first row in the batch, its block table's place in the step's inputs.
  std::vector<int>& first_row = seq_first_row_;
  std::vector<int>& table_at = seq_table_at_;
  first_row.resize(batch.size());
  table_at.resize(batch.size());
  int t = 0, r = 0, tb = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    first_row[s] = t;
    table_at[s] = tb;
    const int need = (in.n_past + in.n_tokens + bt - 1) / bt;
    for (int b = 0; b < need; ++b) table[tb++] = in.blocks[b];
    for (int i = 0; i < in.n_tokens; ++i, ++t) {
      const int p = in.n_past + i;
      if (cpu_ == nullptr) {
        ops::get_row(token_embd_.type, token_embd_.data, in.tokens[i], d,
                     xs + static_cast<size_t>(t) * d);
      } else {
        std::memcpy(xs + static_cast<size_t>(t) * d, cpu_x_.data() + static_cast<size_t>(t) * d,
                    d * kF);
      }
      ops::rope_table(p, c.n_rot, c.rope_base, cs + static_cast<size_t>(t) * half,
                      sn + static_cast<size_t>(t) * half, c.rope_freq_scale);
      slots[t] = in.blocks[p / bt] * bt + p % bt;
      if (in.all_logits || i == in.n_tokens - 1) rows[r++] = t;
    }
  }

  gpu::Stream& st = device_->stream();
  st.begin();
  st.copy(in_host_, 0, in_dev_, 0, in_bytes);
  const gpu::Addr x = at(in_dev_, x_off);  // [n, n_embd] residual stream, updated in place
  const gpu::Addr cos_a = at(in_dev_, cos_off), sin_a = at(in_dev_, sin_off);
  const uint32_t vb = v_base();
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {  // model layer n_cpu_ + l
    const Layer& g = layers_[l];
    gpu::rms_norm(st, x, at(g.attn_norm), at(cur_), n, d, c.norm_eps);
    // qkv_ [n, q_dim + 2 kv_dim]: per token its q heads, k heads, v heads.
    if (g.qkv.buf.valid()) {
      gpu::matmul(st, g.qkv, at(cur_), at(qkv_), n, w, 0);
      if (g.qkv_b.valid()) gpu::add_bias(st, at(g.qkv_b), at(qkv_), n, w, w, 0);
    } else {
      gpu::matmul(st, g.wq, at(cur_), at(qkv_), n, w, 0);
      gpu::matmul(st, g.wk, at(cur_), at(qkv_), n, w, qd);
      gpu::matmul(st, g.wv, at(cur_), at(qkv_), n, w, qd + kd);
      if (g.bq.valid()) gpu::add_bias(st, at(g.bq), at(qkv_), n, qd, w, 0);
      if (g.bk.valid()) gpu::add_bias(st, at(g.bk), at(qkv_), n, kd, w, qd);
      if (g.bv.valid()) gpu::add_bias(st, at(g.bv), at(qkv_), n, kd, w, qd + kd);
    }
    gpu::rope(st, at(qkv_), cos_a, sin_a, n, w, 0, c.n_head, c.head_dim, c.n_rot);
    gpu::rope(st, at(qkv_), cos_a, sin_a, n, w, qd, c.n_head_kv, c.head_dim, c.n_rot);
    gpu::KvStoreArgs ka;
    ka.src = at(qkv_);
    ka.kv = at(kv_[l]);
    ka.slots = at(in_dev_, slots_off);
    ka.n_tokens = n;
    ka.src_stride = w;
    ka.k_col = qd;
    ka.v_col = qd + kd;
    ka.k_base = 0;
    ka.v_base = vb;
    ka.row_elems = kd;
    ka.row_bytes = static_cast<uint32_t>(kv_row_bytes_);
    gpu::kv_store(st, kv_type_, ka);
    for (size_t s = 0; s < batch.size(); ++s) {
      gpu::AttentionArgs aa;
      aa.q = at(qkv_, static_cast<size_t>(first_row[s]) * w * kF);
      aa.out = at(attn_);
      aa.kv = at(kv_[l]);
      aa.blocks = at(in_dev_, table_off + static_cast<size_t>(table_at[s]) * kF);
      aa.n_tokens = batch[s].n_tokens;
      aa.q_stride = w;
      aa.out_row0 = first_row[s];
      aa.k_base = 0;
      aa.v_base = vb;
      aa.row_bytes = static_cast<uint32_t>(kv_row_bytes_);
      aa.n_past = batch[s].n_past;
      aa.n_head = c.n_head;
      aa.n_head_kv = c.n_head_kv;
      aa.head_dim = c.head_dim;
      aa.block_tokens = bt;
      aa.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      gpu::attention(st, kv_type_, aa);
    }
    gpu::matmul(st, g.wo, at(attn_), at(proj_), n);  // [n, n_embd]
    add_residual(st, g.attn_post_norm, x, n);
    gpu::rms_norm(st, x, at(g.ffn_norm), at(cur_), n, d, c.norm_eps);
    // up_ [n, 2 n_ff]: per token gate (n_ff) then up (n_ff).
    if (g.ffn_gate.buf.valid()) {
      gpu::matmul(st, g.ffn_gate, at(cur_), at(up_), n, 2 * ff, 0);
      gpu::matmul(st, g.ffn_up, at(cur_), at(up_), n, 2 * ff, ff);
    } else {
      gpu::matmul(st, g.ffn_up, at(cur_), at(up_), n);
    }
    gpu::swiglu(st, at(up_), at(act_), n, ff, 2 * ff, 0, ff);
    gpu::matmul(st, g.ffn_down, at(act_), at(proj_), n);  // [n, n_embd]
    if (g.ffn_down_b.valid()) gpu::add_bias(st, at(g.ffn_down_b), at(proj_), n, d, d, 0);
    add_residual(st, g.ffn_post_norm, x, n);
  }
  // rows_ [R, n_embd]: the final norm of the rows to output.
  gpu::rms_norm(st, x, at(output_norm_), at(rows_), n_out, d, c.norm_eps, at(in_dev_, rows_off));
  const size_t width = kind == OutputKind::kHidden ? d : c.n_vocab;
  if (kind == OutputKind::kHidden) {
    st.copy(rows_, 0, out_host_, 0, static_cast<size_t>(n_out) * d * kF);
  } else {
    gpu::matmul(st, output_, at(rows_), at(logits_), n_out);  // [R, n_vocab]
    st.copy(logits_, 0, out_host_, 0, static_cast<size_t>(n_out) * c.n_vocab * kF);
  }
  if (fail_at_step_ > 0 && ++steps_ == fail_at_step_) device_->inject_failure_after(1);
  GLM_RETURN_IF_ERROR(st.submit_and_wait());
  const float* res = static_cast<const float*>(out_host_.mapped());
  out->insert(out->end(), res, res + static_cast<size_t>(n_out) * width);
  return Status::Ok();
}

void GpuTransformer::copy_kv_block(KvPool* kv, int src, int dst) {
  if (cpu_ != nullptr) kv->copy_block(src, dst);  // the CPU layers' rows
  if (!bind_kv(kv).ok()) return;
  const size_t bytes = static_cast<size_t>(kv_block_tokens_) * kv_row_bytes_;
  gpu::Stream& st = device_->stream();
  st.begin();
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (size_t base : {size_t{0}, size_t{v_base()}}) {
      st.copy(kv_[l], base + src * bytes, kv_[l], base + dst * bytes, bytes);
    }
  }
  const Status s = st.submit_and_wait();
  if (!s.ok()) GLM_LOG_ERROR("KV block copy on the GPU failed: %s", s.to_string().c_str());
}

// The GPU layers' rows of a block and their bytes in KvPool::save_block's layout
// ([n_layer, 2 (K,V), block_tokens, row]): each (layer, K or V) part, copied between the layer's
// cache and block_io_ (host-visible) in one submission.
Status GpuTransformer::block_io(int block, bool to_host) {
  const size_t bytes = static_cast<size_t>(kv_block_tokens_) * kv_row_bytes_;
  GLM_RETURN_IF_ERROR(
      grow(device_.get(), &block_io_, layers_.size() * 2 * bytes, gpu::MemoryKind::kReadback));
  gpu::Stream& st = device_->stream();
  st.begin();
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (int k = 0; k < 2; ++k) {
      const size_t cache = (k == 0 ? 0 : v_base()) + block * bytes;
      const size_t host = (l * 2 + k) * bytes;
      if (to_host) {
        st.copy(kv_[l], cache, block_io_, host, bytes);
      } else {
        st.copy(block_io_, host, kv_[l], cache, bytes);
      }
    }
  }
  return st.submit_and_wait();
}

void GpuTransformer::save_kv_block(const KvPool* kv, int block, uint8_t* data) const {
  auto* self = const_cast<GpuTransformer*>(this);  // the device's stream and block_io_
  GLM_CHECK(self->bind_kv(kv).ok());
  if (cpu_ != nullptr) kv->save_block(block, data);  // the CPU layers' rows (the GPU's follow)
  const size_t first = static_cast<size_t>(n_cpu_) * 2 * kv_block_tokens_ * kv_row_bytes_;
  // A block that cannot be read would be saved wrong and reused after a restart: stop the
  // engine instead (serve restarts it; docs/gpu.md#failures).
  if (const Status s = self->block_io(block, /*to_host=*/true); !s.ok()) {
    GLM_LOG_ERROR("KV block read from the GPU failed, stopping: %s", s.to_string().c_str());
    std::abort();
  }
  std::memcpy(data + first, block_io_.mapped(), kv->block_bytes() - first);
}

void GpuTransformer::load_kv_block(KvPool* kv, int block, const uint8_t* data) {
  if (cpu_ != nullptr) kv->load_block(block, data);
  if (!bind_kv(kv).ok()) return;
  const size_t bytes = static_cast<size_t>(kv_block_tokens_) * kv_row_bytes_;
  const size_t first = static_cast<size_t>(n_cpu_) * 2 * bytes;
  if (!grow(device_.get(), &block_io_, layers_.size() * 2 * bytes, gpu::MemoryKind::kReadback)
           .ok()) {
    GLM_LOG_ERROR("KV block write to the GPU failed: no host-visible buffer");
    return;
  }
  std::memcpy(block_io_.mapped(), data + first, layers_.size() * 2 * bytes);
  if (const Status s = block_io(block, /*to_host=*/false); !s.ok()) {
    GLM_LOG_ERROR("KV block write to the GPU failed: %s", s.to_string().c_str());
  }
}

}  // namespace glm::model
