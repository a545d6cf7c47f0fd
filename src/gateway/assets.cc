#include "gateway/assets.h"

#include <cstddef>

namespace glm::gateway {
namespace embedded {
// Defined in the generated web_assets.cc (embed_assets.cmake).
extern const Asset kAssets[];
extern const size_t kNumAssets;
}  // namespace embedded

const Asset* find_asset(std::string_view path) {
  for (size_t i = 0; i < embedded::kNumAssets; ++i) {
    if (embedded::kAssets[i].path == path) return &embedded::kAssets[i];
  }
  return nullptr;
}

size_t assets_gzip_bytes() {
  size_t n = 0;
  for (size_t i = 0; i < embedded::kNumAssets; ++i) {
    const Asset& a = embedded::kAssets[i];
    n += a.gzip.empty() ? a.body.size() : a.gzip.size();
  }
  return n;
}

}  // namespace glm::gateway
