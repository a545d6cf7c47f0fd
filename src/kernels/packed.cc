// Packing into the 16-row interleaved layouts of packed.h (plain byte moves, no ISA needed).
#include "kernels/packed.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "core/check.h"
#include "kernels/internal.h"
#include "kernels/isa.h"
#include "kernels/quant.h"

namespace glm::kernels {
namespace {

constexpr int64_t kQK = 32;  // elements per block of Q4_0 / Q5_0 / Q8_0

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

int pieces(PackedLayout layout) { return layout == PackedLayout::kQ8_0x16 ? 8 : 4; }

// Bytes of one block of 16 rows in the quants region: the pieces, then for Q5_0 the high bits.
size_t block_stride(PackedLayout layout) {
  return pieces(layout) * kPackRows * 4 + (layout == PackedLayout::kQ5_0x16 ? kPackRows * 4 : 0);
}

// Offset of the quants in a Q4_0 / Q8_0 block (after the half d; Q5_0: after d and qh[4]), and
// the XOR applied to them.
int qs_offset(PackedLayout layout) { return layout == PackedLayout::kQ5_0x16 ? 6 : 2; }
uint8_t source_xor(PackedLayout layout) { return layout == PackedLayout::kQ8_0x16 ? 0x80 : 0; }

// Q5_0 high bits of one row and block (qh, element j = bit j) as the 4 bytes the kernel reads:
// byte i holds in bit p the bit of element 4p + i and in bit 4 + p that of element 16 + 4p + i
// (p = 0..3: the elements of piece p's low and high nibbles in lane byte i).
void spread_qh(uint32_t qh, uint8_t* out) {
  for (int i = 0; i < 4; ++i) {
    uint8_t v = 0;
    for (int p = 0; p < 4; ++p) {
      v |= static_cast<uint8_t>(((qh >> (4 * p + i)) & 1) << p);
      v |= static_cast<uint8_t>(((qh >> (16 + 4 * p + i)) & 1) << (4 + p));
    }
    out[i] = v;
  }
}
uint32_t gather_qh(const uint8_t* in) {
  uint32_t qh = 0;
  for (int i = 0; i < 4; ++i) {
    for (int p = 0; p < 4; ++p) {
      qh |= static_cast<uint32_t>((in[i] >> p) & 1) << (4 * p + i);
      qh |= static_cast<uint32_t>((in[i] >> (4 + p)) & 1) << (16 + 4 * p + i);
    }
  }
  return qh;
}

// Q4_Kx16 (packed.h): per super-block of 256 columns, a header, then the quants.
constexpr int64_t kQK_K = 256;
constexpr size_t kKD = 0, kKDmin = 32, kKScales = 64, kKMins = 192, kKHeader = 320;
constexpr size_t kKSuper = kKHeader + kPackRows * kQK_K / 2;
// Q5_Kx16: a Q4_Kx16 super-block, then the high bits [8 pieces][16 rows][4 bytes] (qh[4p ..]).
constexpr size_t k5Super = kKSuper + kPackRows * kQK_K / 8;

// Q6_Kx16 (packed.h): d [16] fp16, scales [2][8][8][2] int8, padding to kKHeader, then the
// pieces [2 parts][8][ql low, ql high, qh][16 rows][4 bytes].
constexpr size_t k6Scales = 32, k6Super = kKHeader + kPackRows * 192;

bool is_k(PackedLayout layout) {
  return layout == PackedLayout::kQ4_Kx16 || layout == PackedLayout::kQ5_Kx16 ||
         layout == PackedLayout::kQ6_Kx16;
}
size_t k_super_bytes(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::kQ4_Kx16:
      return kKSuper;
    case PackedLayout::kQ5_Kx16:
      return k5Super;
    default:
      return k6Super;
  }
}

// Where in a packed super-block row r's scale of group g (16 values) and its quant bytes go;
// pack and unpack share these.
size_t q6_scale_at(int r, int g) {
  return k6Scales + (r / 8) * 128 + (g / 2) * 16 + (r % 8) * 2 + g % 2;
}
// Piece kind 0: ql[64 part + 4 p ..], 1: ql[64 part + 32 + 4 p ..], 2: qh[32 part + 4 p ..].
size_t q6_piece_at(int r, int part, int p, int kind) {
  return kKHeader + ((part * 8 + p) * 3 + kind) * kPackRows * 4 + r * 4;
}

void pack_group_q6k(const WeightView& w, int64_t g, uint8_t* dst) {
  const int64_t n_sb = w.n_cols / kQK_K;
  const size_t rb = row_bytes(w.type, w.n_cols);
  for (int r = 0; r < kPackRows; ++r) {
    const auto* row = reinterpret_cast<const BlockQ6_K*>(static_cast<const uint8_t*>(w.data) +
                                                         (g * kPackRows + r) * rb);
    for (int64_t sb = 0; sb < n_sb; ++sb) {
      const BlockQ6_K& b = row[sb];
      uint8_t* s = dst + sb * k6Super;
      std::memcpy(s + 2 * r, &b.d, 2);
      for (int j = 0; j < 16; ++j) s[q6_scale_at(r, j)] = static_cast<uint8_t>(b.scales[j]);
      for (int part = 0; part < 2; ++part) {
        for (int p = 0; p < 8; ++p) {
          std::memcpy(s + q6_piece_at(r, part, p, 0), b.ql + 64 * part + 4 * p, 4);
          std::memcpy(s + q6_piece_at(r, part, p, 1), b.ql + 64 * part + 32 + 4 * p, 4);
          std::memcpy(s + q6_piece_at(r, part, p, 2), b.qh + 32 * part + 4 * p, 4);
        }
      }
    }
  }
}

void unpack_row_q6k(const PackedWeight& p, int64_t n_cols, int64_t r, uint8_t* out) {
  const int64_t n_sb = n_cols / kQK_K;
  const uint8_t* group =
      p.data() + (r / kPackRows) * packed_group_bytes(PackedLayout::kQ6_Kx16, n_cols);
  const int lane = static_cast<int>(r % kPackRows);
  auto* row = reinterpret_cast<BlockQ6_K*>(out);
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    BlockQ6_K& b = row[sb];
    const uint8_t* s = group + sb * k6Super;
    std::memcpy(&b.d, s + 2 * lane, 2);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(s[q6_scale_at(lane, j)]);
    for (int part = 0; part < 2; ++part) {
      for (int q = 0; q < 8; ++q) {
        std::memcpy(b.ql + 64 * part + 4 * q, s + q6_piece_at(lane, part, q, 0), 4);
        std::memcpy(b.ql + 64 * part + 32 + 4 * q, s + q6_piece_at(lane, part, q, 1), 4);
        std::memcpy(b.qh + 32 * part + 4 * q, s + q6_piece_at(lane, part, q, 2), 4);
      }
    }
  }
}

