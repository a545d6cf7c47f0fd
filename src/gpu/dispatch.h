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

// n_groups workgroups as a grid: up to 65535 in x, the rest in y (a shader takes workgroup
// y * x + its x; `x` is what such a shader's push constants call groups_per_y).
struct Grid {
  uint32_t x = 0, y = 0;
};
inline Grid grid_for(int64_t n_groups) {
  const uint32_t x = static_cast<uint32_t>(std::min<int64_t>(n_groups, kMaxGroups));
  return {x, static_cast<uint32_t>((n_groups + x - 1) / x)};
}

// An elementwise op over n items in groups of 64: up to 65535 groups in x, the rest in y (the
// shaders take item y * groups_x * 64 + x).
inline void dispatch_1d(Stream& s, Shader shader, const void* push, size_t bytes, int64_t n) {
  const Grid g = grid_for(groups_for(n));
  s.dispatch(shader, push, bytes, g.x, g.y);
}

}  // namespace glm::gpu
