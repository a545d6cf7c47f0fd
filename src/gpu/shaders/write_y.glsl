// A matmul's output rule (matmul_io.glsl's shaders, and matmul_reduce.comp for the tiled
// shader's split): their push constants hold y, y_stride, y_col, bias, has_bias, add_to_y.

// y[t, row] = s (+ bias[row]) (+ y[t, row]).
void write_y(uint t, uint row, float s) {
  uint o = t * p.y_stride + p.y_col + row;
  if (p.has_bias != 0u) s += p.bias.v[row];
  if (p.add_to_y != 0u) s += p.y.v[o];
  p.y.v[o] = s;
}
