// A matmul's output rule (matmul_io.glsl's shaders, and matmul_reduce.comp for the tiled
// shader's split): their push constants hold y, y_stride, y_col, bias, has_bias, add_to_y.

// s + bias[row] where there is a bias, else s.
float biased(uint row, float s) {
  return p.has_bias != 0u ? s + p.bias.v[row] : s;
}

// y[t, row] = v (+ y[t, row]).
void store_y(uint t, uint row, float v) {
  uint o = t * p.y_stride + p.y_col + row;
  if (p.add_to_y != 0u) v += p.y.v[o];
  p.y.v[o] = v;
}

// y[t, row] = s (+ bias[row]) (+ y[t, row]).
void write_y(uint t, uint row, float s) {
  store_y(t, row, biased(row, s));
}
