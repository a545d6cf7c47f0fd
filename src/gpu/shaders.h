// The compute shaders embedded in the binary: GLSL under gpu/shaders/, compiled by glslc at
// build time into SPIR-V (one variant per weight or KV type, chosen by a -D define), embedded
// as word arrays by the generated shader_table.cc. The CPU kernel each one mirrors is its
// reference (gpu_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace glm::gpu {

// X(enum name, spirv name): spirv name = the generated array's name (CMakeLists.txt).
#define GLM_GPU_SHADERS(X)                            \
  X(kMatmulF32, matmul_f32)                           \
  X(kMatmulF16, matmul_f16)                           \
  X(kMatmulBF16, matmul_bf16)                         \
  X(kMatmulQ4_0, matmul_q4_0)                         \
  X(kMatmulQ4_1, matmul_q4_1)                         \
  X(kMatmulQ5_0, matmul_q5_0)                         \
  X(kMatmulQ5_1, matmul_q5_1)                         \
  X(kMatmulQ8_0, matmul_q8_0)                         \
  X(kMatmulQ4_K, matmul_q4_k)                         \
  X(kMatmulQ5_K, matmul_q5_k)                         \
  X(kMatmulQ6_K, matmul_q6_k)                         \
  X(kMatvecF32, matvec_f32)                           \
  X(kMatvecF16, matvec_f16)                           \
  X(kMatvecBF16, matvec_bf16)                         \
  X(kMatvecQ4_0, matvec_q4_0)                         \
  X(kMatvecQ4_1, matvec_q4_1)                         \
  X(kMatvecQ5_0, matvec_q5_0)                         \
  X(kMatvecQ5_1, matvec_q5_1)                         \
  X(kMatvecQ8_0, matvec_q8_0)                         \
  X(kMatvecQ4_K, matvec_q4_k)                         \
  X(kMatvecQ5_K, matvec_q5_k)                         \
  X(kMatvecQ6_K, matvec_q6_k)                         \
  X(kMatmulTiledF32, matmul_tiled_f32)                \
  X(kMatmulTiledF16, matmul_tiled_f16)                \
  X(kMatmulTiledBF16, matmul_tiled_bf16)              \
  X(kMatmulTiledQ4_0, matmul_tiled_q4_0)              \
  X(kMatmulTiledQ4_1, matmul_tiled_q4_1)              \
  X(kMatmulTiledQ5_0, matmul_tiled_q5_0)              \
  X(kMatmulTiledQ5_1, matmul_tiled_q5_1)              \
  X(kMatmulTiledQ8_0, matmul_tiled_q8_0)              \
  X(kMatmulTiledQ4_K, matmul_tiled_q4_k)              \
  X(kMatmulTiledQ5_K, matmul_tiled_q5_k)              \
  X(kMatmulTiledQ6_K, matmul_tiled_q6_k)              \
  X(kRmsNorm, rms_norm)                               \
  X(kHeadNorm, head_norm)                             \
  X(kLayerNorm, layer_norm)                           \
  X(kRope, rope)                                      \
  X(kSwiglu, swiglu)                                  \
  X(kGelu, gelu)                                      \
  X(kAdd, add)                                        \
  X(kCopyRows, copy_rows)                             \
  X(kKvStoreF32, kv_store_f32)                        \
  X(kKvStoreF16, kv_store_f16)                        \
  X(kKvStoreQ8_0, kv_store_q8_0)                      \
  X(kAttentionF32, attention_f32)                     \
  X(kAttentionF16, attention_f16)                     \
  X(kAttentionQ8_0, attention_q8_0)                   \
  X(kAttentionMerge, attention_merge)                 \
  X(kAttentionRowsF32, attention_rows_f32)            \
  X(kAttentionRowsF16, attention_rows_f16)            \
  X(kAttentionRowsQ8_0, attention_rows_q8_0)          \
  X(kAttentionWideF32, attention_wide_f32)            \
  X(kAttentionWideF16, attention_wide_f16)            \
  X(kAttentionWideQ8_0, attention_wide_q8_0)          \
  X(kAttentionRowsWideF32, attention_rows_wide_f32)   \
  X(kAttentionRowsWideF16, attention_rows_wide_f16)   \
  X(kAttentionRowsWideQ8_0, attention_rows_wide_q8_0) \
  X(kMatvecIdF32, matvec_id_f32)                      \
  X(kMatvecIdF16, matvec_id_f16)                      \
  X(kMatvecIdBF16, matvec_id_bf16)                    \
  X(kMatvecIdQ4_0, matvec_id_q4_0)                    \
  X(kMatvecIdQ4_1, matvec_id_q4_1)                    \
  X(kMatvecIdQ5_0, matvec_id_q5_0)                    \
  X(kMatvecIdQ5_1, matvec_id_q5_1)                    \
  X(kMatvecIdQ8_0, matvec_id_q8_0)                    \
  X(kMatvecIdQ4_K, matvec_id_q4_k)                    \
  X(kMatvecIdQ5_K, matvec_id_q5_k)                    \
  X(kMatvecIdQ6_K, matvec_id_q6_k)                    \
  X(kMoeRoute, moe_route)                             \
  X(kMoeCombine, moe_combine)                         \
  X(kMatmulTiledIdF32, matmul_tiled_id_f32)           \
  X(kMatmulTiledIdF16, matmul_tiled_id_f16)           \
  X(kMatmulTiledIdBF16, matmul_tiled_id_bf16)         \
  X(kMatmulTiledIdQ4_0, matmul_tiled_id_q4_0)         \
  X(kMatmulTiledIdQ4_1, matmul_tiled_id_q4_1)         \
  X(kMatmulTiledIdQ5_0, matmul_tiled_id_q5_0)         \
  X(kMatmulTiledIdQ5_1, matmul_tiled_id_q5_1)         \
  X(kMatmulTiledIdQ8_0, matmul_tiled_id_q8_0)         \
  X(kMatmulTiledIdQ4_K, matmul_tiled_id_q4_k)         \
  X(kMatmulTiledIdQ5_K, matmul_tiled_id_q5_k)         \
  X(kMatmulTiledIdQ6_K, matmul_tiled_id_q6_k)         \
  X(kMoeGroup, moe_group)                             \
  X(kQuantizeQ8, quantize_q8)                         \
  X(kMatvecDotQ4_0, matvec_dot_q4_0)                  \
  X(kMatvecDotQ4_1, matvec_dot_q4_1)                  \
  X(kMatvecDotQ5_0, matvec_dot_q5_0)                  \
  X(kMatvecDotQ5_1, matvec_dot_q5_1)                  \
  X(kMatvecDotQ8_0, matvec_dot_q8_0)                  \
  X(kMatvecDotQ4_K, matvec_dot_q4_k)                  \
  X(kMatvecDotQ5_K, matvec_dot_q5_k)                  \
  X(kMatvecDotQ6_K, matvec_dot_q6_k)                  \
  X(kMatmulDotQ4_0, matmul_dot_q4_0)                  \
  X(kMatmulDotQ4_1, matmul_dot_q4_1)                  \
  X(kMatmulDotQ5_0, matmul_dot_q5_0)                  \
  X(kMatmulDotQ5_1, matmul_dot_q5_1)                  \
  X(kMatmulDotQ8_0, matmul_dot_q8_0)                  \
  X(kMatmulDotQ4_K, matmul_dot_q4_k)                  \
  X(kMatmulDotQ5_K, matmul_dot_q5_k)                  \
  X(kMatmulDotQ6_K, matmul_dot_q6_k)                  \
  X(kMatvecIdDotQ4_0, matvec_id_dot_q4_0)             \
  X(kMatvecIdDotQ4_1, matvec_id_dot_q4_1)             \
  X(kMatvecIdDotQ5_0, matvec_id_dot_q5_0)             \
  X(kMatvecIdDotQ5_1, matvec_id_dot_q5_1)             \
  X(kMatvecIdDotQ8_0, matvec_id_dot_q8_0)             \
  X(kMatvecIdDotQ4_K, matvec_id_dot_q4_k)             \
  X(kMatvecIdDotQ5_K, matvec_id_dot_q5_k)             \
  X(kMatvecIdDotQ6_K, matvec_id_dot_q6_k)             \
  X(kMatmulReduce, matmul_reduce)                     \
  X(kMatmulCoopF16, matmul_coop_f16)                  \
  X(kMatmulCoopBF16, matmul_coop_bf16)                \
  X(kMatmulCoopQ4_0, matmul_coop_q4_0)                \
  X(kMatmulCoopQ4_1, matmul_coop_q4_1)                \
  X(kMatmulCoopQ5_0, matmul_coop_q5_0)                \
  X(kMatmulCoopQ5_1, matmul_coop_q5_1)                \
  X(kMatmulCoopQ8_0, matmul_coop_q8_0)                \
  X(kMatmulCoopQ4_K, matmul_coop_q4_k)                \
  X(kMatmulCoopQ5_K, matmul_coop_q5_k)                \
  X(kMatmulCoopQ6_K, matmul_coop_q6_k)                \
  X(kMatmulCoopRefF16, matmul_coop_ref_f16)           \
  X(kMatmulCoopRefBF16, matmul_coop_ref_bf16)         \
  X(kMatmulCoopRefQ4_0, matmul_coop_ref_q4_0)         \
  X(kMatmulCoopRefQ4_1, matmul_coop_ref_q4_1)         \
  X(kMatmulCoopRefQ5_0, matmul_coop_ref_q5_0)         \
  X(kMatmulCoopRefQ5_1, matmul_coop_ref_q5_1)         \
  X(kMatmulCoopRefQ8_0, matmul_coop_ref_q8_0)         \
  X(kMatmulCoopRefQ4_K, matmul_coop_ref_q4_k)         \
  X(kMatmulCoopRefQ5_K, matmul_coop_ref_q5_k)         \
  X(kMatmulCoopRefQ6_K, matmul_coop_ref_q6_k)         \
  X(kMatmulCoopIdF16, matmul_coop_id_f16)             \
  X(kMatmulCoopIdBF16, matmul_coop_id_bf16)           \
  X(kMatmulCoopIdQ4_0, matmul_coop_id_q4_0)           \
  X(kMatmulCoopIdQ4_1, matmul_coop_id_q4_1)           \
  X(kMatmulCoopIdQ5_0, matmul_coop_id_q5_0)           \
  X(kMatmulCoopIdQ5_1, matmul_coop_id_q5_1)           \
  X(kMatmulCoopIdQ8_0, matmul_coop_id_q8_0)           \
  X(kMatmulCoopIdQ4_K, matmul_coop_id_q4_k)           \
  X(kMatmulCoopIdQ5_K, matmul_coop_id_q5_k)           \
  X(kMatmulCoopIdQ6_K, matmul_coop_id_q6_k)           \
  X(kMatmulCoopIdRefF16, matmul_coop_id_ref_f16)      \
  X(kMatmulCoopIdRefBF16, matmul_coop_id_ref_bf16)    \
  X(kMatmulCoopIdRefQ4_0, matmul_coop_id_ref_q4_0)    \
  X(kMatmulCoopIdRefQ4_1, matmul_coop_id_ref_q4_1)    \
  X(kMatmulCoopIdRefQ5_0, matmul_coop_id_ref_q5_0)    \
  X(kMatmulCoopIdRefQ5_1, matmul_coop_id_ref_q5_1)    \
  X(kMatmulCoopIdRefQ8_0, matmul_coop_id_ref_q8_0)    \
  X(kMatmulCoopIdRefQ4_K, matmul_coop_id_ref_q4_k)    \
  X(kMatmulCoopIdRefQ5_K, matmul_coop_id_ref_q5_k)    \
  X(kMatmulCoopIdRefQ6_K, matmul_coop_id_ref_q6_k)

