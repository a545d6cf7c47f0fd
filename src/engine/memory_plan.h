// The host memory an engine needs, said before the model is loaded (docs/engine.md#memory): the
// weights as they will sit in memory, and the KV pool for max_batch sequences of the context
// (or --kv-blocks blocks), against what the machine (or its cgroup) has available. A plan that
// does not fit is refused with the numbers and what to lower, instead of the process being
// killed half-way through loading or at the first long prompt.
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace glm::engine {

// The context an engine of `options` serves for `config`: --ctx-size, else the model's trained
// context up to 8192 (2048 when the file does not say).
int context_size(const Options& options, const model::Config& config);
// KV blocks of the engine's pool: --kv-blocks, else max_batch full contexts.
int kv_block_count(const Options& options, int n_ctx);
// KV blocks of a --draft model's pool: max_batch full contexts (drafting never waits for one).
int draft_kv_block_count(const Options& options, int n_ctx);

struct MemoryPlan {
  size_t weights = 0;    // the file's tensor data (held in memory, repacked or mapped)
  size_t kv = 0;         // the KV pool
  size_t available = 0;  // MemAvailable, or the cgroup's limit less its use if lower; 0 = unknown
  int n_ctx = 0;
  int n_blocks = 0;
  size_t need() const { return weights + kv; }
  // "weights 3.6 GiB + KV cache 7.0 GiB (8 x 32768 positions of f16) = 10.6 GiB of 60.1 GiB
  // available"
  std::string describe(const Options& options) const;
};

// The plan of an engine of `options` over `file` (whose config is `config`), on the host.
MemoryPlan plan_memory(const gguf::File& file, const model::Config& config, const Options& options);
// out_of_memory naming the numbers and what to lower when the plan needs more than is available
// (an unknown availability passes).
Status check_memory(const MemoryPlan& plan, const Options& options);
// What the host has available now: MemAvailable of /proc/meminfo, or less under a cgroup v2
// memory.max; 0 if neither can be read. `meminfo` and `cgroup_dir` are for tests.
size_t available_memory(const std::string& meminfo = "/proc/meminfo",
                        const std::string& cgroup_dir = "/sys/fs/cgroup");

}  // namespace glm::engine
