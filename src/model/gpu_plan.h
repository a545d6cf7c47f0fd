// How many of a model's layers go on the GPU (docs/gpu.md#memory): each layer on the device costs
// its weights and its share of the KV cache; the output head and the step's scratch are needed
// whatever the count. Layers are counted from the last, as llama.cpp's -ngl: the CPU runs the
// first ones and hands its rows on.
// Pure arithmetic over byte counts (no device): tested without a GPU.
#pragma once

#include <cstddef>
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
  size_t need() const { return weights + kv + scratch; }
  // "28 of 40 layers: weights 5.10 GiB + KV cache 1.20 GiB + scratch 0.50 GiB = 6.80 GiB"
  std::string describe() const;
};

// layer_weights[l] and layer_kv[l]: layer l's bytes on the device (both n_layer long); head: the
// output matrix; scratch: the activations of the largest step. `requested` is --gpu-layers:
// -1 = as many as fit (all when all fit; 0 when not even the head fits: the caller runs on the
// CPU); N >= 0 = the last min(N, n_layer) layers, out_of_memory (naming both sizes and the count
// that fits) when they do not fit. An unknown budget (0) fits everything.
StatusOr<GpuLayerPlan> plan_gpu_layers(const std::vector<size_t>& layer_weights,
                                       const std::vector<size_t>& layer_kv, size_t head,
                                       size_t scratch, size_t budget, int requested,
                                       const std::string& device_name);

// "6.80 GiB"
std::string format_gib(size_t bytes);

// The margin left to the driver on top of the step's own buffers: a tenth of the budget, at most
// 512 MiB (pipelines, command buffers, the driver's own allocations, fragmentation).
size_t gpu_margin_bytes(size_t budget);

}  // namespace glm::model