// Q4_K (Block = BlockQ4_K) and Q5_K (BlockQ5_K: the same, and its high bits after the quants).
template <class Block>
void pack_group_q45k(const WeightView& w, int64_t g, uint8_t* dst) {
  constexpr bool kFive = std::is_same_v<Block, BlockQ5_K>;
  constexpr size_t kSuper = kFive ? k5Super : kKSuper;
  const int64_t n_sb = w.n_cols / kQK_K;
  const size_t rb = row_bytes(w.type, w.n_cols);
  for (int r = 0; r < kPackRows; ++r) {
    const auto* row = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w.data) +
                                                     (g * kPackRows + r) * rb);
    const int h = r / 8, rr = r % 8;
    for (int64_t sb = 0; sb < n_sb; ++sb) {
      const Block& b = row[sb];
      uint8_t* s = dst + sb * kSuper;
      std::memcpy(s + kKD + 2 * r, &b.d, 2);
      std::memcpy(s + kKDmin + 2 * r, &b.dmin, 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        unpack_scale_min_k4(j, b.scales, &sc, &m);
        s[kKScales + h * 64 + j * 8 + rr] = static_cast<uint8_t>(sc);
        s[kKMins + h * 64 + (j / 2) * 16 + rr * 2 + j % 2] = static_cast<uint8_t>(m);
      }
      for (int c = 0; c < 4; ++c) {
        for (int p = 0; p < 8; ++p) {
          std::memcpy(s + kKHeader + ((c * 8 + p) * kPackRows + r) * 4, b.qs + 32 * c + 4 * p, 4);
        }
      }
      if constexpr (kFive) {
        for (int p = 0; p < 8; ++p)
          std::memcpy(s + kKSuper + (p * kPackRows + r) * 4, b.qh + 4 * p, 4);
      }
    }
  }
}

