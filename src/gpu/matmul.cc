#include "gpu/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "core/check.h"
#include "core/log.h"
#include "gpu/dispatch.h"

namespace glm::gpu {
namespace {

constexpr int kMatmulTokenTile = 8;  // TT in matmul.comp

// The decode shaders' teams (matmul.comp): threads per row as many as the row has 8-value parts
// (four a 32-value chunk; a power of two, at most 64), so that narrow matrices fill the
// workgroup with several teams; `rows` rows a team (1, 2 or 4 for one token, 1 or 2 for a
// few: rows_log2, the pipeline's specialization, Device::pipeline); the row groups over x,
// then y.
struct TeamGeometry {
  uint32_t tpr_log2 = 0, rows_log2 = 0, gx = 0, gy = 0;
};
TeamGeometry team_geometry(const Matrix& w, int rows, bool one, int64_t n_rows = -1) {
  TeamGeometry g;
  const int64_t n_parts = 4 * ((w.n_cols + 31) / 32);
  while (g.tpr_log2 < 6 && (int64_t{1} << g.tpr_log2) < n_parts) ++g.tpr_log2;
  GLM_CHECK(rows == 1 || rows == 2 || (rows == 4 && one));
  g.rows_log2 = rows == 4 ? 2 : rows - 1;
  const int64_t rows_per_group = int64_t{rows} << (6 - g.tpr_log2);
  const int64_t n_groups = ((n_rows < 0 ? w.n_rows : n_rows) + rows_per_group - 1) / rows_per_group;
  g.gx = static_cast<uint32_t>(std::min<int64_t>(n_groups, kMaxGroups));
  g.gy = static_cast<uint32_t>((n_groups + g.gx - 1) / g.gx);
  return g;
}

// The rows a team of the decode shaders takes: `rows`, or at least a gate row and its up row
// (MatmulAct::kSwigluPairs).
int team_rows(int rows, MatmulAct act) {
  return act == MatmulAct::kSwigluPairs ? std::max(rows, 2) : rows;
}

// 1 when the matmul shaders may read activations at x 16 bytes at a time (x 16-byte aligned,
// rows of a multiple of 4 values: matmul_io.glsl's x_run).
uint32_t vec4_reads(const Matrix& w, Addr x) {
  return (x % 16 == 0 && w.n_cols % 4 == 0) ? 1u : 0u;
}
// The same for the decode shaders' input at x, whose fused norm's weights are read as its rows
// are: 16 bytes at a time where both allow it.
uint32_t vec4_reads(const Matrix& w, Addr x, const MatmulInput& in) {
  const bool norm_ok = in.fused != MatmulInput::Fused::kRmsNorm || in.norm_w % 16 == 0;
  return vec4_reads(w, x) != 0 && norm_ok ? 1u : 0u;
}

}  // namespace

StatusOr<Matrix> upload_matrix(Device* device, DType type, const void* data, int64_t n_rows,
                               int64_t n_cols, bool experts, const MappedFile* file) {
  return upload_stacked(device, type, {{data, n_rows, file}}, n_cols, experts);
}

StatusOr<Matrix> upload_stacked(Device* device, DType type, const std::vector<MatrixRows>& parts,
                                int64_t n_cols, bool experts) {
  int64_t n_rows = 0;
  for (const MatrixRows& part : parts) n_rows += part.n_rows;
  Matrix m;
  if (!matmul_shaders(type, &m.shaders)) {
    return unsupported(std::string("the GPU has no kernel for ") + dtype_name(type) + " weights");
  }
  m.type = type;
  m.n_rows = n_rows;
  m.n_cols = n_cols;
  m.row_bytes = row_bytes(type, n_cols);
  const size_t bytes = m.row_bytes * static_cast<size_t>(n_rows);
  if (bytes >= kMatrixBytesLimit) {
    return unsupported("a " + std::to_string(bytes >> 20) +
                       " MiB weight matrix: the GPU kernels address at most 4 GiB a matrix");
  }
  StatusOr<Buffer> b = device->alloc(bytes, MemoryKind::kDevice);
  if (!b.ok()) return b.status();
  m.buf = std::move(*b);
  std::vector<Device::HostBytes> host;
  for (const MatrixRows& part : parts) {
    host.push_back({part.data, m.row_bytes * static_cast<size_t>(part.n_rows), part.file});
  }
  GLM_RETURN_IF_ERROR(device->upload(host, m.buf, 0));
  // The tensor-core shader this matrix's prefill takes, compiled now: a driver that rejects it
  // (only check_coop_matmul's F16 variant has run here) turns them off, said once, rather than
  // failing the prefill that would compile it.
  if (device->coop_verified() && m.shaders.coop != Shader::kCount) {
    if (Status st = device->try_pipeline(experts ? m.shaders.experts_coop : m.shaders.coop);
        !st.ok()) {
      GLM_LOG_WARN("%s; the prefill runs without tensor cores", st.message().c_str());
      device->set_coop_verified(false);
    }
  }
  return m;
}

StatusOr<Buffer> upload_floats(Device* device, const float* data, size_t n) {
  StatusOr<Buffer> b = device->alloc(n * sizeof(float), MemoryKind::kDevice);
  if (!b.ok()) return b.status();
  GLM_RETURN_IF_ERROR(device->upload(data, n * sizeof(float), *b, 0));
  return b;
}

bool parse_matmul_tuning(const char* text, MatmulTuning* out) {
  if (text == nullptr) return false;
  MatmulTuning t;
  int* const fields[] = {&t.team_rows_one, &t.team_rows_few, &t.tiled_min_tokens,
                         &t.int_dot,       &t.tiled_split,   &t.coop,
                         &t.fuse};
  size_t n = 0;
  // Comma-separated integers, 3 to 7 of them, nothing else.
  for (const char* at = text;; ++at) {
    char* end = nullptr;
    const long v = std::strtol(at, &end, 10);
    if (end == at || n == std::size(fields) || v < -1000000 || v > 1000000) return false;
    *fields[n++] = static_cast<int>(v);
    at = end;
    if (*at == '\0') break;
    if (*at != ',') return false;
  }
  const auto rows_ok = [](int r, int max) { return r == 1 || r == 2 || (r == 4 && max == 4); };
  const auto flag_ok = [](int f, int lo) { return f >= lo && f <= 1; };
  if (n < 3 || !rows_ok(t.team_rows_one, 4) || !rows_ok(t.team_rows_few, 2) ||
      t.tiled_min_tokens < 2 || !flag_ok(t.int_dot, -1) || !flag_ok(t.tiled_split, 0) ||
      !flag_ok(t.coop, -1) || t.fuse < 0 || t.fuse > 2) {
    return false;
  }
  *out = t;
  return true;
}

const MatmulTuning& matmul_tuning() {
  static const MatmulTuning tuning = [] {
    MatmulTuning t;
    const char* env = std::getenv("GLMSERVE_VULKAN_MATMUL");
    if (env != nullptr && *env != '\0' && !parse_matmul_tuning(env, &t)) {
      GLM_LOG_WARN(
          "GLMSERVE_VULKAN_MATMUL=%s ignored: ONE,FEW,TILED_MIN[,DOT[,SPLIT[,COOP[,FUSE]]]] "
          "(rows a team 1, 2 or 4; 1 or 2; tokens >= 2; integer dot products -1 where fast, 0 or "
          "1; split 0 or 1; tensor cores -1 where checked, 0 or 1; fused norms and activations 1, "
          "the activations alone 2, neither 0) "
          "expected",
          env);
    }
    return t;
  }();
  return tuning;
}

int tiled_splits(const Matrix& w, int n_tokens, const MatmulTuning& tuning) {
  constexpr int64_t kMinChunks = 4;  // a split's least: its tile loads and barriers pay for it
  const int64_t groups = (w.n_rows + 127) / 128 * ((n_tokens + 63) / 64);
  const int64_t chunks = (w.n_cols + 31) / 32;
  if (tuning.tiled_split == 0 || groups >= kTiledSplitGroups || chunks < 2 * kMinChunks) return 1;
  const int64_t want = std::min((kTiledSplitGroups + groups - 1) / groups, chunks / kMinChunks);
  // As many splits as `want` of equal chunk counts need (the last may be shorter).
  const int64_t per = (chunks + want - 1) / want;
  return static_cast<int>((chunks + per - 1) / per);
}

bool prefill_in_fp16(const Device& device, const MatmulTuning& tuning) {
  const DeviceInfo& info = device.info();
  return info.fp16_arithmetic &&
         (tuning.coop == 1 || (tuning.coop == -1 && info.coop_matrix && device.coop_verified()));
}

Shader tiled_shader(const Device& device, const Matrix& w, const MatmulTuning& tuning,
                    bool experts) {
  const MatmulShaders& sh = w.shaders;
  if (sh.coop == Shader::kCount || !prefill_in_fp16(device, tuning)) {
    return experts ? sh.experts_tiled : sh.tiled;
  }
  if (device.info().coop_matrix) return experts ? sh.experts_coop : sh.coop;
  return experts ? sh.experts_coop_ref : sh.coop_ref;
}

bool decode_in_int8(const Device& device, const MatmulTuning& tuning) {
  if (!device.info().int_dot || tuning.int_dot == 0) return false;
  return tuning.int_dot == 1 || device.info().int_dot_fast;
}

bool uses_int_dot(const Device& device, const Matrix& w, int n_tokens, const MatmulTuning& tuning) {
  return w.shaders.one_dot != Shader::kCount && n_tokens < tuning.tiled_min_tokens &&
         decode_in_int8(device, tuning);
}

bool fuses_input(int n_tokens, const MatmulTuning& tuning) {
  return tuning.fuse == 1 && n_tokens < tuning.tiled_min_tokens;
}

bool fuses_activation(int n_tokens, const MatmulTuning& tuning) {
  return tuning.fuse >= 1 && n_tokens < tuning.tiled_min_tokens;
}

void quantize_q8(Stream& s, Addr x, Addr y, int n_rows, int64_t n_cols) {
  GLM_CHECK(n_cols % 32 == 0);
  struct {
    Addr x, y;
    uint32_t n_blocks;
  } p{x, y, static_cast<uint32_t>(n_rows * (n_cols / 32))};
  s.dispatch(Shader::kQuantizeQ8, &p, sizeof(p), static_cast<uint32_t>(groups_for(p.n_blocks)));
}

namespace {

// The integer-dot shaders' input of n_rows rows of `in`: their 8-bit blocks where an op wrote
// them (kBlocks); else the f32 rows (normed or not), which the shader's teams quantize as they
// read them (matmul.comp's in_mode 1, 2) where tuning.fuse is 1 (kInTeam); else blocks that
// quantize_q8 writes into the stream's scratch (kBlocks); none (kNone: the float shaders then)
// where that cannot be allocated. in_mode: matmul.comp's for it.
struct IntDotInput {
  enum Kind { kNone, kBlocks, kInTeam } kind = kNone;
  Addr x = 0;  // the blocks, or the f32 rows
  uint32_t in_mode = 0;
};
// matmul.comp's in_mode for f32 rows that its 8-bit variants quantize as they read them (its
// other values: MatmulInput::Fused).
constexpr uint32_t kInF32 = 2;
IntDotInput int_dot_input(Stream& s, const MatmulInput& in, int n_rows, const Matrix& w,
                          const MatmulTuning& tuning) {
  if (in.fused == MatmulInput::Fused::kRmsNorm) {
    return {IntDotInput::kInTeam, in.f32, static_cast<uint32_t>(in.fused)};
  }
  if (in.q8 == 0 && tuning.fuse == 1) return {IntDotInput::kInTeam, in.f32, kInF32};
  if (in.q8 != 0) return {IntDotInput::kBlocks, in.q8};
  const Addr xq = s.scratch(q8_bytes(n_rows, w.n_cols));
  if (xq == 0) return {};
  quantize_q8(s, in.f32, xq, n_rows, w.n_cols);
  return {IntDotInput::kBlocks, xq};
}

// matmul.comp's push constants (its IDS fields last: the plain variants read the rest).
struct DecodePush {
  Addr w, x, x4, y;
  uint32_t n_rows, n_cols, n_tokens, row_bytes, groups_per_y, y_stride, y_col, tpr_log2, x_vec4;
  Addr bias;
  uint32_t has_bias, add_to_y;
  Addr norm_w;  // the input's transform (MatmulInput)
  float eps;
  uint32_t in_mode, out_mode;
  Addr ids;  // IDS
  uint32_t expert_bytes, x_div;
};
static_assert(sizeof(DecodePush) <= 128, "the push constants every Vulkan device takes");

// The fields every decode matmul sets alike: w's n_rows rows (an expert's for IDS) of n_cols
// into y, the input's transform, the output's rule, and the team geometry of `rows` a team
// (*g: its workgroups too).
DecodePush decode_push(const Matrix& w, int64_t n_rows, const MatmulInput& in, Addr y, int y_stride,
                       int y_col, const MatmulOut& out, int rows, bool one, TeamGeometry* g) {
  DecodePush p{};
  p.w = w.buf.address();
  p.x = p.x4 = in.f32;
  p.y = y;
  p.n_rows = static_cast<uint32_t>(n_rows);
  p.n_cols = static_cast<uint32_t>(w.n_cols);
  p.row_bytes = static_cast<uint32_t>(w.row_bytes);
  p.y_stride = static_cast<uint32_t>(y_stride);
  p.y_col = static_cast<uint32_t>(y_col);
  p.x_vec4 = vec4_reads(w, in.f32, in);
  p.bias = out.bias;
  p.has_bias = out.bias != 0 ? 1u : 0u;
  p.add_to_y = out.to_y ? 1u : 0u;
  p.norm_w = in.norm_w;
  p.eps = in.eps;
  p.in_mode = static_cast<uint32_t>(in.fused);
  p.out_mode = static_cast<uint32_t>(out.act);
  *g = team_geometry(w, team_rows(rows, out.act), one, n_rows);
  p.tpr_log2 = g->tpr_log2;
  p.groups_per_y = g->gx;
  return p;
}

}  // namespace

void matmul(Stream& s, const Matrix& w, MatmulInput in, Addr y, int n_tokens, int y_stride,
            int y_col, MatmulOut add, const MatmulTuning& tuning) {
  const Addr x = in.f32;
  const uint32_t has_bias = add.bias != 0 ? 1u : 0u, add_to_y = add.to_y ? 1u : 0u;
  GLM_CHECK(in.fused == MatmulInput::Fused::kNone || fuses_input(n_tokens, tuning));
  GLM_CHECK(add.act == MatmulAct::kNone || fuses_activation(n_tokens, tuning));
  GLM_CHECK(add.act != MatmulAct::kSwigluPairs || w.n_rows % 2 == 0);
  const uint32_t x_vec4 = vec4_reads(w, x, in);
  if (n_tokens >= tuning.tiled_min_tokens) {
    struct {
      Addr w, x, x4, y;
      uint32_t n_rows, n_cols, n_tokens, row_bytes, y_stride, y_col, x_vec4;
      Addr bias;
      uint32_t has_bias, add_to_y, chunks_per_split;
      Addr part;
    } p{w.buf.address(),
        x,
        x,
        y,
        static_cast<uint32_t>(w.n_rows),
        static_cast<uint32_t>(w.n_cols),
        static_cast<uint32_t>(n_tokens),
        static_cast<uint32_t>(w.row_bytes),
        static_cast<uint32_t>(y_stride),
        static_cast<uint32_t>(y_col),
        x_vec4,
        add.bias,
        has_bias,
        add_to_y,
        ~0u,
        0};
    const int64_t gx = (w.n_rows + 127) / 128, gy = (n_tokens + 63) / 64;  // 128 x 64 tiles
    GLM_CHECK(gx <= kMaxGroups && gy <= kMaxGroups);
    // Few tiles: each split of the rows' chunks a workgroup, their sums added up after.
    int splits = tiled_splits(w, n_tokens, tuning);
    if (splits > 1) {
      p.part = s.scratch(static_cast<size_t>(splits) * n_tokens * w.n_rows * sizeof(float));
      if (p.part != 0) {
        const int64_t chunks = (w.n_cols + 31) / 32;
        p.chunks_per_split = static_cast<uint32_t>((chunks + splits - 1) / splits);
      } else {
        splits = 1;  // no scratch: whole rows a workgroup
      }
    }
    s.dispatch(tiled_shader(s.device(), w, tuning), &p, sizeof(p), static_cast<uint32_t>(gx),
               static_cast<uint32_t>(gy), static_cast<uint32_t>(splits));
    if (splits > 1) {
      struct {
        Addr part, y, bias;
        uint32_t n_rows, n_tokens, n_splits, y_stride, y_col, has_bias, add_to_y;
      } r{p.part,
          y,
          add.bias,
          static_cast<uint32_t>(w.n_rows),
          static_cast<uint32_t>(n_tokens),
          static_cast<uint32_t>(splits),
          static_cast<uint32_t>(y_stride),
          static_cast<uint32_t>(y_col),
          has_bias,
          add_to_y};
      dispatch_1d(s, Shader::kMatmulReduce, &r, sizeof(r), int64_t{n_tokens} * w.n_rows);
    }
    return;
  }
  const bool one = n_tokens == 1;
  const IntDotInput xq = uses_int_dot(s.device(), w, n_tokens, tuning)
                             ? int_dot_input(s, in, n_tokens, w, tuning)
                             : IntDotInput{};
  TeamGeometry g;
  DecodePush p = decode_push(w, w.n_rows, in, y, y_stride, y_col, add,
                             one ? tuning.team_rows_one : tuning.team_rows_few, one, &g);
  p.n_tokens = static_cast<uint32_t>(n_tokens);
  const uint32_t gz =
      one ? 1 : static_cast<uint32_t>((n_tokens + kMatmulTokenTile - 1) / kMatmulTokenTile);
  GLM_CHECK(gz <= kMaxGroups);
  const bool dot = xq.kind != IntDotInput::kNone;
  if (dot) {
    p.x = p.x4 = xq.x;
    p.in_mode = xq.in_mode;
  }
  s.dispatch(
      one ? (dot ? w.shaders.one_dot : w.shaders.one) : (dot ? w.shaders.few_dot : w.shaders.few),
      static_cast<int>(g.rows_log2), &p, sizeof(p), g.gx, g.gy, gz);
}

void matmul_experts(Stream& s, const Matrix& w, int64_t rows, Addr ids, MatmulInput in, int x_div,
                    Addr y, int n_slots, int y_stride, int y_col, MatmulAct act,
                    const MatmulTuning& tuning) {
  const Addr x = in.f32;
  GLM_CHECK(rows > 0 && w.n_rows % rows == 0 && x_div > 0);
  GLM_CHECK(in.fused == MatmulInput::Fused::kNone || fuses_input(1, tuning));
  GLM_CHECK(act == MatmulAct::kNone || fuses_activation(1, tuning));
  GLM_CHECK(act != MatmulAct::kSwigluPairs || rows % 2 == 0);
  TeamGeometry g;
  DecodePush p =
      decode_push(w, rows, in, y, y_stride, y_col, {0, false, act}, tuning.team_rows_one, true, &g);
  p.expert_bytes = static_cast<uint32_t>(rows * w.row_bytes);
  p.x_div = static_cast<uint32_t>(x_div);
  // The integer-dot shader where one token's matmul would take it.
  const int x_rows = (n_slots + x_div - 1) / x_div;
  const IntDotInput xq = uses_int_dot(s.device(), w, 1, tuning)
                             ? int_dot_input(s, in, x_rows, w, tuning)
                             : IntDotInput{};
  if (xq.kind != IntDotInput::kNone) p.in_mode = xq.in_mode;
  // A slot a workgroup in z: at most kMaxGroups slots a dispatch, whole tokens each (x_div).
  const int per = static_cast<int>(kMaxGroups / x_div * x_div);
  for (int s0 = 0; s0 < n_slots; s0 += per) {
    const int n = std::min(per, n_slots - s0);
    p.ids = ids + static_cast<Addr>(s0) * sizeof(int32_t);
    p.y = y + static_cast<Addr>(s0) * y_stride * sizeof(float);
    p.n_tokens = static_cast<uint32_t>(n);
    if (xq.kind == IntDotInput::kBlocks) {
      p.x = p.x4 = xq.x + q8_bytes(s0 / x_div, w.n_cols);
      s.dispatch(w.shaders.experts_dot, static_cast<int>(g.rows_log2), &p, sizeof(p), g.gx, g.gy,
                 static_cast<uint32_t>(n));
      continue;
    }
    p.x = p.x4 = x + static_cast<Addr>(s0 / x_div) * w.n_cols * sizeof(float);
    p.x_vec4 = vec4_reads(w, p.x, in);
    s.dispatch(xq.kind == IntDotInput::kInTeam ? w.shaders.experts_dot : w.shaders.experts,
               static_cast<int>(g.rows_log2), &p, sizeof(p), g.gx, g.gy, static_cast<uint32_t>(n));
  }
}

void moe_group(Stream& s, Addr ids, int n_slots, const ExpertGroups& g) {
  GLM_CHECK(g.n_expert >= 1 && g.n_expert <= kMaxGroupedExperts && g.cap >= 1);
  struct {
    Addr ids, counts, slots;
    uint32_t n_slots, n_expert, cap;
  } p{ids,
      g.counts,
      g.slots,
      static_cast<uint32_t>(n_slots),
      static_cast<uint32_t>(g.n_expert),
      static_cast<uint32_t>(g.cap)};
  s.dispatch(Shader::kMoeGroup, &p, sizeof(p), 1);
}

void matmul_experts_grouped(Stream& s, const Matrix& w, int64_t rows, const ExpertGroups& g, Addr x,
                            int x_div, Addr y, int y_stride, int y_col,
                            const MatmulTuning& tuning) {
  GLM_CHECK(rows > 0 && w.n_rows == rows * g.n_expert && x_div > 0);
  struct {
    Addr w, x, x4, y;
    uint32_t n_rows, n_cols, n_tokens, row_bytes, y_stride, y_col, x_vec4;
    Addr bias;
    uint32_t has_bias, add_to_y;
    Addr slots, counts;
    uint32_t cap, expert_bytes, x_div;
  } p{w.buf.address(),
      x,
      x,
      y,
      static_cast<uint32_t>(rows),
      static_cast<uint32_t>(w.n_cols),
      0,
      static_cast<uint32_t>(w.row_bytes),
      static_cast<uint32_t>(y_stride),
      static_cast<uint32_t>(y_col),
      vec4_reads(w, x),
      0,
      0,
      0,
      g.slots,
      g.counts,
      static_cast<uint32_t>(g.cap),
      static_cast<uint32_t>(rows * w.row_bytes),
      static_cast<uint32_t>(x_div)};
  const int64_t gx = (rows + 127) / 128, gy = (g.cap + 63) / 64;  // 128 x 64 tiles
  GLM_CHECK(gx <= kMaxGroups && gy <= kMaxGroups && g.n_expert <= static_cast<int>(kMaxGroups));
  s.dispatch(tiled_shader(s.device(), w, tuning, true), &p, sizeof(p), static_cast<uint32_t>(gx),
             static_cast<uint32_t>(gy), static_cast<uint32_t>(g.n_expert));
}

}  // namespace glm::gpu
