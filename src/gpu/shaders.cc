#include "gpu/shaders.h"

namespace glm::gpu {

bool matmul_shader(DType type, Shader* out, Shader* tiled) {
  switch (type) {
    case DType::kF32:
      *out = Shader::kMatmulF32;
      *tiled = Shader::kMatmulTiledF32;
      return true;
    case DType::kF16:
      *out = Shader::kMatmulF16;
      *tiled = Shader::kMatmulTiledF16;
      return true;
    case DType::kBF16:
      *out = Shader::kMatmulBF16;
      *tiled = Shader::kMatmulTiledBF16;
      return true;
    case DType::kQ4_0:
      *out = Shader::kMatmulQ4_0;
      *tiled = Shader::kMatmulTiledQ4_0;
      return true;
    case DType::kQ4_1:
      *out = Shader::kMatmulQ4_1;
      *tiled = Shader::kMatmulTiledQ4_1;
      return true;
    case DType::kQ5_0:
      *out = Shader::kMatmulQ5_0;
      *tiled = Shader::kMatmulTiledQ5_0;
      return true;
    case DType::kQ5_1:
      *out = Shader::kMatmulQ5_1;
      *tiled = Shader::kMatmulTiledQ5_1;
      return true;
    case DType::kQ8_0:
      *out = Shader::kMatmulQ8_0;
      *tiled = Shader::kMatmulTiledQ8_0;
      return true;
    case DType::kQ4_K:
      *out = Shader::kMatmulQ4_K;
      *tiled = Shader::kMatmulTiledQ4_K;
      return true;
    case DType::kQ5_K:
      *out = Shader::kMatmulQ5_K;
      *tiled = Shader::kMatmulTiledQ5_K;
      return true;
    case DType::kQ6_K:
      *out = Shader::kMatmulQ6_K;
      *tiled = Shader::kMatmulTiledQ6_K;
      return true;
    default:
      return false;
  }
}

bool kv_shaders(DType type, Shader* store, Shader* attention) {
  switch (type) {
    case DType::kF32:
      *store = Shader::kKvStoreF32;
      *attention = Shader::kAttentionF32;
      return true;
    case DType::kF16:
      *store = Shader::kKvStoreF16;
      *attention = Shader::kAttentionF16;
      return true;
    case DType::kQ8_0:
      *store = Shader::kKvStoreQ8_0;
      *attention = Shader::kAttentionQ8_0;
      return true;
    default:
      return false;
  }
}

}  // namespace glm::gpu
