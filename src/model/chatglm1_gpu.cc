#include "model/chatglm1_gpu.h"

#include <string>

#include "core/bytes.h"
#include "core/log.h"
#include "model/chatglm1.h"
#include "model/transformer.h"

namespace glm::model {

GpuChatGLM1::GpuChatGLM1(std::shared_ptr<const gguf::File> file, const Config& config,
                         const Weights& weights, float alpha, std::unique_ptr<gpu::Device> device,
                         const GpuLayerPlan& plan)
    : GpuModel(std::move(file), config, weights.token_embd, std::move(device), plan,
               widths(config)),
      alpha_(alpha) {}

GpuModel::Widths GpuChatGLM1::widths(const Config& config) {
  // Rotary tables [T, 2 (position, block position), head_dim / 4]; up_ [T, n_ff], GELU'd in
  // place: the down projection's input.
  Widths w;
  w.rot = 2 * (config.head_dim / 4);
  w.up = w.down_in = config.n_ff;
  return w;
}

StatusOr<std::unique_ptr<Model>> GpuChatGLM1::create(std::shared_ptr<const gguf::File> file,
                                                     const Config& config, const Weights& weights,
                                                     float alpha,
                                                     std::unique_ptr<gpu::Device> device,
                                                     const LoadOptions& options) {
  if (options.gpu_layers > 0 && options.gpu_layers < config.n_layer) {
    return unsupported("--gpu-layers " + std::to_string(options.gpu_layers) +
                       ": ChatGLM-6B (v1) runs all its layers on the GPU or none; a split with "
                       "the CPU is not built for it (use --gpu-layers -1, or 0 for the CPU)");
  }
  GLM_RETURN_IF_ERROR(check_head_dim(config));
  // All layers or none: left to itself (-1), a model that does not fit whole runs on the CPU.
  const int asked = options.gpu_layers < 0 ? -1 : config.n_layer;
  StatusOr<GpuLayerPlan> plan =
      GpuModel::plan(*device, config, weights, widths(config), options, asked);
  if (!plan.ok()) return plan.status();
  if (plan->n_gpu < config.n_layer) {
    if (!plan->too_large.empty()) {
      GLM_LOG_WARN("vulkan: ChatGLM-6B (v1): %s; running on the CPU",
                   plan->why_too_large(device->info().name).c_str());
    } else {
      GLM_LOG_WARN(
          "vulkan: ChatGLM-6B (v1) does not fit whole in %s's %s (%d of %d layers would);"
          " running on the CPU",
          device->info().name.c_str(), format_gib(plan->budget).c_str(), plan->n_gpu,
          config.n_layer);
    }
    return load_chatglm1(std::move(file), config, options);
  }
  std::unique_ptr<GpuChatGLM1> m(
      new GpuChatGLM1(std::move(file), config, weights, alpha, std::move(device), *plan));
  m->host_n_threads_ = options.n_threads;
  GLM_RETURN_IF_ERROR(m->upload(weights, options.progress));
  return std::unique_ptr<Model>(std::move(m));
}

Status GpuChatGLM1::upload(const Weights& w, const ProgressFn& progress) {
  Uploader up{device_.get(), plan_.weights, 0, progress, &file_->mapping()};
  const int d = config_.n_embd;
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    Layer& g = layers_[l];
    const std::string name = "layer " + std::to_string(l);
    GLM_RETURN_IF_ERROR(up.vec(lw.attn_norm, d, &g.attn_norm));
    GLM_RETURN_IF_ERROR(up.vec(lw.attn_norm_b, d, &g.attn_norm_b));
    GLM_RETURN_IF_ERROR(up.matrix(lw.qkv, &g.qkv, name));
    GLM_RETURN_IF_ERROR(up.vec(lw.qkv_b, 3 * d, &g.qkv_b));
    GLM_RETURN_IF_ERROR(up.matrix(lw.wo, &g.wo, name));
    GLM_RETURN_IF_ERROR(up.vec(lw.wo_b, d, &g.wo_b));
    GLM_RETURN_IF_ERROR(up.vec(lw.ffn_norm, d, &g.ffn_norm));
    GLM_RETURN_IF_ERROR(up.vec(lw.ffn_norm_b, d, &g.ffn_norm_b));
    GLM_RETURN_IF_ERROR(up.matrix(lw.ffn_up, &g.ffn_up, name));
    GLM_RETURN_IF_ERROR(up.vec(lw.ffn_up_b, config_.n_ff, &g.ffn_up_b));
    GLM_RETURN_IF_ERROR(up.matrix(lw.ffn_down, &g.ffn_down, name));
    GLM_RETURN_IF_ERROR(up.vec(lw.ffn_down_b, d, &g.ffn_down_b));
  }
  return upload_head(w, &up);
}

