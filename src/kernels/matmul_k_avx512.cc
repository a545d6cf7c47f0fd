// AVX-512 VNNI integer path for the k-quants (Q4_K, Q6_K): not yet specialized; the generic
// path handles them.
#include "kernels/matmul_avx512.h"

namespace glm::kernels::internal {

int act_block_k_avx512(DType t) { return -1; }

bool matmul_k_avx512(const WeightView& w, const float* x, float* y, int64_t n_tokens,
                     ThreadPool* pool) {
  return false;
}

}  // namespace glm::kernels::internal
