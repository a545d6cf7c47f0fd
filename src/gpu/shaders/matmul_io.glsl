// The matmul shaders' activations and output (matmul.comp, matmul_tiled.comp: their push
// constants hold x, x4, x_vec4, n_cols, y, y_stride, y_col, bias, has_bias, add_to_y).

#ifndef IDOT
// x[xo + e .. xo + e + 3]; 0 past the row (a float row's last chunk may end early; n_cols is
// then a multiple of 4 on the 16-byte path, so a run is all in or all out).
vec4 x_run(uint xo, uint e) {
  if (p.x_vec4 != 0u) return e < p.n_cols ? p.x4.v[(xo + e) >> 2] : vec4(0.0);
  vec4 r;
  UNROLLED for (uint k = 0u; k < 4u; ++k) r[k] = e + k < p.n_cols ? p.x.v[xo + e + k] : 0.0;
  return r;
}
#endif

#include "write_y.glsl"
