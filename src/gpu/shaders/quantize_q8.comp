#version 450
// The activations of the integer-dot matmuls (matmul.comp's IDOT): each 32-value block of
// x's rows as 32 signed 8-bit values and a scale, x ~ d * q with d = max |x| / 127 and q rounded
// to the nearest (ties to even): Q8_0's scheme (kernels/quant.cc) with an f32 scale. Its
// reference is gpu_test.cc's (GpuQuantize).
//   x: [n_rows, n_cols] f32 (n_cols a multiple of 32);
//   y: [n_rows, n_cols / 32] blocks of 9 words: q (value e in byte e % 4 of word e / 4), then d.
// One thread a block.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats x;
  Words y;
  uint n_blocks;  // over all rows
} p;

void main() {
  uint b = gl_GlobalInvocationID.x;
  if (b >= p.n_blocks) return;
  float v[32];
  float amax = 0.0;
  for (uint e = 0u; e < 32u; ++e) {
    v[e] = p.x.v[32u * b + e];
    amax = max(amax, abs(v[e]));
  }
  float d = amax / 127.0;
  float id = amax > 0.0 ? 127.0 / amax : 0.0;
  for (uint k = 0u; k < 8u; ++k) {
    uint word = 0u;
    for (uint j = 0u; j < 4u; ++j) {
      int q = clamp(int(roundEven(v[4u * k + j] * id)), -127, 127);
      word |= (uint(q) & 0xFFu) << (8u * j);
    }
    p.y.v[9u * b + k] = word;
  }
  p.y.v[9u * b + 8u] = floatBitsToUint(d);
}
