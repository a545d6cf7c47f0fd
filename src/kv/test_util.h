// Helpers shared by the kv module's tests.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"

namespace glm::kv::testing {

// Tokens per block in the disk tests: small, so that a few tokens fill several blocks.
inline constexpr int kBt = 4;

// n consecutive token ids from first.
inline std::vector<int32_t> seq_tokens(int32_t first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

// The admission of a request with prompt and max_new tokens to generate (prompt must outlive it).
inline AdmitInput input(const std::vector<int32_t>& prompt, int max_new, int n_ctx = 1000) {
  AdmitInput in;
  in.prompt = &prompt;
  in.max_new_tokens = max_new;
  in.n_ctx = n_ctx;
  return in;
}

}  // namespace glm::kv::testing
