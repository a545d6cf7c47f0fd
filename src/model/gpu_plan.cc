#include "model/gpu_plan.h"

#include <algorithm>

#include "core/bytes.h"

namespace glm::model {

namespace {

// The plan of the last n layers (their byte counts; too_large is plan_gpu_layers's).
GpuLayerPlan plan_of(const GpuPlanInput& in, size_t scratch, int n) {
  GpuLayerPlan p;
  p.n_layer = static_cast<int>(in.layer_weights.size());
  p.n_gpu = n;
  p.weights = in.head;
  p.scratch = scratch;
  p.budget = in.budget;
  p.max_buffer = in.max_buffer;
  for (int l = p.n_layer - n; l < p.n_layer; ++l) {
    p.weights += in.layer_weights[l];
    p.kv += in.layer_kv[l];
  }
  return p;
}

// Which matrix of the last n layers (or the head) is larger than a buffer; empty if none.
std::string too_large_of(const GpuPlanInput& in, int n) {
  if (in.head_largest > in.max_buffer) {
    return "the output head (" + format_mib(in.head_largest) + ")";
  }
  const int n_layer = static_cast<int>(in.layer_weights.size());
  for (int l = n_layer - 1; l >= n_layer - n; --l) {
    if (in.layer_largest[l] > in.max_buffer) {
      return "layer " + std::to_string(l) + "'s largest matrix (" +
             format_mib(in.layer_largest[l]) + ")";
    }
  }
  return "";
}

}  // namespace

size_t gpu_margin_bytes(size_t budget) { return std::min<size_t>(budget / 10, size_t{512} << 20); }

std::string GpuLayerPlan::describe() const {
  std::string s = std::to_string(n_gpu) + " of " + std::to_string(n_layer) + " layers: weights " +
                  format_gib(weights) + " + KV cache " + format_gib(kv) + " + scratch " +
                  format_gib(scratch) + " = " + format_gib(need());
  return s;
}

std::string GpuLayerPlan::why_too_large(const std::string& device_name) const {
  if (too_large.empty()) return "";
  return too_large + " is larger than a buffer can be on " + device_name + " (" +
         format_mib(max_buffer) + ")";
}

StatusOr<GpuLayerPlan> plan_gpu_layers(const GpuPlanInput& in, int requested,
                                       const std::string& device_name) {
  const size_t n_layer = in.layer_weights.size();
  if (in.layer_kv.size() != n_layer || in.layer_largest.size() != n_layer) {
    return invalid_argument("plan_gpu_layers: one K/V size and largest matrix a layer");
  }
  const size_t scratch = in.scratch + gpu_margin_bytes(in.budget);
  auto fits_budget = [&](int n) {
    return in.budget == 0 || plan_of(in, scratch, n).need() <= in.budget;
  };
  auto fits = [&](int n) { return fits_budget(n) && too_large_of(in, n).empty(); };
  int most = static_cast<int>(n_layer);  // the most that fit (0 also when not even the head does)
  while (most > 0 && !fits(most)) --most;
  // What kept a layer (or all of them) off: a matrix, when the budget alone would take one more
  // (too_large_of(0) looks at the head alone: too large for a buffer, it is said whatever the
  // budget).
  const int asked =
      requested < 0 ? static_cast<int>(n_layer) : std::min(requested, static_cast<int>(n_layer));
  const int blocked = std::min(asked, most + 1);
  const std::string too_large = too_large_of(in, fits_budget(blocked) ? blocked : 0);
  if (requested < 0) {
    GpuLayerPlan p = plan_of(in, scratch, most);
    if (most < asked) p.too_large = too_large;
    return p;
  }
  GpuLayerPlan p = plan_of(in, scratch, asked);
  if (fits(asked)) return p;
  // (A head too large for a buffer is said as the reason, not as "not even the head fits".)
  const std::string hint = most > 0                               ? std::to_string(most) + " fit"
                           : !too_large.empty() || fits_budget(0) ? "no layer fits"
                                                                  : "not even the output head fits";
  if (!too_large.empty()) {
    p.too_large = too_large;
    return unsupported("--gpu-layers " + std::to_string(requested) + ": " +
                       p.why_too_large(device_name) + " (" + hint +
                       "; lower --gpu-layers, or leave it out to put as many as fit)");
  }
  return Status(ErrorCode::kOutOfMemory,
                "--gpu-layers " + std::to_string(requested) + ": " + p.describe() +
                    " do not fit: " + device_name + " has " + format_gib(in.budget) + " (" + hint +
                    "; lower --gpu-layers, --ctx-size or --max-batch, or leave --gpu-layers out " +
                    "to put as many as fit)");
}

}  // namespace glm::model
