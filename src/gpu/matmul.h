// The matrix products on the device, host side: weight matrices uploaded in their GGUF block
// formats, the choice of shader (MatmulTuning: the one- and few-token decode shaders, the tiled
// prefill shader, its tensor cores, 8-bit activations), and what a matmul takes over from the
// ops around it (a fused input norm, an activation as it writes). Recorded on a Stream like the
// other ops (ops.h); each names its CPU twin, its reference in matmul_test.cc.
// Thread-safety: as the Stream (one thread). Cost: recording only, O(1) per op, but uploads copy
// the matrix's bytes to the device.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gpu/device.h"

namespace glm::gpu {

// A weight matrix on the device, in its GGUF block format: n_rows rows of row_bytes each.
struct Matrix {
  Buffer buf;
  DType type = DType::kF32;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  size_t row_bytes = 0;
  MatmulShaders shaders = kF32MatmulShaders;
};

// How matmul() picks its shader: the rows each team of the decode shaders takes (matmul.comp:
// 1, 2 or 4 for one token, 1 or 2 for a few) and the token count from which it takes the tiled
// shader (which reads each weight block once per 64 tokens instead of once per 8).
// int_dot: whether the decode shaders of the quantized types take their activations in 8 bits
// and multiply by integer dot products (matmul.comp's IDOT): -1 where the device accelerates
// them (DeviceInfo::int_dot_fast), 0 never, 1 wherever the device has them. tiled_split: 1
// splits the tiled shader's rows into parts of at least 4 chunks, each a workgroup of its own,
// where its tiles are fewer than kTiledSplitGroups workgroups (a short prompt's: matmul_reduce
// adds the parts up), 0 never. coop: whether the tiled shader's products run on tensor cores
// (matmul_coop.comp: fp16 weights and activations, f32 sums; the experts' grouped too): -1 where
// the device has them and check_coop_matmul found them right, 0 never, 1 always (on a device
// without them, the same shader with its products in scalar code: its reference). fuse: what
// the one- and few-token shaders take over from the ops around them, so that those take no
// dispatch: 1 the RMS norm of their input (MatmulInput::rms_normed, fuses_input), the 8-bit
// shaders' quantization of f32 rows (in their teams, not by quantize_q8) and an activation of
// their output (MatmulOut::act, fuses_activation); 2 the activation alone; 0 neither (the model
// then dispatches them).
// team_rows_one is 4: a team reads its token's input once for all its rows, and (fuse 1)
// normalizes and, on the 8-bit path, quantizes it once; with 4 rows those costs are half a
// row's of 2 (by arithmetic, on a 6B decode step 2 rows a team read some 18 GB of f32 inputs
// and norm weights from the GPU's caches a token, against 3.6 GB of Q4_0 weights from its
// memory), while a thread keeps as many weight bytes in flight (4 rows' loads, in half as many
// workgroups). Each count of rows is a pipeline of its own (matmul.comp's ROWS_LOG2, a
// specialization constant), with that many rows' code and registers: on RADV's compiler a
// one-token Q4_0 team of 1, 2 and 4 rows takes 56, 72 and 96 registers a thread (the 8-bit
// path 112, 136, 176). Unmeasured on a GPU: scripts/bench-gpu.sh compares 1, 2 and 4.
struct MatmulTuning {
  int team_rows_one = 4;
  int team_rows_few = 2;
  int tiled_min_tokens = 16;
  int int_dot = -1;
  int tiled_split = 1;
  int coop = -1;
  int fuse = 1;
};
inline constexpr int kTiledSplitGroups = 256;
// The defaults above, or GLMSERVE_VULKAN_MATMUL="ONE,FEW,TILED_MIN[,DOT[,SPLIT[,COOP[,FUSE]]]]"
// (read once; benchmarks compare settings with it, docs/gpu.md). A malformed value is ignored
// with a warning.
const MatmulTuning& matmul_tuning();
// MatmulTuning parsed from 3 to 7 of "ONE,FEW,TILED_MIN,DOT,SPLIT,COOP,FUSE" (DOT and COOP -1, 0
// or 1; SPLIT 0 or 1; FUSE 0, 1 or 2); false if malformed or out of range.
bool parse_matmul_tuning(const char* text, MatmulTuning* out);
// The tiled shader's splits of the row length for n_tokens tokens of w (1: none).
int tiled_splits(const Matrix& w, int n_tokens, const MatmulTuning& tuning = matmul_tuning());
// Whether the device and the tuning allow the integer-dot shaders: a decode step's matmuls of
// quantized weights then take 8-bit activations, which move its logits from an f32
// computation's by about as much as the CPU's kernels do (a few percent of their range on the
// tests' random 2-layer models).
bool decode_in_int8(const Device& device, const MatmulTuning& tuning = matmul_tuning());
// Whether matmul() takes the integer-dot shaders for w (a quantized type, fewer tokens than the
// tiled shader's, where decode_in_int8).
bool uses_int_dot(const Device& device, const Matrix& w, int n_tokens,
                  const MatmulTuning& tuning = matmul_tuning());

// Whether the tiled matmul of 16-bit and quantized weights multiplies fp16 values (tensor
// cores, or their scalar twin where coop is 1 and the device has none; never on a device
// without fp16 arithmetic, whose shaders cannot hold them): the prefill's logits
// then move from an f32 computation's by about 2e-3, as llama.cpp's GPU matmuls' do.
bool prefill_in_fp16(const Device& device, const MatmulTuning& tuning = matmul_tuning());
// The tiled shader matmul() takes for n_tokens >= tuning.tiled_min_tokens tokens of w: on
// tensor cores (w.shaders.coop) or their scalar twin (coop_ref) where prefill_in_fp16 and w
// has them (not f32), else w.shaders.tiled. experts: matmul_experts_grouped's (experts_coop,
// experts_coop_ref, experts_tiled).
Shader tiled_shader(const Device& device, const Matrix& w,
                    const MatmulTuning& tuning = matmul_tuning(), bool experts = false);
// Where info().coop_matrix and not yet verified: runs the tensor-core matmul (F16) against
// the host's products of the same fp16 values (coop_matmul_agrees) and sets
// device->coop_verified() to whether they agree, with a warning where they do not (the prefill
// then runs without tensor cores). A no-op elsewhere. Errors: a failed submission or allocation
// (coop_verified stays false).
Status check_coop_matmul(Device* device);
// Whether `shader` (a matmul_coop.comp variant for F16 weights) computes a 200 x 320 F16
// matrix's products with 70 tokens (two tiles each way, both partial) as the host does from
// the same fp16 values, whole rows a workgroup and split over the row length, bias and residual
// added: the f32 sums' order apart (check_coop_matmul's test).
StatusOr<bool> coop_matmul_agrees(Device* device, Shader shader);

// x: [n_rows, n_cols] f32 (n_cols a multiple of 32) into y: [n_rows, n_cols / 32] blocks of 9
// words, 32 int8 and an f32 scale (quantize_q8.comp): the IDOT shaders' activations.
void quantize_q8(Stream& s, Addr x, Addr y, int n_rows, int64_t n_cols);
inline size_t q8_bytes(int n_rows, int64_t n_cols) {
  return static_cast<size_t>(n_rows) * static_cast<size_t>(n_cols / 32) * 36;
}

// The bytes a matrix (or a layer's K/V) must stay below: the shaders address its bytes in 32
// bits.
inline constexpr size_t kMatrixBytesLimit = size_t{1} << 32;
// The largest matrix or layer's K/V the device can hold: below kMatrixBytesLimit, and no larger
// than one of its buffers (DeviceInfo::max_buffer_bytes).
inline size_t largest_buffer(const DeviceInfo& info) {
  return std::min<size_t>(kMatrixBytesLimit - 1, info.max_buffer_bytes);
}

// Uploads a [n_rows, n_cols] matrix of `type` (bytes as in the GGUF file); where the device's
// tensor cores are verified, compiles the type's tensor-core shader (check_coop_matmul): the
// grouped experts' one where `experts` (a stacked *_exps matrix), else the plain one.
// Errors: unsupported (a type without a GPU kernel, or a matrix over 4 GiB: the shaders address
// bytes in 32 bits), out_of_memory.
// file: the mapping `data` lies in, if any (Device::HostBytes).
StatusOr<Matrix> upload_matrix(Device* device, DType type, const void* data, int64_t n_rows,
                               int64_t n_cols, bool experts = false,
                               const MappedFile* file = nullptr);
// The same for a matrix stacked from row ranges in their order (rows: [n_rows, n_cols] GGUF
// rows each): a fused QKV or gate-and-up matrix from separate ones, each expert's gate rows then
// its up rows.
struct MatrixRows {
  const void* data = nullptr;
  int64_t n_rows = 0;
  const MappedFile* file = nullptr;
};
StatusOr<Matrix> upload_stacked(Device* device, DType type, const std::vector<MatrixRows>& parts,
                                int64_t n_cols, bool experts = false);
// Uploads n floats.
StatusOr<Buffer> upload_floats(Device* device, const float* data, size_t n);

// What matmul() does to its products as it writes them, so that none of it takes a dispatch of
// its own: it adds a bias per row (bias: [w.n_rows] f32), applies an activation to the biased
// products (act; only where fuses_activation), then adds y's old values (a residual, to_y).
//   kGelu: gelu_tanh of each (model::ops::gelu_tanh).
//   kSwigluPairs: w's rows are h gate rows then h up rows (w.n_rows = 2 h, a fused gate-and-up
//     matrix), and y takes h columns: y[t, y_col + r] = silu(p[t, r]) * p[t, h + r]
//     (model::ops::swiglu of the biased products p), for r < h.
enum class MatmulAct : uint32_t {
  kNone = 0,
  kGelu = 1,
  kSwigluPairs = 2
};  // matmul.comp's out_mode
struct MatmulOut {
  Addr bias = 0;
  bool to_y = false;
  MatmulAct act = MatmulAct::kNone;
};

// A matmul's activations: f32 rows, and optionally the same rows already as quantize_q8 writes
// them (by the op that wrote them: rms_norm's or swiglu's q8), which the integer-dot shaders
// then read instead of quantizing the rows themselves (in their teams where tuning.fuse is 1,
// else by a dispatch of quantize_q8). An Addr converts to one without.
// Or rows the shader normalizes as it reads them (only where fuses_input), so that the norm
// before the matmul takes no dispatch (nor barrier) of its own:
//   rms_normed(x, w, eps): x [n_tokens, w.n_cols] f32, the input rms_norm(x, w) (model::ops::
//     rms_norm: x / sqrt(mean(x^2) + eps) * w), each team of the shader summing the squares of
//     the row it reads whole anyway; w: [n_cols] f32.
// (The activations after a matmul run in it as it writes instead: MatmulOut::act.)
struct MatmulInput {
  // matmul.comp's in_mode
  enum class Fused : uint32_t { kNone = 0, kRmsNorm = 1 };
  MatmulInput(Addr x) : f32(x) {}  // implicit: f32 rows alone are the usual input
  MatmulInput(Addr x, Addr x_q8) : f32(x), q8(x_q8) {}
  static MatmulInput rms_normed(Addr x, Addr w, float eps) {
    MatmulInput in(x);
    in.fused = Fused::kRmsNorm;
    in.norm_w = w;
    in.eps = eps;
    return in;
  }
  Addr f32 = 0;
  Addr q8 = 0;
  Fused fused = Fused::kNone;
  Addr norm_w = 0;
  float eps = 0;
};

// Whether matmul() over n_tokens tokens takes a fused input (MatmulInput::rms_normed): where it
// runs a one- or few-token shader (not the tiled one, whose tiles do not read whole rows; the
// float shaders normalize the values as they read them, the 8-bit ones then quantize them in
// their teams) and tuning.fuse is 1.
bool fuses_input(int n_tokens, const MatmulTuning& tuning = matmul_tuning());
// Whether matmul() over n_tokens tokens applies an activation to its output (MatmulOut::act):
// where it runs a one- or few-token shader (any of them: each writes its rows' whole sums; the
// tiled one writes tiles, and its split partial sums) and tuning.fuse is 1 or 2.
bool fuses_activation(int n_tokens, const MatmulTuning& tuning = matmul_tuning());

// y[t, y_col + r] = sum_c w[r, c] * x[t, c] (+ bias[r]) (+ y[t, y_col + r])   (kernels::matmul),
// or an activation of it (MatmulOut), the shader chosen by `tuning`.
//   x: [n_tokens, w.n_cols] f32 (and its 8-bit blocks), or a fused input (MatmulInput; only
//   where fuses_input, else a checked failure); y: [n_tokens, y_stride] f32.
void matmul(Stream& s, const Matrix& w, MatmulInput x, Addr y, int n_tokens, int y_stride,
            int y_col, MatmulOut out = {}, const MatmulTuning& tuning = matmul_tuning());
inline void matmul(Stream& s, const Matrix& w, MatmulInput x, Addr y, int n_tokens) {
  matmul(s, w, x, y, n_tokens, static_cast<int>(w.n_rows), 0);
}

// The experts of a mixture-of-experts layer (model/moe.h): w stacks every expert's `rows` rows
// (w.n_rows = n_expert x rows). For each slot s in [0, n_slots), with e = ids[s]:
//   y[s, y_col + r] = sum_c w[e * rows + r, c] * x[s / x_div, c]   (kernels::matmul of
//   model::expert_slice(w, e, rows) on that row).
//   ids: [n_slots] int32; x: [n_slots / x_div, w.n_cols] f32 (and its 8-bit blocks), or a fused
//   input (MatmulInput, where fuses_input(1)); y: [n_slots, y_stride] f32; act: an activation of
//   each slot's products (MatmulOut::act, where fuses_activation(1); kSwigluPairs: an expert's rows
//   are its gate rows then its up rows, and y takes rows / 2 columns).
// One token a workgroup (matmul.comp's IDS): every slot reads its expert's rows.
void matmul_experts(Stream& s, const Matrix& w, int64_t rows, Addr ids, MatmulInput x, int x_div,
                    Addr y, int n_slots, int y_stride, int y_col, MatmulAct act = MatmulAct::kNone,
                    const MatmulTuning& tuning = matmul_tuning());

// A step's slots grouped by expert (moe_group.comp): slots [n_expert, cap] int32 (expert e's
// slots at e * cap, in no set order), counts [n_expert] int32. cap: at least the token count
// (a token chooses an expert once).
struct ExpertGroups {
  Addr slots = 0, counts = 0;
  int n_expert = 0, cap = 0;
};
// Fills `g` from ids [n_slots] (moe_route's). n_expert at most kMaxGroupedExperts (moe_group.comp's
// counters in shared memory).
inline constexpr int kMaxGroupedExperts = 4096;
void moe_group(Stream& s, Addr ids, int n_slots, const ExpertGroups& g);
// Whether n_tokens tokens' expert slots go grouped (moe_group, matmul_experts_grouped) rather
// than a slot at a time (matmul_experts): from as many tokens as the dense matmuls tile.
inline bool groups_expert_slots(int n_tokens, const MatmulTuning& tuning = matmul_tuning()) {
  return n_tokens >= tuning.tiled_min_tokens;
}
// matmul_experts' products with the slots grouped (moe_group): each expert's rows are read once
// per 64 of its slots (matmul_tiled.comp's IDS, or matmul_coop.comp's on tensor cores:
// tiled_shader), not once a slot: the prefill's.
void matmul_experts_grouped(Stream& s, const Matrix& w, int64_t rows, const ExpertGroups& g, Addr x,
                            int x_div, Addr y, int y_stride, int y_col,
                            const MatmulTuning& tuning = matmul_tuning());

}  // namespace glm::gpu