template <class Block>
void unpack_row_q45k(const PackedWeight& p, int64_t n_cols, int64_t r, uint8_t* out) {
  constexpr bool kFive = std::is_same_v<Block, BlockQ5_K>;
  constexpr size_t kSuper = kFive ? k5Super : kKSuper;
  const int64_t n_sb = n_cols / kQK_K;
  const uint8_t* group = p.data() + (r / kPackRows) * packed_group_bytes(p.layout(), n_cols);
  const int lane = static_cast<int>(r % kPackRows), h = lane / 8, rr = lane % 8;
  auto* row = reinterpret_cast<Block*>(out);
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    Block& b = row[sb];
    const uint8_t* s = group + sb * kSuper;
    std::memcpy(&b.d, s + kKD + 2 * lane, 2);
    std::memcpy(&b.dmin, s + kKDmin + 2 * lane, 2);
    int sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = s[kKScales + h * 64 + j * 8 + rr];
      m[j] = s[kKMins + h * 64 + (j / 2) * 16 + rr * 2 + j % 2];
    }
    pack_scale_min_k4(sc, m, b.scales);
    for (int c = 0; c < 4; ++c) {
      for (int q = 0; q < 8; ++q) {
        std::memcpy(b.qs + 32 * c + 4 * q, s + kKHeader + ((c * 8 + q) * kPackRows + lane) * 4, 4);
      }
    }
    if constexpr (kFive) {
      for (int q = 0; q < 8; ++q)
        std::memcpy(b.qh + 4 * q, s + kKSuper + (q * kPackRows + lane) * 4, 4);
    }
  }
}

bool is_float(PackedLayout layout) {
  return layout == PackedLayout::kF16x16 || layout == PackedLayout::kBF16x16;
}

// 16-bit float weights: [n_cols][16], i.e. a 16 x n_cols transpose of the group's rows.
void pack_group_16bit(const WeightView& w, int64_t g, uint8_t* dst) {
  const uint16_t* src = static_cast<const uint16_t*>(w.data) + g * kPackRows * w.n_cols;
  uint16_t* out = reinterpret_cast<uint16_t*>(dst);
  for (int64_t c0 = 0; c0 < w.n_cols; c0 += 64) {  // 64 columns at a time: 16 short streams
    const int64_t c1 = std::min<int64_t>(c0 + 64, w.n_cols);
    for (int r = 0; r < kPackRows; ++r) {
      for (int64_t c = c0; c < c1; ++c) out[c * kPackRows + r] = src[r * w.n_cols + c];
    }
  }
}

