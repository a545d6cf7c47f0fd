#include "model/gpu_plan.h"

#include <algorithm>
#include <cstdio>

namespace glm::model {

std::string format_gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

namespace {

// The plan of the last n layers.
GpuLayerPlan plan_of(const std::vector<size_t>& layer_weights, const std::vector<size_t>& layer_kv,
                     size_t head, size_t scratch, size_t budget, int n) {
  GpuLayerPlan p;
  p.n_layer = static_cast<int>(layer_weights.size());
  p.n_gpu = n;
  p.weights = head;
  p.scratch = scratch;
  p.budget = budget;
  for (int l = p.n_layer - n; l < p.n_layer; ++l) {
    p.weights += layer_weights[l];
    p.kv += layer_kv[l];
  }
  return p;
}

}  // namespace

size_t gpu_margin_bytes(size_t budget) { return std::min<size_t>(budget / 10, size_t{512} << 20); }

std::string GpuLayerPlan::describe() const {
  std::string s = std::to_string(n_gpu) + " of " + std::to_string(n_layer) + " layers: weights " +
                  format_gib(weights) + " + KV cache " + format_gib(kv) + " + scratch " +
                  format_gib(scratch) + " = " + format_gib(need());
  return s;
}

StatusOr<GpuLayerPlan> plan_gpu_layers(const std::vector<size_t>& layer_weights,
                                       const std::vector<size_t>& layer_kv, size_t head,
                                       size_t scratch, size_t budget, int requested,
                                       const std::string& device_name) {
  if (layer_kv.size() != layer_weights.size()) {
    return invalid_argument("plan_gpu_layers: one K/V size a layer");
  }
  const int n_layer = static_cast<int>(layer_weights.size());
  scratch += gpu_margin_bytes(budget);
  auto fits = [&](int n) {
    return budget == 0 ||
           plan_of(layer_weights, layer_kv, head, scratch, budget, n).need() <= budget;
  };
  int most = n_layer;  // the most layers that fit (0 also when not even the head fits)
  while (most > 0 && !fits(most)) --most;
  if (requested < 0) return plan_of(layer_weights, layer_kv, head, scratch, budget, most);
  const int n = std::min(requested, n_layer);
  GpuLayerPlan p = plan_of(layer_weights, layer_kv, head, scratch, budget, n);
  if (fits(n)) return p;
  std::string hint = most > 0 ? std::to_string(most) + " fit" : "not even the output head fits";
  return Status(ErrorCode::kOutOfMemory,
                "--gpu-layers " + std::to_string(requested) + ": " + p.describe() +
                    " do not fit: " + device_name + " has " + format_gib(budget) + " (" + hint +
                    "; lower --gpu-layers, --ctx-size or --max-batch, or leave --gpu-layers out " +
                    "to put as many as fit)");
}

}  // namespace glm::model
