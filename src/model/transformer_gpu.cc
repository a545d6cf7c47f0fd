#include "model/transformer_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "core/bytes.h"
#include "core/check.h"
#include "core/log.h"
#include "model/gpu_plan.h"
#include "model/ops.h"
#include "model/transformer.h"

namespace glm::model {
namespace {

constexpr size_t kF = sizeof(float);

// A mixture-of-experts layer's scratch (moe_) for n tokens of k slots each, as byte offsets,
// each part on 16 bytes (the matmuls read 16-byte aligned activations 16 bytes at a time):
// router logits [n, n_expert], the slots' experts [n k] int32 and weights [n k], the experts'
// gate and up [n k, 2 n_ff_exp], their SwiGLU [n k, n_ff_exp], their outputs [n k, n_embd], and
// the slots grouped by expert (gpu::ExpertGroups: counts [n_expert], lists [n_expert, n]).
struct MoeScratch {
  size_t logits = 0, ids = 0, weights = 0, up = 0, act = 0, down = 0, counts = 0, lists = 0;

  MoeScratch(const Config& c, int n) {
    const size_t t = static_cast<size_t>(n), slots = t * c.moe.n_expert_used;
    size_t at = 0;
    auto part = [&](size_t floats) {
      const size_t o = at;
      at = (at + floats * kF + 15) / 16 * 16;
      return o;
    };
    logits = part(t * c.moe.n_expert);
    ids = part(slots);
    weights = part(slots);
    up = part(slots * 2 * c.moe.n_ff_exp);
    act = part(slots * c.moe.n_ff_exp);
    down = part(slots * c.n_embd);
    counts = part(c.moe.n_expert);
    lists = part(t * c.moe.n_expert);
  }
  // Floats a token: the counts' n_expert counted for every token, with room for the eight
  // parts' rounding.
  static int floats_per_token(const Config& c) {
    const MoeConfig& m = c.moe;
    return 3 * m.n_expert + m.n_expert_used * (2 + 3 * m.n_ff_exp + c.n_embd) + 8 * 4;
  }
};

// The scratch widths of the decoder: rotary tables of n_rot / 2, up_ [T, 2 n_ff] (gate then up;
// a fused ffn_up's rows), act_ [T, n_ff]; glm4moe: the dense layers' or the shared expert's
// SwiGLU, whichever is wider, and moe_; with the MTP block (mtp), its input rows [enorm(e);
// hnorm(h)] and its hidden rows read back beside the logits.
GpuModel::Widths decoder_widths(const Config& c, const LayerWeights& first_gpu_layer,
                                bool mtp = false) {
  GpuModel::Widths w;
  w.rot = c.n_rot / 2;
  w.mla = GpuTransformer::mla_floats_per_token(c);
  if (c.moe.n_expert > 0) {  // glm4moe and deepseek2: experts and their shared one
    const int ff = std::max(c.n_ff, c.moe.n_ff_exp * c.moe.n_expert_shared);
    w.up = 2 * ff;
    w.act = w.down_in = ff;
    w.moe = MoeScratch::floats_per_token(c);
    if (mtp) {
      w.mtp_in = 2 * c.n_embd;
      w.out_extra = c.n_embd;
    }
    return w;
  }
  w.up = first_gpu_layer.ffn_gate.data != nullptr ? 2 * c.n_ff
                                                  : static_cast<int>(first_gpu_layer.ffn_up.n_rows);
  w.act = w.down_in = c.n_ff;
  return w;
}

// Puts back what GpuTransformer::take_host_experts moved out of a layer (nothing for a layer it
// left alone).
void restore_experts(const MoeWeights& taken, MoeWeights* m) {
  if (!taken.present()) return;
  m->gate_inp = taken.gate_inp;
  m->exp_probs_b = taken.exp_probs_b;
  m->gate_exps = taken.gate_exps;
  m->up_exps = taken.up_exps;
  m->down_exps = taken.down_exps;
}

}  // namespace

GpuTransformer::GpuTransformer(std::shared_ptr<const gguf::File> file, const Config& config,
                               const Weights& weights, std::unique_ptr<gpu::Device> device,
                               const GpuLayerPlan& plan, bool mtp)
    : GpuModel(std::move(file), config, weights.token_embd, std::move(device), plan,
               decoder_widths(config, weights.layers.back(), mtp)) {}

kernels::ThreadPool* GpuTransformer::host_threads() {
  if (cpu_ != nullptr) return cpu_->host_threads();
  if (host_ != nullptr) return host_->pool.get();
  return GpuModel::host_threads();
}

StatusOr<std::unique_ptr<Model>> GpuTransformer::create(std::shared_ptr<const gguf::File> file,
                                                        Config config, Weights weights,
                                                        std::unique_ptr<gpu::Device> device,
                                                        const LoadOptions& options) {
  GLM_RETURN_IF_ERROR(check_head_dim(config));
  if (config.n_rot % 2 != 0 || config.kv_dim() % 2 != 0) {
    return unsupported("the GPU path needs an even rotary and KV width (use --device cpu)");
  }
  if (config.moe.n_expert > 0 && config.moe.n_expert_used > gpu::kMaxMoeExperts) {
    return unsupported("the GPU routes a token to at most " + std::to_string(gpu::kMaxMoeExperts) +
                       " experts, the model to " + std::to_string(config.moe.n_expert_used) +
                       " (use --device cpu)");
  }
  // The MTP block goes on the device when --spec mtp will run it (LoadOptions::mtp_kv_bytes).
  const bool mtp = options.mtp_kv_bytes > 0 && weights.mtp.present();
  const Widths widths = decoder_widths(config, weights.layers.back(), mtp);
  // --cpu-moe: the routed experts of the first layers are not the device's to hold.
  std::string cpu_moe_why;
  const int cpu_moe = options.cpu_moe == kCpuMoeAuto
                          ? auto_cpu_moe(*device, config, &weights, widths, options, &cpu_moe_why)
                          : options.cpu_moe;
  std::vector<MoeWeights> host_experts;  // [n_layer]: those moved out (empty views elsewhere)
  take_host_experts(&weights, cpu_moe, &host_experts);
  // The device's share, planned before anything is uploaded (model/gpu_plan.h).
  StatusOr<GpuLayerPlan> plan =
      GpuModel::plan(*device, config, weights, widths, options, options.gpu_layers);
  if (!plan.ok()) return plan.status();
  const int n_layer = config.n_layer, n_cpu = n_layer - plan->n_gpu;
  // The CPU's layers run their experts as their own (all of them when nothing fits).
  for (int l = 0; l < static_cast<int>(host_experts.size()); ++l) {
    if (l < n_cpu) restore_experts(host_experts[l], &weights.layers[l].moe);
  }
  if (plan->n_gpu == 0) {
    if (!plan->too_large.empty()) {
      GLM_LOG_WARN("vulkan: %s; running on the CPU",
                   plan->why_too_large(device->info().name).c_str());
    } else {
      GLM_LOG_WARN(
          "vulkan: no layer fits in %s's %s (one layer and the output head need more); "
          "running on the CPU",
          device->info().name.c_str(), format_gib(plan->budget).c_str());
    }
    return std::unique_ptr<Model>(std::make_unique<Transformer>(std::move(file), std::move(config),
                                                                std::move(weights), options));
  }
  std::unique_ptr<GpuTransformer> m(
      new GpuTransformer(file, config, weights, std::move(device), *plan, mtp));
  m->host_n_threads_ = options.n_threads;
  GLM_RETURN_IF_ERROR(m->upload(weights, options.progress));
  if (mtp) GLM_RETURN_IF_ERROR(m->upload_mtp(weights));
  for (int l = n_cpu; l < static_cast<int>(host_experts.size()); ++l) {
    const MoeWeights& e = host_experts[l];
    if (!e.present()) continue;
    if (m->host_ == nullptr) {
      m->host_ = std::make_unique<HostExperts>();
      m->host_->weights.layers.resize(n_layer);
      m->host_->bias.resize(n_layer);
      m->host_->pool = std::make_unique<kernels::ThreadPool>(options.n_threads);
    }
    HostExperts& h = *m->host_;
    MoeWeights& hm = h.weights.layers[l].moe;
    hm = e;
    if (e.exp_probs_b != nullptr) {  // copied: it may live in `weights`' converted tensors
      h.bias[l].assign(e.exp_probs_b, e.exp_probs_b + config.moe.n_expert);
      hm.exp_probs_b = h.bias[l].data();
    }
    for (const kernels::WeightView* v : {&e.gate_inp, &e.gate_exps, &e.up_exps, &e.down_exps}) {
      h.bytes += row_bytes(v->type, v->n_cols) * static_cast<size_t>(v->n_rows);
    }
    m->layers_[l - n_cpu].host_moe = &hm;
  }
  if (n_cpu > 0) {
    // The CPU keeps layers [0, n_cpu): the others' views are dropped before it repacks.
    for (int l = n_cpu; l < n_layer; ++l) weights.layers[l] = LayerWeights{};
    weights.output = kernels::WeightView{};
    weights.mtp = MtpWeights{};
    m->cpu_ = std::make_unique<Transformer>(std::move(file), std::move(config), std::move(weights),
                                            options);
    GLM_LOG_INFO("vulkan: layers %d-%d on the GPU, 0-%d on the CPU", n_cpu, n_layer - 1, n_cpu - 1);
  }
  if (m->host_ != nullptr) {
    // After the upload: repacking releases the mapped pages it copies.
    HostExperts& h = *m->host_;
    if (options.repack) repack(&h.weights, h.pool.get());
    int first = -1, last = -1;
    for (int l = n_cpu; l < n_layer; ++l) {
      if (m->layers_[l - n_cpu].host_moe == nullptr) continue;
      if (first < 0) first = l;
      last = l;
    }
    const std::string layers = first == last
                                   ? "layer " + std::to_string(first)
                                   : "layers " + std::to_string(first) + "-" + std::to_string(last);
    GLM_LOG_INFO("vulkan: the router and routed experts of %s in host memory (%s; --cpu-moe%s%s)",
                 layers.c_str(), format_gib(h.bytes).c_str(),
                 options.cpu_moe == kCpuMoeAuto ? " auto: " : "", cpu_moe_why.c_str());
  }
  return std::unique_ptr<Model>(std::move(m));
}

int GpuTransformer::auto_cpu_moe(const gpu::Device& device, const Config& config, Weights* weights,
                                 Widths widths, const LoadOptions& options, std::string* why) {
  if (config.moe.n_expert == 0 || options.gpu_layers != -1) return 0;
  *why = "the whole model does not fit";
  // Plans alone (byte arithmetic), a leading layer's experts more each time; *weights as it was.
  for (int n = 0; n <= config.n_layer; ++n) {
    std::vector<MoeWeights> taken;
    take_host_experts(weights, n, &taken);
    const StatusOr<GpuLayerPlan> p =
        GpuModel::plan(device, config, *weights, widths, options, -1, /*quiet=*/true);
    for (size_t l = 0; l < taken.size(); ++l) restore_experts(taken[l], &weights->layers[l].moe);
    if (p.ok() && p->n_gpu == config.n_layer) return n;
    if (n == 0 && p.ok() && !p->too_large.empty()) *why = p->why_too_large(device.info().name);
  }
  return kAllLayers;  // not even then: every layer's experts on the host, and a split
}

void GpuTransformer::take_host_experts(Weights* weights, int cpu_moe,
                                       std::vector<MoeWeights>* saved) {
  saved->assign(weights->layers.size(), MoeWeights{});
  for (int l = 0; l < static_cast<int>(weights->layers.size()) && l < cpu_moe; ++l) {
    MoeWeights& m = weights->layers[l].moe;
    if (!m.present()) continue;  // a dense layer (GLM-4.5's first)
    MoeWeights& e = (*saved)[l];
    e.gate_inp = m.gate_inp;
    e.exp_probs_b = m.exp_probs_b;
    e.gate_exps = m.gate_exps;
    e.up_exps = m.up_exps;
    e.down_exps = m.down_exps;  // the shared expert stays: the device runs it
    m.gate_inp = {};
    m.exp_probs_b = nullptr;
    m.gate_exps = {};
    m.up_exps = {};
    m.down_exps = {};
  }
}

Status GpuTransformer::upload(const Weights& w, const ProgressFn& progress) {
  Uploader up{device_.get(), plan_.weights, 0, progress, &file_->mapping()};
  layers_.resize(w.layers.size() - n_cpu_);
  for (size_t l = n_cpu_; l < w.layers.size(); ++l) {
    GLM_RETURN_IF_ERROR(
        upload_layer(&up, w.layers[l], &layers_[l - n_cpu_], "layer " + std::to_string(l)));
  }
  return upload_head(w, &up);
}

Status GpuTransformer::upload_layer(Uploader* u, const LayerWeights& lw, Layer* layer,
                                    const std::string& name) {
  Uploader& up = *u;
  Layer& g = *layer;
  const Config& c = config_;
  GLM_RETURN_IF_ERROR(up.vec(lw.attn_norm, c.n_embd, &g.attn_norm));
  GLM_RETURN_IF_ERROR(up.matrix(lw.qkv, &g.qkv, name));
  GLM_RETURN_IF_ERROR(up.vec(lw.qkv_b, c.q_dim() + 2 * c.kv_dim(), &g.qkv_b));
  // llama's separate q, k and v (and gate and up) stacked into one matrix where their types
  // agree, as ChatGLM's files have them: one matmul (and its dispatch) for them all.
  StatusOr<bool> qkv = up.stacked({&lw.wq, &lw.wk, &lw.wv}, &g.qkv, name);
  if (!qkv.ok()) return qkv.status();
  if (*qkv) {
    GLM_RETURN_IF_ERROR(
        up.vecs({lw.bq, lw.bk, lw.bv}, {c.q_dim(), c.kv_dim(), c.kv_dim()}, &g.qkv_b));
  } else {
    GLM_RETURN_IF_ERROR(up.matrix(lw.wq, &g.wq, name));
    GLM_RETURN_IF_ERROR(up.matrix(lw.wk, &g.wk, name));
    GLM_RETURN_IF_ERROR(up.matrix(lw.wv, &g.wv, name));
    GLM_RETURN_IF_ERROR(up.vec(lw.bq, c.q_dim(), &g.bq));
    GLM_RETURN_IF_ERROR(up.vec(lw.bk, c.kv_dim(), &g.bk));
    GLM_RETURN_IF_ERROR(up.vec(lw.bv, c.kv_dim(), &g.bv));
  }
  GLM_RETURN_IF_ERROR(
      up.vecs({lw.attn_q_norm, lw.attn_k_norm}, {c.head_dim, c.head_dim}, &g.qk_norm));
  GLM_RETURN_IF_ERROR(up.matrix(lw.wo, &g.wo, name));
  GLM_RETURN_IF_ERROR(up.vec(lw.ffn_norm, c.n_embd, &g.ffn_norm));
  StatusOr<bool> gate_up = up.stacked({&lw.ffn_gate, &lw.ffn_up}, &g.ffn_up, name);
  if (!gate_up.ok()) return gate_up.status();
  g.gate_up_stacked = *gate_up;
  if (!g.gate_up_stacked) {
    GLM_RETURN_IF_ERROR(up.matrix(lw.ffn_up, &g.ffn_up, name));
    GLM_RETURN_IF_ERROR(up.matrix(lw.ffn_gate, &g.ffn_gate, name));
  }
  GLM_RETURN_IF_ERROR(up.matrix(lw.ffn_down, &g.ffn_down, name));
  GLM_RETURN_IF_ERROR(up.vec(lw.ffn_down_b, c.n_embd, &g.ffn_down_b));
  GLM_RETURN_IF_ERROR(up.vec(lw.attn_post_norm, c.n_embd, &g.attn_post_norm));
  GLM_RETURN_IF_ERROR(up.vec(lw.ffn_post_norm, c.n_embd, &g.ffn_post_norm));
  const MoeWeights& m = lw.moe;
  GLM_RETURN_IF_ERROR(up.matrix(m.gate_inp, &g.gate_inp, name));
  GLM_RETURN_IF_ERROR(up.vec(m.exp_probs_b, c.moe.n_expert, &g.exp_probs_b));
  // Each expert's gate and up rows together (one matmul of the experts for both), and the
  // shared expert's, where their types agree.
  StatusOr<bool> exps =
      up.stacked({&m.gate_exps, &m.up_exps}, &g.gate_up_exps, name, c.moe.n_expert);
  if (!exps.ok()) return exps.status();
  if (!*exps) {
    GLM_RETURN_IF_ERROR(up.matrix(m.gate_exps, &g.gate_exps, name, /*experts=*/true));
    GLM_RETURN_IF_ERROR(up.matrix(m.up_exps, &g.up_exps, name, /*experts=*/true));
  }
  GLM_RETURN_IF_ERROR(up.matrix(m.down_exps, &g.down_exps, name, /*experts=*/true));
  StatusOr<bool> shexp = up.stacked({&m.gate_shexp, &m.up_shexp}, &g.gate_up_shexp, name);
  if (!shexp.ok()) return shexp.status();
  if (!*shexp) {
    GLM_RETURN_IF_ERROR(up.matrix(m.gate_shexp, &g.gate_shexp, name));
    GLM_RETURN_IF_ERROR(up.matrix(m.up_shexp, &g.up_shexp, name));
  }
  GLM_RETURN_IF_ERROR(up.matrix(m.down_shexp, &g.down_shexp, name));
  GLM_RETURN_IF_ERROR(up.matrix(lw.wq_a, &g.wq_a, name));
  GLM_RETURN_IF_ERROR(up.vec(lw.q_a_norm, c.mla.q_lora, &g.q_a_norm));
  if (lw.wq_b.data != nullptr) {
    // wq_b's rows regrouped (the file's go head by head, nope then rope): every head's nope
    // rows, then every head's rope rows, so that a token's nope parts are one run of rows
    // [n_head, nope] (latent_attention's per-head input, as it is for one token).
    const int kh = c.mla.k_head, nope = c.mla_nope();
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (int h = 0; h < c.n_head; ++h) runs.emplace_back(int64_t{h} * kh, nope);
    for (int h = 0; h < c.n_head; ++h) runs.emplace_back(int64_t{h} * kh + nope, kh - nope);
    GLM_RETURN_IF_ERROR(up.rows(lw.wq_b, runs, &g.wq_b, name));
  }
  GLM_RETURN_IF_ERROR(up.matrix(lw.wkv_a, &g.wkv_a, name));
  GLM_RETURN_IF_ERROR(up.vec(lw.kv_a_norm, c.mla.kv_lora, &g.kv_a_norm));
  GLM_RETURN_IF_ERROR(up.matrix(lw.wk_b, &g.wk_b, name, /*experts=*/true));
  GLM_RETURN_IF_ERROR(up.matrix(lw.wv_b, &g.wv_b, name, /*experts=*/true));
  return Status::Ok();
}

void GpuTransformer::project(gpu::Stream& st, const gpu::Matrix& w, gpu::MatmulInput in,
                             const gpu::Buffer& bias, const gpu::Buffer& post_norm, gpu::Addr x,
                             int n, int l, GpuLoraPair GpuLoraLayer::*lora) {
  const int d = config_.n_embd;
  if (post_norm.valid()) {
    // glm4: x += RMSNorm(proj_); cur_ [n, n_embd] is free here (its sub-block has run).
    gpu::matmul(st, w, in, at(proj_), n, d, 0, {at(bias), false});  // [n, n_embd]
    add_lora(st, l, lora, in.f32, at(proj_), d, 0);
    gpu::rms_norm(st, at(proj_), at(post_norm), at(cur_), n, d, config_.norm_eps);
    gpu::add(st, at(cur_), x, static_cast<int64_t>(n) * d);
  } else {
    gpu::matmul(st, w, in, x, n, d, 0, {at(bias), true});  // x += w in (+ bias)
    add_lora(st, l, lora, in.f32, x, d, 0);
  }
}

void GpuTransformer::moe(gpu::Stream& st, const Layer& g, const gpu::MatmulInput& in, gpu::Addr x,
                         int n) const {
  const Config& c = config_;
  const MoeConfig& m = c.moe;
  const int d = c.n_embd, k = m.n_expert_used, fe = m.n_ff_exp, slots = n * k;
  const MoeScratch o(c, n);
  const gpu::Addr ids = at(moe_, o.ids), weights = at(moe_, o.weights), up = at(moe_, o.up),
                  act = at(moe_, o.act), down = at(moe_, o.down);
  gpu::matmul(st, g.gate_inp, in, at(moe_, o.logits), n);  // [n, n_expert]
  gpu::MoeRouteArgs route;
  route.logits = at(moe_, o.logits);
  route.bias = at(g.exp_probs_b);
  route.ids = ids;
  route.weights = weights;
  route.n_tokens = n;
  route.n_expert = m.n_expert;
  route.k = k;
  route.norm = m.weights_norm;
  route.scale = m.weights_scale;
  gpu::moe_route(st, route);
  // Each slot's expert: gate and up from its token's row, SwiGLU, down from its own row. From
  // as many tokens as the dense matmuls tile (a prefill), the slots grouped by expert so that
  // each expert's rows are read once per 64 of its slots; else a slot at a time (decode).
  if (gpu::groups_expert_slots(n)) {
    GLM_CHECK(in.fused == gpu::MatmulInput::Fused::kNone);  // (no fused input at this size)
    gpu::ExpertGroups groups;
    groups.slots = at(moe_, o.lists);
    groups.counts = at(moe_, o.counts);
    groups.n_expert = m.n_expert;
    groups.cap = n;
    gpu::moe_group(st, ids, slots, groups);
    // up [slots, 2 n_ff_exp]: gate, then up (one matmul where the experts' rows are stacked).
    if (g.gate_up_exps.buf.valid()) {
      gpu::matmul_experts_grouped(st, g.gate_up_exps, 2 * fe, groups, in.f32, k, up, 2 * fe, 0);
    } else {
      gpu::matmul_experts_grouped(st, g.gate_exps, fe, groups, in.f32, k, up, 2 * fe, 0);
      gpu::matmul_experts_grouped(st, g.up_exps, fe, groups, in.f32, k, up, 2 * fe, fe);
    }
    gpu::swiglu(st, up, act, slots, fe, 2 * fe, 0, fe);
    gpu::matmul_experts_grouped(st, g.down_exps, d, groups, act, 1, down, d, 0);
  } else {
    if (g.gate_up_exps.buf.valid() && gpu::fuses_activation(1)) {
      // act [slots, n_ff_exp]: SwiGLU applied as the stacked gate and up rows' products are
      // written.
      gpu::matmul_experts(st, g.gate_up_exps, 2 * fe, ids, in, k, act, slots, fe, 0,
                          gpu::MatmulAct::kSwigluPairs);
    } else {
      if (g.gate_up_exps.buf.valid()) {
        gpu::matmul_experts(st, g.gate_up_exps, 2 * fe, ids, in, k, up, slots, 2 * fe, 0);
      } else {
        gpu::matmul_experts(st, g.gate_exps, fe, ids, in, k, up, slots, 2 * fe, 0);
        gpu::matmul_experts(st, g.up_exps, fe, ids, in, k, up, slots, 2 * fe, fe);
      }
      gpu::swiglu(st, up, act, slots, fe, 2 * fe, 0, fe);
    }
    gpu::matmul_experts(st, g.down_exps, d, ids, act, 1, down, slots, d, 0);
  }
  shared_expert(st, g, in, x, n);
  gpu::moe_combine(st, down, weights, x, n, k, d);  // x += the slots' outputs, weighted
}

void GpuTransformer::shared_expert(gpu::Stream& st, const Layer& g, const gpu::MatmulInput& in,
                                   gpu::Addr x, int n) const {
  if (!g.gate_up_shexp.buf.valid() && !g.gate_shexp.buf.valid()) return;
  // On every token: x += its output.
  const int d = config_.n_embd;
  const gpu::Matrix& gate_up = g.gate_up_shexp;
  if (gate_up.buf.valid() && gpu::fuses_activation(n)) {
    // act_ [n, fs]: SwiGLU applied as the stacked gate and up rows' products are written.
    const int fs = static_cast<int>(gate_up.n_rows / 2);
    gpu::matmul(st, gate_up, in, at(act_), n, fs, 0, {0, false, gpu::MatmulAct::kSwigluPairs});
  } else {
    // up_ [n, 2 fs]: gate, then up.
    const int fs = static_cast<int>(gate_up.buf.valid() ? gate_up.n_rows / 2 : g.gate_shexp.n_rows);
    if (gate_up.buf.valid()) {
      gpu::matmul(st, gate_up, in, at(up_), n);
    } else {
      gpu::matmul(st, g.gate_shexp, in, at(up_), n, 2 * fs, 0);
      gpu::matmul(st, g.up_shexp, in, at(up_), n, 2 * fs, fs);
    }
    gpu::swiglu(st, at(up_), at(act_), n, fs, 2 * fs, 0, fs);
  }
  gpu::matmul(st, g.down_shexp, at(act_), x, n, d, 0, {0, true});
}

Status GpuTransformer::host_moe(gpu::Stream& st, const Layer& g, gpu::Addr x, int n) {
  HostExperts& h = *host_;
  const size_t bytes = static_cast<size_t>(n) * config_.n_embd * kF;
  for (gpu::Buffer* b : {&h.rows, &h.out}) {
    if (b->size() >= bytes) continue;
    const gpu::MemoryKind kind =
        b == &h.rows ? gpu::MemoryKind::kReadback : gpu::MemoryKind::kUpload;
    StatusOr<gpu::Buffer> made = device_->alloc(bytes, kind);
    if (!made.ok()) return made.status();
    *b = std::move(*made);
  }
  st.copy(cur_, 0, h.rows, 0, bytes);  // cur_ [n, n_embd]: the layer's ffn-normed rows
  GLM_RETURN_IF_ERROR(st.submit_and_wait());
  // out [n, n_embd] = the chosen experts' weighted sum (g.host_moe has no shared expert).
  h.ffn.forward(*g.host_moe, config_, static_cast<const float*>(h.rows.mapped()), n,
                static_cast<float*>(h.out.mapped()), h.pool.get());
  st.begin();
  st.copy(h.out, 0, proj_, 0, bytes);
  gpu::add(st, at(proj_), x, static_cast<int64_t>(n) * config_.n_embd);  // x += out
  shared_expert(st, g, at(cur_), x, n);
  return Status::Ok();
}

void GpuTransformer::qkv_attention(gpu::Stream& st, const std::vector<SeqInput>& batch,
                                   const Step& step, const Layer& g, const CacheRef& cache,
                                   const gpu::MatmulInput& cur, gpu::Addr x, int l) {
  const Config& c = config_;
  const int n = step.n;
  const int qd = c.q_dim(), kd = c.kv_dim(), w = qd + 2 * kd;
  // qkv_ [n, q_dim + 2 kv_dim]: per token its q heads, k heads, v heads.
  // Biases are added by the matmuls as they write (gpu::MatmulOut).
  // Sequences with a LoRA add theirs (add_lora) after each product.
  if (g.qkv.buf.valid()) {
    gpu::matmul(st, g.qkv, cur, at(qkv_), n, w, 0, {at(g.qkv_b), false});
    add_lora(st, l, &GpuLoraLayer::qkv, at(cur_), at(qkv_), w, 0);
    // (A llama file's q, k and v stacked at upload: their LoRA pairs.)
    add_lora(st, l, &GpuLoraLayer::wq, at(cur_), at(qkv_), w, 0);
    add_lora(st, l, &GpuLoraLayer::wk, at(cur_), at(qkv_), w, qd);
    add_lora(st, l, &GpuLoraLayer::wv, at(cur_), at(qkv_), w, qd + kd);
  } else {
    gpu::matmul(st, g.wq, cur, at(qkv_), n, w, 0, {at(g.bq), false});
    gpu::matmul(st, g.wk, cur, at(qkv_), n, w, qd, {at(g.bk), false});
    gpu::matmul(st, g.wv, cur, at(qkv_), n, w, qd + kd, {at(g.bv), false});
    add_lora(st, l, &GpuLoraLayer::wq, at(cur_), at(qkv_), w, 0);
    add_lora(st, l, &GpuLoraLayer::wk, at(cur_), at(qkv_), w, qd);
    add_lora(st, l, &GpuLoraLayer::wv, at(cur_), at(qkv_), w, qd + kd);
  }
  if (g.qk_norm.valid()) {  // GLM-4.5: each q head, then each k head, normed before the rotary
    gpu::head_norm(st, at(qkv_), at(g.qk_norm), n, w, c.n_head + c.n_head_kv, c.n_head, c.head_dim,
                   c.norm_eps);
  }
  // The q heads and the k heads after them rotated as the K/V rows are stored: one dispatch.
  const Rope rope{c.rope_neox ? gpu::RopeKind::kNeox : gpu::RopeKind::kInterleaved, c.n_rot};
  const gpu::MatmulInput attn = attn_input(g.wo, n);  // attn_ [n, q_dim] (and its 8-bit rows)
  attend(st, batch, step, cache, /*bidir_prefix=*/nullptr, l, &rope, attn.q8);
  project(st, g.wo, attn, gpu::Buffer(), g.attn_post_norm, x, n, l, &GpuLoraLayer::wo);
}

Status GpuTransformer::run_layer(gpu::Stream& st, const std::vector<SeqInput>& batch,
                                 const Step& step, const Layer& g, const CacheRef& cache, int l) {
  const Config& c = config_;
  const int d = c.n_embd, n = step.n;
  const int ff = c.n_ff;
  const gpu::Addr x = at(in_dev_, step.x);  // [n, n_embd] residual stream, updated in place
  // The norms run inside the matmuls after them where those can take them (gpu::fuses_input: a
  // few tokens) and no LoRA of the step reads their rows; else they are dispatches of their own,
  // which write 8-bit rows beside their f32 ones where the next matmul takes them
  // (gpu::uses_int_dot; q8_rows): no dispatch of the matmul's own to quantize.
  const bool no_lora = l < 0 || lora_rows_.empty();
  const bool fuse_norms = no_lora && gpu::fuses_input(n);
  const gpu::Matrix& first = g.qkv.buf.valid() ? g.qkv : (c.is_mla() ? g.wq_a : g.wq);
  const gpu::MatmulInput cur = fuse_norms
                                   ? gpu::MatmulInput::rms_normed(x, at(g.attn_norm), c.norm_eps)
                                   : gpu::MatmulInput{at(cur_), q8_rows(cur_q8_, first, n)};
  if (cur.fused == gpu::MatmulInput::Fused::kNone) {
    gpu::rms_norm(st, x, at(g.attn_norm), cur.f32, n, d, c.norm_eps, 0, cur.q8);
  }
  if (c.is_mla()) {
    latent_attention(st, batch, step, g, cache, cur, x, l);
  } else {
    qkv_attention(st, batch, step, g, cache, cur, x, l);
  }
  // The MoE layers quantize their experts' rows themselves (gpu::matmul_experts); one whose
  // experts are on the host reads its normed rows back from cur_.
  const bool moe_layer =
      g.host_moe != nullptr || g.gate_up_exps.buf.valid() || g.gate_exps.buf.valid();
  const gpu::MatmulInput ffn_in =
      g.host_moe == nullptr && fuse_norms
          ? gpu::MatmulInput::rms_normed(x, at(g.ffn_norm), c.norm_eps)
          : gpu::MatmulInput{
                at(cur_),
                moe_layer ? 0
                          : q8_rows(cur_q8_, g.ffn_gate.buf.valid() ? g.ffn_gate : g.ffn_up, n)};
  if (ffn_in.fused == gpu::MatmulInput::Fused::kNone) {
    gpu::rms_norm(st, x, at(g.ffn_norm), ffn_in.f32, n, d, c.norm_eps, 0, ffn_in.q8);
  }
  if (g.host_moe != nullptr) return host_moe(st, g, x, n);  // --cpu-moe
  if (moe_layer) {  // glm4moe's MoE layers (no LoRA on experts, as on the CPU)
    moe(st, g, ffn_in, x, n);
    return Status::Ok();
  }
  // act_ [n, n_ff] = SwiGLU(gate, up): applied by the gate-and-up matmul as it writes where it
  // can (gpu::fuses_activation: a few tokens, one matrix, no LoRA of the step adding to its
  // products; the down projection then quantizes act_ itself where it takes 8 bits: in its
  // teams or by a dispatch, gpu::MatmulTuning::fuse); else the products in up_ [n, 2 n_ff] (per
  // token gate, then up), their LoRA, and a dispatch of its own.
  gpu::MatmulInput act{at(act_), q8_rows(act_q8_, g.ffn_down, n)};
  if (!g.ffn_gate.buf.valid() && no_lora && gpu::fuses_activation(n)) {
    gpu::matmul(st, g.ffn_up, ffn_in, act.f32, n, ff, 0, {0, false, gpu::MatmulAct::kSwigluPairs});
    act.q8 = 0;
  } else {
    if (g.ffn_gate.buf.valid()) {
      gpu::matmul(st, g.ffn_gate, ffn_in, at(up_), n, 2 * ff, 0);
      gpu::matmul(st, g.ffn_up, ffn_in, at(up_), n, 2 * ff, ff);
    } else {
      gpu::matmul(st, g.ffn_up, ffn_in, at(up_), n);
    }
    // A llama file's gate and up pairs (up's at n_ff), or a fused matrix's one pair.
    const bool llama_pairs = g.ffn_gate.buf.valid() || g.gate_up_stacked;
    add_lora(st, l, &GpuLoraLayer::ffn_gate, at(cur_), at(up_), 2 * ff, 0);
    add_lora(st, l, &GpuLoraLayer::ffn_up, at(cur_), at(up_), 2 * ff, llama_pairs ? ff : 0);
    gpu::swiglu(st, at(up_), act.f32, n, ff, 2 * ff, 0, ff, act.q8);
  }
  project(st, g.ffn_down, act, g.ffn_down_b, g.ffn_post_norm, x, n, l, &GpuLoraLayer::ffn_down);
  return Status::Ok();
}

void GpuTransformer::rope_tables(const std::vector<SeqInput>& batch, const Step& step) const {
  const Config& c = config_;
  const int half = c.n_rot / 2;
  int t = 0;
  for (const SeqInput& in : batch) {
    for (int i = 0; i < in.n_tokens; ++i, ++t) {
      ops::rope_table(in.n_past + i, c.n_rot, c.rope_base, step.cs + static_cast<size_t>(t) * half,
                      step.sn + static_cast<size_t>(t) * half, c.rope_freq_scale);
    }
  }
}

Status GpuTransformer::forward(const std::vector<SeqInput>& batch, KvPool* kv,
                               std::vector<float>* out, OutputKind kind) {
  const Config& c = config_;
  GLM_RETURN_IF_ERROR(validate_batch(c, batch, kv));
  if (batch.empty()) return Status::Ok();
  bool want_hidden = false;
  for (const SeqInput& in : batch) want_hidden |= in.hidden_out != nullptr;
  if (want_hidden && mtp_ == nullptr) {
    return invalid_argument("hidden_out: this model has no MTP block on the GPU");
  }
  Step step;
  GLM_RETURN_IF_ERROR(begin_step(batch, kv, &step));
  if (want_hidden) GLM_RETURN_IF_ERROR(reserve_hidden(step.n));
  GLM_RETURN_IF_ERROR(prepare_lora(batch, step.n));
  if (cpu_ != nullptr) {  // layers [0, n_cpu_) on the CPU: their output is the GPU's input
    cpu_x_.clear();
    GLM_RETURN_IF_ERROR(cpu_->forward_layers(batch, kv, n_cpu_, &cpu_x_));
  }
  const int d = c.n_embd, n = step.n;
  int t = 0;
  for (const SeqInput& in : batch) {
    for (int i = 0; i < in.n_tokens; ++i, ++t) {
      float* x = step.xs + static_cast<size_t>(t) * d;
      if (cpu_ == nullptr) {
        embed(in.tokens[i], x);
      } else {
        std::memcpy(x, cpu_x_.data() + static_cast<size_t>(t) * d, d * kF);
      }
    }
  }
  rope_tables(batch, step);

  gpu::Stream& st = record(step);
  const gpu::Addr x = at(in_dev_, step.x);  // [n, n_embd] residual stream, updated in place
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {  // model layer n_cpu_ + l
    GLM_RETURN_IF_ERROR(run_layer(st, batch, step, layers_[l], layer_cache(l), l));
  }
  if (want_hidden) {  // every token's final-norm row (the MTP block's input), read back
    gpu::rms_norm(st, x, at(output_norm_), at(cur_), n, d, c.norm_eps);
    st.copy(cur_, 0, hidden_host_, 0, static_cast<size_t>(n) * d * kF);
  }
  // rows_ [R, n_embd]: the final norm of the rows to output (and their 8-bit blocks where the
  // head takes them: head_q8).
  gpu::rms_norm(st, x, at(output_norm_), at(rows_), step.n_out, d, c.norm_eps,
                at(in_dev_, step.rows), head_q8(nullptr, step.n_out, kind));
  GLM_RETURN_IF_ERROR(finish_step(st, step, kind, out));
  if (want_hidden) {
    const float* h = static_cast<const float*>(hidden_host_.mapped());
    t = 0;
    for (const SeqInput& in : batch) {
      const size_t floats = static_cast<size_t>(in.n_tokens) * d;
      if (in.hidden_out != nullptr)
        std::memcpy(in.hidden_out, h + static_cast<size_t>(t) * d, floats * kF);
      t += in.n_tokens;
    }
  }
  return Status::Ok();
}

}  // namespace glm::model
