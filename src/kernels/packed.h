// Weights repacked at load time into the layout of the fastest kernel (like llama.cpp's "repack"
// buffers): 16 rows interleaved, so that one 512-bit register holds 4 consecutive weights of each
// of 16 rows and one vpdpbusd computes a 4-column step of 16 dot products at once (AVX-512,
// packed_avx512.cc, packed_k_avx512.cc); AVX2 reads the same layout as two halves of 8 rows
// (packed_avx2.cc, packed_k_avx2.cc), so one copy serves both and tests can switch ISAs over it.
// The row-major
// GGUF layout needs a horizontal sum per row and a scale broadcast per row and block; this one
// needs neither, which cuts the instructions per weight about four-fold in decode.
//
// Layouts (G = 16 rows, nb = n_cols / 32 blocks; a group = rows [16 g, 16 g + 16)):
//   group g: scales [nb][16] fp16 (the rows' block scales d, row-minor), padded to 64 bytes,
//            then quants [nb][P][16][4] bytes, P = 4 (Q4_0, Q5_0) or 8 (Q8_0): piece p of block b
//            holds for each row r the 4 bytes that the kernel multiplies with activation bytes
//            4p..4p+3.
//   Q4_0x16: piece p (0..3), row r = bytes qs[4p .. 4p+3] of the row's block, unchanged: low
//            nibbles are elements 4p..4p+3, high nibbles elements 16+4p..16+4p+3 (values q+8).
//   Q8_0x16: piece p (0..7), row r = qs[4p .. 4p+3] XOR 0x80, i.e. unsigned q+128.
//   Q5_0x16: the Q4_0x16 pieces of Q5_0's nibbles, then per block [16][4] bytes of
//            high bits (packed.cc: spread_qh): byte i of row r has in bit p the 5th bit of
//            element 4p+i and in bit 4+p that of element 16+4p+i, so one 16-bit shift and mask
//            per piece moves them to bit 4 of the unpacked bytes. A block is 320 bytes.
//   Q4_Kx16 (n_sb = n_cols / 256 super-blocks): group g = [n_sb] super-blocks of
//            2368 bytes: d [16] fp16, dmin [16] fp16, the 6-bit scales decoded to bytes
//            [2 halves][8 sub-blocks][8 rows], the mins [2 halves][4 pairs][8 rows][2] (so that
//            one vpmovzxbw gives the (m_2k, m_2k+1) int16 pairs of 8 rows), then quants
//            [4 chunks][8 pieces][16 rows][4]: piece p of chunk j, row r = qs[32j + 4p .. + 3]
//            (low nibbles: sub-block 2j values 4p.., high nibbles: sub-block 2j + 1).
//   Q5_Kx16: a Q4_Kx16 super-block followed by the high bits [8 pieces][16 rows][4]: piece p,
//            row r = qh[4p .. 4p + 3] (bit 2j: the 5th bit of a low nibble of chunk j, bit
//            2j + 1 of a high one); 2880 bytes.
//   Q6_Kx16: super-blocks of 3392 bytes: d [16] fp16, scales [2 halves][8 pairs]
//            [8 rows][2] int8, zero padding to 320, then pieces [2 parts][8 p][3][16 rows][4]:
//            kind 0 = ql[64 part + 4p ..], 1 = ql[64 part + 32 + 4p ..], 2 = qh[32 part + 4p ..]
//            (GGUF's own bit order; packed_k_avx2.cc unpacks values 32K + 4p.. of the part).
//            Both k-layouts keep every bit of the row-major blocks (unpack_row restores them).
//   F16x16 / BF16x16: group g = [n_cols][16] 16-bit values (column-major within the group): one
//            load of 32 bytes is column k of the 16 rows, multiplied (f32 FMA) by x[k] broadcast.
// Rows beyond the last full group stay in the row-major data (matmul() computes them there).
// Memory: the packed copy is the size of the packed rows in the file (plus padding; Q4_Kx16
// +2.8%, Q5_Kx16 +2.3%, Q6_Kx16 +1%: bytes decoded ahead of time and alignment); the model
// then releases the mapped pages of the original rows, so resident memory stays near the file
// size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/matmul.h"

namespace glm::kernels {

constexpr int kPackRows = 16;

// Layout that pack() uses for weights of type t on this CPU (active_isa()); kNone when no
// packed kernel exists for it (scalar; types other than Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, F16,
// BF16).
PackedLayout packed_layout_for(DType t);

// Bytes of one group of 16 rows of n_cols columns in `layout`, and where its quants start.
size_t packed_group_bytes(PackedLayout layout, int64_t n_cols);
size_t packed_quants_offset(PackedLayout layout, int64_t n_cols);

// An owned, 64-byte aligned packed copy of the first 16 * floor(n_rows / 16) rows of a weight.
class PackedWeight {
 public:
  PackedWeight() = default;
  // Packs w (in parallel on pool, may be null); empty when packed_layout_for(w.type) is kNone or
  // w has fewer than 16 rows.
  static PackedWeight pack(const WeightView& w, ThreadPool* pool);
  // A plain row-major copy of all of w (layout kNone), for weights without a packed layout:
  // owned anonymous memory in huge pages, which the kernel neither pages out like mapped file
  // pages under memory pressure nor walks in 4 KiB TLB entries.
  static PackedWeight copy(const WeightView& w, ThreadPool* pool);

  bool empty() const { return data_ == nullptr; }
  PackedLayout layout() const { return layout_; }
  const uint8_t* data() const { return data_.get(); }
  int64_t n_rows() const { return n_rows_; }
  size_t bytes() const { return bytes_; }
  // Points w at this copy: w.packed / w.packed_rows for a packed layout, w.data for a copy.
  // Leaves w as it is when empty.
  void attach(WeightView* w) const;

 private:
  // Allocates bytes_ (64-byte aligned; 2 MiB aligned and marked for huge pages when large).
  void allocate();
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  PackedLayout layout_ = PackedLayout::kNone;
  int64_t n_rows_ = 0;
  size_t bytes_ = 0;
};

// Inverse of the packing, for tests: row r (< packed rows) of the packed copy back in the
// original GGUF block layout (row_bytes(type, n_cols) bytes).
void unpack_row(const PackedWeight& p, DType type, int64_t n_cols, int64_t r, uint8_t* out);

}  // namespace glm::kernels