void pack_group(const WeightView& w, PackedLayout layout, int64_t g, uint8_t* dst) {
  if (is_float(layout)) return pack_group_16bit(w, g, dst);
  if (layout == PackedLayout::kQ4_Kx16) return pack_group_q45k<BlockQ4_K>(w, g, dst);
  if (layout == PackedLayout::kQ5_Kx16) return pack_group_q45k<BlockQ5_K>(w, g, dst);
  if (layout == PackedLayout::kQ6_Kx16) return pack_group_q6k(w, g, dst);
  const int64_t nb = w.n_cols / kQK;
  const size_t rb = row_bytes(w.type, w.n_cols);
  const size_t block_bytes = rb / nb;
  const int np = pieces(layout);
  const size_t stride = block_stride(layout);
  const uint8_t x = source_xor(layout);
  uint16_t* scales = reinterpret_cast<uint16_t*>(dst);             // [nb][16]
  uint8_t* quants = dst + packed_quants_offset(layout, w.n_cols);  // [nb][stride]
  for (int r = 0; r < kPackRows; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + (g * kPackRows + r) * rb;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * block_bytes;
      std::memcpy(&scales[b * kPackRows + r], blk, 2);
      const uint8_t* qs = blk + qs_offset(layout);
      uint8_t* qb = quants + b * stride;
      for (int p = 0; p < np; ++p) {
        uint8_t* out = qb + (p * kPackRows + r) * 4;
        for (int i = 0; i < 4; ++i) out[i] = qs[4 * p + i] ^ x;
      }
      if (layout == PackedLayout::kQ5_0x16) {
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        spread_qh(qh, qb + (np * kPackRows + r) * 4);
      }
    }
  }
}

}  // namespace

PackedLayout packed_layout_for(DType t) {
  // Both vector ISAs read the same layouts (packed_avx2.cc, packed_k_avx2.cc, packed_avx512.cc,
  // packed_k_avx512.cc).
  if (active_isa() == Isa::kScalar) return PackedLayout::kNone;
  switch (t) {
    case DType::kQ4_0:
      return PackedLayout::kQ4_0x16;
    case DType::kQ8_0:
      return PackedLayout::kQ8_0x16;
    case DType::kQ5_0:
      return PackedLayout::kQ5_0x16;
    case DType::kQ4_K:
      return PackedLayout::kQ4_Kx16;
    case DType::kQ5_K:
      return PackedLayout::kQ5_Kx16;
    case DType::kQ6_K:
      return PackedLayout::kQ6_Kx16;
    case DType::kF16:
      return PackedLayout::kF16x16;
    case DType::kBF16:
      return PackedLayout::kBF16x16;
    default:
      return PackedLayout::kNone;
  }
}

size_t packed_quants_offset(PackedLayout layout, int64_t n_cols) {
  if (is_float(layout)) return 0;
  if (is_k(layout)) return kKHeader;  // within each super-block
  return round_up(static_cast<size_t>(n_cols / kQK) * kPackRows * 2, 64);
}

size_t packed_group_bytes(PackedLayout layout, int64_t n_cols) {
  if (is_float(layout)) return static_cast<size_t>(n_cols) * kPackRows * 2;
  if (is_k(layout)) return static_cast<size_t>(n_cols / kQK_K) * k_super_bytes(layout);
  const size_t quants = static_cast<size_t>(n_cols / kQK) * block_stride(layout);
  return packed_quants_offset(layout, n_cols) + quants;
}

void PackedWeight::Free::operator()(uint8_t* p) const { std::free(p); }

void PackedWeight::allocate() {
  // Whole 2 MiB pages, marked for transparent huge pages before the first touch: decode streams
  // the copy once per token, and 4 KiB pages would cost a TLB miss every 4 KiB of it.
  constexpr size_t kHuge = size_t{2} << 20;
  const bool huge = bytes_ >= kHuge;
  const size_t alloc = huge ? round_up(bytes_, kHuge) : round_up(bytes_, 64);
  void* mem = std::aligned_alloc(huge ? kHuge : 64, alloc);
  if (mem == nullptr) throw std::bad_alloc();
  if (huge) madvise(mem, alloc, MADV_HUGEPAGE);
  data_.reset(static_cast<uint8_t*>(mem));
}

PackedWeight PackedWeight::copy(const WeightView& w, ThreadPool* pool) {
  PackedWeight p;
  if (w.data == nullptr || w.n_rows == 0) return p;
  const size_t rb = row_bytes(w.type, w.n_cols);
  p.bytes_ = rb * w.n_rows;
  p.allocate();
  p.n_rows_ = w.n_rows;
  uint8_t* dst = p.data_.get();
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  internal::split_rows(pool, w.n_rows, 1, [&](int64_t r0, int64_t r1) {
    std::memcpy(dst + r0 * rb, src + r0 * rb, (r1 - r0) * rb);
  });
  return p;
}

