// What the ops' host sides share (ops.cc, matmul.cc): workgroup sizes and the elementwise
// dispatch's geometry. Internal to the gpu module.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpu/device.h"
#include "gpu/shaders.h"

namespace glm::gpu {

inline constexpr uint32_t kGroup = 64;         // local_size_x of every shader
inline constexpr uint32_t kMaxGroups = 65535;  // the guaranteed maxComputeWorkGroupCount per axis

inline int64_t groups_for(int64_t n) { return (n + kGroup - 1) / kGroup; }

// An elementwise op over n items in groups of 64: up to 65535 groups in x, the rest in y (the
// shaders take item y * groups_x * 64 + x).
inline void dispatch_1d(Stream& s, Shader shader, const void* push, size_t bytes, int64_t n) {
  const int64_t g = groups_for(n);
  const uint32_t gx = static_cast<uint32_t>(std::min<int64_t>(g, kMaxGroups));
  const uint32_t gy = static_cast<uint32_t>((g + gx - 1) / gx);
  s.dispatch(shader, push, bytes, gx, gy);
}

}  // namespace glm::gpu