enum class Shader : int {
#define GLM_GPU_ENUM(e, s) e,
  GLM_GPU_SHADERS(GLM_GPU_ENUM)
#undef GLM_GPU_ENUM
      kCount
};
inline constexpr int kShaderCount = static_cast<int>(Shader::kCount);

struct Spirv {
  const uint32_t* words;
  size_t n_words;
  const char* name;  // "matmul_q4_0"
};
// Each shader's SPIR-V is built twice from its one source (shaders/common.glsl, UNROLLED):
// unrolled, the loops that index a thread's arrays unrolled so that the arrays stay in
// registers (what a device runs), and rolled, every loop as written (what GPU-assisted
// validation runs: its instrumentation of the unrolled code takes lavapipe 20-100 times as long
// to compile, and unrolling moves no address a shader reads or writes). Device::shader_build
// says which a device takes.
enum class ShaderBuild { kUnrolled, kRolled };
const Spirv& spirv(Shader shader, ShaderBuild build = ShaderBuild::kUnrolled);

// The matmul variants for a weight type: one token (matvec: a sequence's decode step), a few
// tokens (up to 8 a tile: batched decode, drafts) and the tiled one for many (prefill).
// experts: the one-token variant over a mixture-of-experts layer's stacked experts, each slot
// its own expert (matmul.comp's IDS); experts_tiled: the tiled one over the slots grouped by
// expert (matmul_tiled.comp's IDS).
// one_dot, few_dot, experts_dot: one, few and experts over 8-bit activations with integer dot
// products (matmul.comp's IDOT), for the quantized types; Shader::kCount where there is none.
// coop: the tiled one on tensor cores (matmul_coop.comp), coop_ref: the same with its products
// in scalar code (its REF); experts_coop, experts_coop_ref: those of experts_tiled (its IDS):
// for the 16-bit and quantized types, Shader::kCount for f32.
struct MatmulShaders {
  Shader one;
  Shader few;
  Shader tiled;
  Shader experts;
  Shader experts_tiled;
  Shader one_dot;
  Shader few_dot;
  Shader experts_dot;
  Shader coop;
  Shader coop_ref;
  Shader experts_coop;
  Shader experts_coop_ref;
};
// f32 weights' (no integer-dot and no tensor-core variants); what a Matrix holds until set.
inline constexpr MatmulShaders kF32MatmulShaders{Shader::kMatvecF32,
                                                 Shader::kMatmulF32,
                                                 Shader::kMatmulTiledF32,
                                                 Shader::kMatvecIdF32,
                                                 Shader::kMatmulTiledIdF32,
                                                 Shader::kCount,
                                                 Shader::kCount,
                                                 Shader::kCount,
                                                 Shader::kCount,
                                                 Shader::kCount,
                                                 Shader::kCount,
                                                 Shader::kCount};
