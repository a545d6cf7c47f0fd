// How many of a model's layers go on the GPU (docs/gpu.md#memory): each layer on the device costs
// its weights and its share of the KV cache; the output head and the step's scratch are needed
// whatever the count. Layers are counted from the last, as llama.cpp's -ngl: the CPU runs the
// first ones and hands its rows on.
// Pure arithmetic over byte counts (no device): tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::model {

struct GpuLayerPlan {
  int n_layer = 0;
  int n_gpu = 0;       // the last n_gpu layers run on the GPU
  size_t weights = 0;  // bytes of those layers' matrices and the output head
  size_t kv = 0;       // bytes of those layers' K/V
  size_t scratch = 0;  // the step's activations and a margin for the driver
  size_t budget = 0;   // what the device offers (DeviceInfo::budget_bytes)
  // When a matrix too large for one of the device's buffers kept layers (or the head, and so
  // every layer) off the GPU: which, "the output head (2368.0 MiB)" or "layer 27's largest
  // matrix (2368.0 MiB)", and the device's largest buffer. Empty when only the budget limited
  // the plan.
  std::string too_large;
  size_t max_buffer = 0;
  size_t need() const { return weights + kv + scratch; }
  // "28 of 40 layers: weights 5.10 GiB + KV cache 1.20 GiB + scratch 0.50 GiB = 6.80 GiB"
  std::string describe() const;
  // "the output head (2368.0 MiB) is larger than a buffer can be on NAME (2048.0 MiB)";
  // empty when too_large is.
  std::string why_too_large(const std::string& device_name) const;
};

// What a plan is made of, in bytes. layer_weights[l], layer_kv[l] and layer_largest[l]: layer
// l's matrices, its K/V and its largest matrix (one buffer on the device), each n_layer long;
// head: the output head's matrices (and the MTP block's), head_largest its largest; scratch: the
// activations of the largest step; budget: what the device offers (0: unknown, everything
// fits); max_buffer: the largest buffer it allocates.
struct GpuPlanInput {
  std::vector<size_t> layer_weights;
  std::vector<size_t> layer_kv;
  std::vector<size_t> layer_largest;
  size_t head = 0;
  size_t head_largest = 0;
  size_t scratch = 0;
  size_t budget = 0;
  size_t max_buffer = SIZE_MAX;
};

// The last n layers fit when their bytes, the head's and the scratch's fit the budget and each
// of their matrices (and the head's) fits a buffer. `requested` is --gpu-layers: -1 = as many as
// fit (all when all fit; 0 when not even the head fits: the caller runs on the CPU); N >= 0 =
// the last min(N, n_layer) layers, refused when they do not fit: out_of_memory naming both sizes
// and the count that fits, or unsupported naming the matrix too large for a buffer.
StatusOr<GpuLayerPlan> plan_gpu_layers(const GpuPlanInput& in, int requested,
                                       const std::string& device_name);

// The margin left to the driver on top of the step's own buffers: a tenth of the budget, at most
// 512 MiB (pipelines, command buffers, the driver's own allocations, fragmentation).
size_t gpu_margin_bytes(size_t budget);

}  // namespace glm::model
