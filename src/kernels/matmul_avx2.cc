// avx2 matmul variant (internal.h). Returns false for types it does not handle yet.
#include "kernels/internal.h"

namespace glm::kernels::internal {

bool matmul_avx2(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                   ThreadPool* pool) {
  return false;
}

int act_block_avx2(DType t) { return -1; }

}  // namespace glm::kernels::internal