PackedWeight PackedWeight::pack(const WeightView& w, ThreadPool* pool) {
  PackedWeight p;
  const PackedLayout layout = packed_layout_for(w.type);
  const int64_t n_groups = w.n_rows / kPackRows;
  if (layout == PackedLayout::kNone || n_groups == 0 || w.data == nullptr) return p;
  GLM_CHECK(is_float(layout) || w.n_cols % (is_k(layout) ? kQK_K : kQK) == 0);
  const size_t gb = packed_group_bytes(layout, w.n_cols);
  p.bytes_ = gb * n_groups;
  p.allocate();
  p.layout_ = layout;
  p.n_rows_ = n_groups * kPackRows;
  uint8_t* base = p.data_.get();
  // Padding bytes of the scale region are zeroed so that the copy is deterministic.
  internal::split_rows(pool, n_groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      // (K layouts: the whole group, for the padding after each super-block's header.)
      std::memset(base + g * gb, 0, is_k(layout) ? gb : packed_quants_offset(layout, w.n_cols));
      pack_group(w, layout, g, base + g * gb);
    }
  });
  return p;
}

void PackedWeight::attach(WeightView* w) const {
  if (empty()) return;
  if (layout_ == PackedLayout::kNone) {
    w->data = data_.get();
    return;
  }
  w->packed = data_.get();
  w->packed_layout = layout_;
  w->packed_rows = n_rows_;
}

void unpack_row(const PackedWeight& p, DType type, int64_t n_cols, int64_t r, uint8_t* out) {
  GLM_CHECK(!p.empty() && r >= 0 && r < p.n_rows());
  const PackedLayout layout = p.layout();
  if (is_float(layout)) {
    const uint16_t* group = reinterpret_cast<const uint16_t*>(
        p.data() + (r / kPackRows) * packed_group_bytes(layout, n_cols));
    uint16_t* o = reinterpret_cast<uint16_t*>(out);
    for (int64_t c = 0; c < n_cols; ++c) o[c] = group[c * kPackRows + r % kPackRows];
    return;
  }
  if (layout == PackedLayout::kQ4_Kx16) return unpack_row_q45k<BlockQ4_K>(p, n_cols, r, out);
  if (layout == PackedLayout::kQ5_Kx16) return unpack_row_q45k<BlockQ5_K>(p, n_cols, r, out);
  if (layout == PackedLayout::kQ6_Kx16) return unpack_row_q6k(p, n_cols, r, out);
  const int64_t nb = n_cols / kQK;
  const size_t block_bytes = row_bytes(type, n_cols) / nb;
  const int np = pieces(layout);
  const size_t stride = block_stride(layout);
  const uint8_t x = source_xor(layout);
  const uint8_t* group = p.data() + (r / kPackRows) * packed_group_bytes(layout, n_cols);
  const int lane = static_cast<int>(r % kPackRows);
  const uint8_t* quants = group + packed_quants_offset(layout, n_cols);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = out + b * block_bytes;
    std::memcpy(blk, group + (b * kPackRows + lane) * 2, 2);
    uint8_t* qs = blk + qs_offset(layout);
    const uint8_t* qb = quants + b * stride;
    for (int q = 0; q < np; ++q) {
      const uint8_t* in = qb + (q * kPackRows + lane) * 4;
      for (int i = 0; i < 4; ++i) qs[4 * q + i] = in[i] ^ x;
    }
    if (layout == PackedLayout::kQ5_0x16) {
      const uint32_t qh = gather_qh(qb + (np * kPackRows + lane) * 4);
      std::memcpy(blk + 2, &qh, 4);
    }
  }
}

}  // namespace glm::kernels
