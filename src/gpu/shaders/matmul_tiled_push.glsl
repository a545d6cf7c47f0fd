// The push constants of the prefill matmuls (matmul_tiled.comp, matmul_coop.comp; ops.cc's
// matmul and matmul_experts_grouped fill them) and their tiles' token lists. IDS: the experts'
// variants (matmul_tiled.comp says how they run).
layout(push_constant) uniform Push {
  Words w;
  Floats x;
  Vec4s x4;  // the same address as x, read 16 bytes at a time where x_vec4 says it may be
  Floats y;
  uint n_rows;
  uint n_cols;
  uint n_tokens;
  uint row_bytes;
  uint y_stride;
  uint y_col;
  uint x_vec4;  // 1: x is 16-byte aligned and n_cols a multiple of 4
  Floats bias;  // [n_rows], added to every token's row; unread when has_bias is 0
  uint has_bias;
  uint add_to_y;  // 1: y += the products (a residual), else y = them
#ifdef IDS
  Ints slots;         // [n_expert, cap] each expert's slots
  Ints counts;        // [n_expert] how many
  uint cap;           // the lists' stride
  uint expert_bytes;  // one expert's n_rows rows
  uint x_div;         // slot s reads x row s / x_div
#else
  // Split over the row length (few tiles, long rows: a short prompt's): workgroup z takes chunks
  // z * chunks_per_split .. of every row and writes its sums to part [z, n_tokens, n_rows],
  // which matmul_reduce.comp adds up into y; chunks_per_split >= the row's chunks: no split.
  uint chunks_per_split;
  Floats part;
#endif
} p;

// Token t of the tile's list: its row of x and of y (t < n_tok). IDS: list_at, the first of the
// expert's slots (set by main).
#ifdef IDS
uint list_at;
uint x_row(uint t) { return uint(p.slots.v[list_at + t]) / p.x_div; }
uint y_row(uint t) { return uint(p.slots.v[list_at + t]); }
#else
uint x_row(uint t) { return t; }
uint y_row(uint t) { return t; }
#endif
