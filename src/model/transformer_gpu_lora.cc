// GpuTransformer's LoRA per request (docs/adapters.md): adapters' pairs on the device, and
// their side path on each sequence's rows.
#include <algorithm>
#include <vector>

#include "model/transformer_gpu.h"

namespace glm::model {
namespace {

constexpr size_t kF = sizeof(float);

}  // namespace

Status GpuTransformer::upload_lora(const Adapter& adapter, GpuLora* out) {
  GpuLora& g = *out;
  g.layers.resize(layers_.size());
  auto upload = [&](const LoraPair& p, GpuLoraPair* dst) -> Status {
    if (p.empty()) return Status::Ok();
    std::vector<float> b(p.b.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = p.b[i] * p.scale;
    StatusOr<gpu::Matrix> ma =
        gpu::upload_matrix(device_.get(), DType::kF32, p.a.data(), p.rank, p.n_in);
    if (!ma.ok()) return ma.status();
    StatusOr<gpu::Matrix> mb =
        gpu::upload_matrix(device_.get(), DType::kF32, b.data(), p.n_out, p.rank);
    if (!mb.ok()) return mb.status();
    dst->a = std::move(*ma);
    dst->b = std::move(*mb);
    g.rank = std::max(g.rank, p.rank);
    return Status::Ok();
  };
  for (size_t l = 0; l < layers_.size() && n_cpu_ + l < adapter.lora.size(); ++l) {
    const LoraLayer& in = adapter.lora[n_cpu_ + l];
    GpuLoraLayer& dst = g.layers[l];
    for (auto [src, to] :
         {std::pair{&in.qkv, &dst.qkv}, std::pair{&in.wq, &dst.wq}, std::pair{&in.wk, &dst.wk},
          std::pair{&in.wv, &dst.wv}, std::pair{&in.wo, &dst.wo},
          std::pair{&in.ffn_up, &dst.ffn_up}, std::pair{&in.ffn_gate, &dst.ffn_gate},
          std::pair{&in.ffn_down, &dst.ffn_down}}) {
      if (Status s = upload(*src, to); !s.ok()) {
        return Status(s.code(), "adapter '" + adapter.name + "' on the GPU: " + s.message());
      }
    }
  }
  return Status::Ok();
}

Status GpuTransformer::prepare_lora(const std::vector<SeqInput>& batch, int n) {
  lora_rows_.clear();
  loras_.next_step();
  int first = 0, rank = 1;
  for (const SeqInput& in : batch) {
    if (in.adapter != nullptr && !in.adapter->lora.empty()) {
      StatusOr<GpuLora*> g =
          loras_.get(in.adapter->id, [&](GpuLora* out) { return upload_lora(*in.adapter, out); });
      if (!g.ok()) return g.status();
      rank = std::max(rank, (*g)->rank);
      lora_rows_.push_back({*g, first, in.n_tokens});
    }
    first += in.n_tokens;
  }
  if (lora_rows_.empty()) return Status::Ok();
  return grow_device(&lora_tmp_, static_cast<size_t>(n) * rank * kF);
}

void GpuTransformer::add_lora(gpu::Stream& st, int l, GpuLoraPair GpuLoraLayer::*pair, gpu::Addr x,
                              gpu::Addr y, int y_stride, int y_col) {
  if (l < 0 || pair == nullptr) return;
  for (const LoraRows& r : lora_rows_) {
    const GpuLoraPair& p = r.lora->layers[l].*pair;
    if (!p.a.buf.valid()) continue;
    const gpu::Addr xr = x + static_cast<gpu::Addr>(r.first) * p.a.n_cols * kF;
    const gpu::Addr yr = y + static_cast<gpu::Addr>(r.first) * y_stride * kF;
    gpu::matmul(st, p.a, xr, at(lora_tmp_), r.n);                              // [n, rank] = A x
    gpu::matmul(st, p.b, at(lora_tmp_), yr, r.n, y_stride, y_col, {0, true});  // y += s B (A x)
  }
}

}  // namespace glm::model
