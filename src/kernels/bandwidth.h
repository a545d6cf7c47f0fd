// Memory read bandwidth of this machine, measured the way decode reads weights: each thread
// streams its own contiguous part of a buffer much larger than the caches. The ceiling that
// `glmserve bench engine` compares generation speed against.
// Cost: allocates and touches `bytes` once, then reads it `reps` times. Not thread-safe with
// other users of the pool.
#pragma once

#include <cstddef>

#include "kernels/thread_pool.h"

namespace glm::kernels {

// Best-of-`reps` read bandwidth in GB/s (1e9 bytes per second) with the pool's threads.
double measure_read_bandwidth(size_t bytes, int reps, ThreadPool* pool);

}  // namespace glm::kernels
