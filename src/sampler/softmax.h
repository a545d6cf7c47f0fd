// The sampler's row kernels over a vocabulary's logits: the largest value, and the softmax's
// exponentials with their sum. sample() runs them once a token over n_vocab values (65024 for
// ChatGLM2/3, 151552 for GLM-4); on a GPU the device waits for them every step.
// Thread-safety: pure functions. Cost: O(n), in 8-lane vectors (an AVX2 register where the CPU
// has it, else two SSE registers: the same results either way).
#pragma once

#include <cstdint>

namespace glm::sampler {

// The largest of values[0 .. n) (NaNs passed over, unless values[0] is one), n > 0. Eight
// independent maxima: one running maximum is a chain of dependent compares.
float max_value(const float* values, int n);

// exp(d) for d <= 0, the arithmetic exp_shifted uses a lane: within 2 ulp of std::exp where
// the result is a normal float, exactly 1 at 0, and exactly 0 below -87 (-inf included: a
// masked token's probability is 0, never a tiny positive one); NaN stays NaN. For tests.
float exp_nonpositive(float d);

// e[i] = exp_nonpositive(x[i] * scale - max) for i in [0, n), where `max` is the largest of
// x[i] * scale (the temperature's 1 / T, or 1: then exactly x[i] - max); returns their sum:
// eight lanes, each summing its values in float over chunks of 256 values (32 a lane) and the
// chunks in double, the lanes added pairwise at the end (within 2e-6 of the exact sum, and the
// same value for the same row on every machine, whether e is stored or not). x and e: [n]; e
// may be x, or null (the sum alone).
double exp_shifted(const float* x, int n, float scale, float max, float* e);

// The ids i in [0, n) with x[i] * scale - max >= min_d (computed as exp_shifted computes it),
// ascending, into ids (at most max_ids of them); returns their count, or -1 when there are more
// than max_ids. Blocks of eight of which none passes cost one vector compare.
int gather_near(const float* x, int n, float scale, float max, float min_d, int32_t* ids,
                int max_ids);

}  // namespace glm::sampler