Status GpuChatGLM1::forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                            OutputKind kind) {
  const Config& c = config_;
  GLM_RETURN_IF_ERROR(validate_batch(c, batch, kv));
  GLM_RETURN_IF_ERROR(chatglm1::prompt_lengths(batch, "ChatGLM-6B (v1)", &prefixes_));
  if (batch.empty()) return Status::Ok();
  Step step;
  GLM_RETURN_IF_ERROR(begin_step(batch, kv, &step));
  // Prompt rows see the whole prompt but <sop> (its last position) only from <sop> on:
  // the attention's bidirectional prefix of prompt length - 1 positions.
  bidir_.resize(batch.size());
  const int d = c.n_embd, hd = c.head_dim, rot = widths_.rot, n = step.n, ff = c.n_ff;
  int t = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SeqInput& in = batch[s];
    bidir_[s] = prefixes_[s] - 1;
    for (int i = 0; i < in.n_tokens; ++i, ++t) {
      embed(in.tokens[i], step.xs + static_cast<size_t>(t) * d);
      chatglm1::rope_rows(c, in.n_past + i, prefixes_[s], step.cs + static_cast<size_t>(t) * rot,
                          step.sn + static_cast<size_t>(t) * rot);
    }
  }

  gpu::Stream& st = record(step);
  // [n, n_embd] the residual stream: between the sub-blocks it moves to cur_ and back.
  const gpu::Addr x = at(in_dev_, step.x);
  const gpu::Addr cos_a = at(in_dev_, step.cos), sin_a = at(in_dev_, step.sin);
  const int64_t nd = static_cast<int64_t>(n) * d;
  for (int l = 0; l < c.n_layer; ++l) {
    const Layer& g = layers_[l];
    // Where the next matmul takes 8-bit activations (gpu::uses_int_dot), the norms and GELU
    // write them beside their f32 rows (q8_rows): no dispatch of the matmul's own to quantize.
    const gpu::MatmulInput cur{at(cur_), q8_rows(cur_q8_, g.qkv, n)};
    gpu::layer_norm(st, x, at(g.attn_norm), at(g.attn_norm_b), cur.f32, n, d, c.norm_eps, 0,
                    cur.q8);
    // qkv_ [n, 3 n_embd]: per token its q heads, k heads, v heads.
    // Biases are added by the matmuls as they write (gpu::MatmulOut).
    gpu::matmul(st, g.qkv, cur, at(qkv_), n, 3 * d, 0, {at(g.qkv_b), false});
    // The q heads and the k heads after them: one rotary over 2 n_head heads.
    gpu::rope(st, at(qkv_), cos_a, sin_a, n, 3 * d, 0, 2 * c.n_head, hd, c.n_rot,
              gpu::RopeKind::kNeox2D);
    const gpu::MatmulInput attn = attn_input(g.wo, n);  // attn_ [n, n_embd] (and 8-bit rows)
    attend(st, batch, step, l, bidir_.data(), attn.q8);
    gpu::matmul(st, g.wo, attn, at(proj_), n, d, 0, {at(g.wo_b), false});  // [n, n_embd]
    // h = LN1(x) * alpha + attn, in cur_ (which holds LN1(x)).
    gpu::scale_add(st, at(proj_), alpha_, at(cur_), nd);
    // x = LN2(h); then x = LN2(h) * alpha + MLP(LN2(h)): the residual stream is back in x.
    const gpu::MatmulInput ffn_in{x, q8_rows(cur_q8_, g.ffn_up, n)};
    gpu::layer_norm(st, at(cur_), at(g.ffn_norm), at(g.ffn_norm_b), x, n, d, c.norm_eps, 0,
                    ffn_in.q8);
    // up_ [n, n_ff] = GELU(up(x) + b): applied by the matmul as it writes where it can
    // (gpu::fuses_activation), else in place (with its 8-bit rows where the down projection
    // takes them; where the matmul applied it, that projection quantizes them itself).
    const bool gelu_out = gpu::fuses_activation(n);
    const gpu::MatmulInput down_in{at(up_), gelu_out ? 0 : q8_rows(act_q8_, g.ffn_down, n)};
    gpu::matmul(st, g.ffn_up, ffn_in, at(up_), n, ff, 0,
                {at(g.ffn_up_b), false, gelu_out ? gpu::MatmulAct::kGelu : gpu::MatmulAct::kNone});
    if (!gelu_out) gpu::gelu(st, at(up_), static_cast<int64_t>(n) * ff, down_in.q8);
    gpu::matmul(st, g.ffn_down, down_in, at(proj_), n, d, 0, {at(g.ffn_down_b), false});
    gpu::scale_add(st, at(proj_), alpha_, x, nd);
  }
  // rows_ [R, n_embd]: the final LayerNorm of the rows to output (and their 8-bit blocks where
  // the head takes them: head_q8).
  gpu::layer_norm(st, x, at(output_norm_), at(output_norm_b_), at(rows_), step.n_out, d, c.norm_eps,
                  at(in_dev_, step.rows), head_q8(nullptr, step.n_out, kind));
  return finish_step(st, step, kind, out);
}

}  // namespace glm::model
