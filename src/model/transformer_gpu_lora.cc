// GpuTransformer's LoRA per request (docs/adapters.md): adapters' pairs on the device, and
// their side path on each sequence's rows.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "model/transformer_gpu.h"

namespace glm::model {
namespace {

constexpr size_t kF = sizeof(float);

}  // namespace

Status GpuTransformer::upload_lora(const Adapter& adapter) {
  for (GpuLora& g : loras_) {
    if (g.id == adapter.id) {
      g.used = lora_clock_;
      return Status::Ok();
    }
  }
  if (loras_.size() >= kMaxGpuLoras) {  // the least recently used goes, if not in this step
    auto old = std::min_element(loras_.begin(), loras_.end(),
                                [](const GpuLora& a, const GpuLora& b) { return a.used < b.used; });
    if (old->used < lora_clock_) loras_.erase(old);
  }
  GpuLora g;
  g.id = adapter.id;
  g.used = lora_clock_;
  g.layers.resize(layers_.size());
  auto upload = [&](const LoraPair& p, GpuLoraPair* out) -> Status {
    if (p.empty()) return Status::Ok();
    std::vector<float> b(p.b.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = p.b[i] * p.scale;
    StatusOr<gpu::Matrix> ma =
        gpu::upload_matrix(device_.get(), DType::kF32, p.a.data(), p.rank, p.n_in);
    if (!ma.ok()) return ma.status();
    StatusOr<gpu::Matrix> mb =
        gpu::upload_matrix(device_.get(), DType::kF32, b.data(), p.n_out, p.rank);
    if (!mb.ok()) return mb.status();
    out->a = std::move(*ma);
    out->b = std::move(*mb);
    g.rank = std::max(g.rank, p.rank);
    return Status::Ok();
  };
  for (size_t l = 0; l < layers_.size() && n_cpu_ + l < adapter.lora.size(); ++l) {
    const LoraLayer& in = adapter.lora[n_cpu_ + l];
    GpuLoraLayer& out = g.layers[l];
    for (auto [src, dst] :
         {std::pair{&in.qkv, &out.qkv}, std::pair{&in.wq, &out.wq}, std::pair{&in.wk, &out.wk},
          std::pair{&in.wv, &out.wv}, std::pair{&in.wo, &out.wo},
          std::pair{&in.ffn_up, &out.ffn_up}, std::pair{&in.ffn_gate, &out.ffn_gate},
          std::pair{&in.ffn_down, &out.ffn_down}}) {
      if (Status s = upload(*src, dst); !s.ok()) {
        return Status(s.code(), "adapter '" + adapter.name + "' on the GPU: " + s.message());
      }
    }
  }
  loras_.push_back(std::move(g));
  return Status::Ok();
}

Status GpuTransformer::prepare_lora(const std::vector<SeqInput>& batch, int n) {
  lora_rows_.clear();
  auto has_lora = [](const SeqInput& in) {
    return in.adapter != nullptr && !in.adapter->lora.empty();
  };
  if (std::none_of(batch.begin(), batch.end(), has_lora)) return Status::Ok();
  ++lora_clock_;
  for (const SeqInput& in : batch) {  // every adapter of the step on the device
    if (has_lora(in)) GLM_RETURN_IF_ERROR(upload_lora(*in.adapter));
  }
  int first = 0, rank = 1;
  for (const SeqInput& in : batch) {  // loras_ holds still now: point at its entries
    if (has_lora(in)) {
      auto g = std::find_if(loras_.begin(), loras_.end(),
                            [&](const GpuLora& x) { return x.id == in.adapter->id; });
      GLM_CHECK(g != loras_.end());
      rank = std::max(rank, g->rank);
      lora_rows_.push_back({&*g, first, in.n_tokens});
    }
    first += in.n_tokens;
  }
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