// False if the GPU has no kernel for the type.
bool matmul_shaders(DType type, MatmulShaders* out);
// Which of its weight type's MatmulShaders `shader` is (the member of that name); kNone for the
// shaders that are no matmul variant.
enum class MatmulRole {
  kNone,
  kOne,
  kFew,
  kTiled,
  kExperts,
  kExpertsTiled,
  kOneDot,
  kFewDot,
  kExpertsDot,
  kCoop,
  kCoopRef,
  kExpertsCoop,
  kExpertsCoopRef
};
MatmulRole matmul_role(Shader shader);
// The values of its specialization constant 0 a shader runs with (gpu::Device::pipeline's
// spec), each a pipeline of its own: matmul.comp's ROWS_LOG2 for the decode matmuls, 0 to 2
// for one token's and the experts' (teams of 1, 2 and 4 rows), 0 and 1 for a few tokens';
// empty for the rest, which run on their own defaults.
std::vector<int> shader_specs(Shader shader);

// The KV store and attention variants for a KV cache type (f32, f16, q8_0): attention a query
// row a workgroup, attention_rows 8 (attention.comp's ROWS); the *_wide ones for heads of 256
// to 576 dims (attention.comp's DIMS 9: latent attention's rows).
struct KvShaders {
  Shader store;
  Shader attention;
  Shader attention_rows;
  Shader attention_wide;
  Shader attention_rows_wide;
};
bool kv_shaders(DType type, KvShaders* out);

}  // namespace glm::gpu
