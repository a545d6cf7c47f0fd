#include "gpu/shaders.h"

#include <utility>

namespace glm::gpu {

bool matmul_shaders(DType type, MatmulShaders* out) {
  switch (type) {
    case DType::kF32:
      *out = kF32MatmulShaders;
      return true;
    case DType::kF16:
      *out = {Shader::kMatvecF16,
              Shader::kMatmulF16,
              Shader::kMatmulTiledF16,
              Shader::kMatvecIdF16,
              Shader::kMatmulTiledIdF16,
              Shader::kCount,
              Shader::kCount,
              Shader::kCount,
              Shader::kMatmulCoopF16,
              Shader::kMatmulCoopRefF16,
              Shader::kMatmulCoopIdF16,
              Shader::kMatmulCoopIdRefF16};
      return true;
    case DType::kBF16:
      *out = {Shader::kMatvecBF16,
              Shader::kMatmulBF16,
              Shader::kMatmulTiledBF16,
              Shader::kMatvecIdBF16,
              Shader::kMatmulTiledIdBF16,
              Shader::kCount,
              Shader::kCount,
              Shader::kCount,
              Shader::kMatmulCoopBF16,
              Shader::kMatmulCoopRefBF16,
              Shader::kMatmulCoopIdBF16,
              Shader::kMatmulCoopIdRefBF16};
      return true;
    case DType::kQ4_0:
      *out = {Shader::kMatvecQ4_0,        Shader::kMatmulQ4_0,        Shader::kMatmulTiledQ4_0,
              Shader::kMatvecIdQ4_0,      Shader::kMatmulTiledIdQ4_0, Shader::kMatvecDotQ4_0,
              Shader::kMatmulDotQ4_0,     Shader::kMatvecIdDotQ4_0,   Shader::kMatmulCoopQ4_0,
              Shader::kMatmulCoopRefQ4_0, Shader::kMatmulCoopIdQ4_0,  Shader::kMatmulCoopIdRefQ4_0};
      return true;
    case DType::kQ4_1:
      *out = {Shader::kMatvecQ4_1,        Shader::kMatmulQ4_1,        Shader::kMatmulTiledQ4_1,
              Shader::kMatvecIdQ4_1,      Shader::kMatmulTiledIdQ4_1, Shader::kMatvecDotQ4_1,
              Shader::kMatmulDotQ4_1,     Shader::kMatvecIdDotQ4_1,   Shader::kMatmulCoopQ4_1,
              Shader::kMatmulCoopRefQ4_1, Shader::kMatmulCoopIdQ4_1,  Shader::kMatmulCoopIdRefQ4_1};
      return true;
    case DType::kQ5_0:
      *out = {Shader::kMatvecQ5_0,        Shader::kMatmulQ5_0,        Shader::kMatmulTiledQ5_0,
              Shader::kMatvecIdQ5_0,      Shader::kMatmulTiledIdQ5_0, Shader::kMatvecDotQ5_0,
              Shader::kMatmulDotQ5_0,     Shader::kMatvecIdDotQ5_0,   Shader::kMatmulCoopQ5_0,
              Shader::kMatmulCoopRefQ5_0, Shader::kMatmulCoopIdQ5_0,  Shader::kMatmulCoopIdRefQ5_0};
      return true;
    case DType::kQ5_1:
      *out = {Shader::kMatvecQ5_1,        Shader::kMatmulQ5_1,        Shader::kMatmulTiledQ5_1,
              Shader::kMatvecIdQ5_1,      Shader::kMatmulTiledIdQ5_1, Shader::kMatvecDotQ5_1,
              Shader::kMatmulDotQ5_1,     Shader::kMatvecIdDotQ5_1,   Shader::kMatmulCoopQ5_1,
              Shader::kMatmulCoopRefQ5_1, Shader::kMatmulCoopIdQ5_1,  Shader::kMatmulCoopIdRefQ5_1};
      return true;
    case DType::kQ8_0:
      *out = {Shader::kMatvecQ8_0,        Shader::kMatmulQ8_0,        Shader::kMatmulTiledQ8_0,
              Shader::kMatvecIdQ8_0,      Shader::kMatmulTiledIdQ8_0, Shader::kMatvecDotQ8_0,
              Shader::kMatmulDotQ8_0,     Shader::kMatvecIdDotQ8_0,   Shader::kMatmulCoopQ8_0,
              Shader::kMatmulCoopRefQ8_0, Shader::kMatmulCoopIdQ8_0,  Shader::kMatmulCoopIdRefQ8_0};
      return true;
    case DType::kQ4_K:
      *out = {Shader::kMatvecQ4_K,        Shader::kMatmulQ4_K,        Shader::kMatmulTiledQ4_K,
              Shader::kMatvecIdQ4_K,      Shader::kMatmulTiledIdQ4_K, Shader::kMatvecDotQ4_K,
              Shader::kMatmulDotQ4_K,     Shader::kMatvecIdDotQ4_K,   Shader::kMatmulCoopQ4_K,
              Shader::kMatmulCoopRefQ4_K, Shader::kMatmulCoopIdQ4_K,  Shader::kMatmulCoopIdRefQ4_K};
      return true;
    case DType::kQ5_K:
      *out = {Shader::kMatvecQ5_K,        Shader::kMatmulQ5_K,        Shader::kMatmulTiledQ5_K,
              Shader::kMatvecIdQ5_K,      Shader::kMatmulTiledIdQ5_K, Shader::kMatvecDotQ5_K,
              Shader::kMatmulDotQ5_K,     Shader::kMatvecIdDotQ5_K,   Shader::kMatmulCoopQ5_K,
              Shader::kMatmulCoopRefQ5_K, Shader::kMatmulCoopIdQ5_K,  Shader::kMatmulCoopIdRefQ5_K};
      return true;
    case DType::kQ6_K:
      *out = {Shader::kMatvecQ6_K,        Shader::kMatmulQ6_K,        Shader::kMatmulTiledQ6_K,
              Shader::kMatvecIdQ6_K,      Shader::kMatmulTiledIdQ6_K, Shader::kMatvecDotQ6_K,
              Shader::kMatmulDotQ6_K,     Shader::kMatvecIdDotQ6_K,   Shader::kMatmulCoopQ6_K,
              Shader::kMatmulCoopRefQ6_K, Shader::kMatmulCoopIdQ6_K,  Shader::kMatmulCoopIdRefQ6_K};
      return true;
    default:
      return false;
  }
}

bool kv_shaders(DType type, KvShaders* out) {
  switch (type) {
    case DType::kF32:
      *out = {Shader::kKvStoreF32, Shader::kAttentionF32, Shader::kAttentionRowsF32,
              Shader::kAttentionWideF32, Shader::kAttentionRowsWideF32};
      return true;
    case DType::kF16:
      *out = {Shader::kKvStoreF16, Shader::kAttentionF16, Shader::kAttentionRowsF16,
              Shader::kAttentionWideF16, Shader::kAttentionRowsWideF16};
      return true;
    case DType::kQ8_0:
      *out = {Shader::kKvStoreQ8_0, Shader::kAttentionQ8_0, Shader::kAttentionRowsQ8_0,
              Shader::kAttentionWideQ8_0, Shader::kAttentionRowsWideQ8_0};
      return true;
    default:
      return false;
  }
}

MatmulRole matmul_role(Shader shader) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                  DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    MatmulShaders sh{};
    if (!matmul_shaders(t, &sh)) continue;
    const std::pair<Shader, MatmulRole> roles[] = {
        {sh.one, MatmulRole::kOne},
        {sh.few, MatmulRole::kFew},
        {sh.tiled, MatmulRole::kTiled},
        {sh.experts, MatmulRole::kExperts},
        {sh.experts_tiled, MatmulRole::kExpertsTiled},
        {sh.one_dot, MatmulRole::kOneDot},
        {sh.few_dot, MatmulRole::kFewDot},
        {sh.experts_dot, MatmulRole::kExpertsDot},
        {sh.coop, MatmulRole::kCoop},
        {sh.coop_ref, MatmulRole::kCoopRef},
        {sh.experts_coop, MatmulRole::kExpertsCoop},
        {sh.experts_coop_ref, MatmulRole::kExpertsCoopRef},
    };
    for (const auto& [s, role] : roles) {
      if (s == shader) return role;
    }
  }
  return MatmulRole::kNone;
}

std::vector<int> shader_specs(Shader shader) {
  switch (matmul_role(shader)) {
    case MatmulRole::kOne:
    case MatmulRole::kOneDot:
    case MatmulRole::kExperts:
    case MatmulRole::kExpertsDot:
      return {0, 1, 2};
    case MatmulRole::kFew:
    case MatmulRole::kFewDot:
      return {0, 1};
    default:
      return {};
  }
}

}  // namespace glm::gpu
