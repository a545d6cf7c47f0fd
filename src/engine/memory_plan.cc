#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/dtype.h"
#include "model/kv_pool.h"

namespace glm::engine {
namespace {

double gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// The first number of a file ("max" or unreadable: 0).
size_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word.empty() || word[0] < '0' || word[0] > '9') return 0;
  return static_cast<size_t>(std::stoull(word));
}

}  // namespace

int context_size(const Options& options, const model::Config& config) {
  if (options.n_ctx > 0) return options.n_ctx;
  return std::min(config.n_ctx_train > 0 ? config.n_ctx_train : 2048, 8192);
}

int draft_kv_block_count(const Options& options, int n_ctx) {
  const int bt = std::max(options.block_tokens, 1);
  return std::max(options.max_batch, 1) * ((n_ctx + bt - 1) / bt);
}

int kv_block_count(const Options& options, int n_ctx) {
  return options.kv_blocks > 0 ? options.kv_blocks : draft_kv_block_count(options, n_ctx);
}

MemoryPlan plan_memory(const gguf::File& file, const model::Config& config,
                       const Options& options) {
  MemoryPlan p;
  for (const gguf::TensorInfo& t : file.tensors()) p.weights += t.n_bytes;
  p.n_ctx = context_size(options, config);
  p.n_blocks = kv_block_count(options, p.n_ctx);
  p.kv = model::KvPool::bytes_for(config, p.n_blocks, std::max(options.block_tokens, 1),
                                  options.kv_type);
  if (options.spec == generation::SpecMode::kMtp && config.moe.n_layer_nextn > 0) {
    // The MTP block's own pool, as EngineImpl makes it.
    p.kv += model::KvPool::bytes_for(model::mtp_kv_config(config),
                                     draft_kv_block_count(options, p.n_ctx),
                                     std::max(options.block_tokens, 1), options.kv_type);
  }
  p.available = available_memory();
  return p;
}

std::string MemoryPlan::describe(const Options& options) const {
  char buf[256];
  const std::string shape = options.kv_blocks > 0
                                ? std::to_string(n_blocks) + " blocks"
                                : std::to_string(std::max(options.max_batch, 1)) + " x " +
                                      std::to_string(n_ctx) + " positions";
  std::snprintf(buf, sizeof(buf), "weights %.1f GiB + KV cache %.1f GiB (%s of %s) = %.1f GiB",
                gib(weights), gib(kv), shape.c_str(), dtype_name(options.kv_type), gib(need()));
  std::string s = buf;
  if (available > 0) {
    std::snprintf(buf, sizeof(buf), " of %.1f GiB available", gib(available));
    s += buf;
  }
  return s;
}

Status check_memory(const MemoryPlan& plan, const Options& options) {
  if (plan.available == 0 || plan.need() <= plan.available) return Status::Ok();
  std::string what = "lower --ctx-size or --max-batch";
  if (options.kv_type != DType::kQ8_0) what += ", or use --kv q8_0 (about half the KV memory)";
  return Status(ErrorCode::kOutOfMemory, "this model does not fit in memory: it needs " +
                                             plan.describe(options) + ": " + what);
}

size_t available_memory(const std::string& meminfo, const std::string& cgroup_dir) {
  size_t avail = 0;
  std::ifstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    size_t kb = 0;
    if (fields >> kb) avail = kb * 1024;
    break;
  }
  const size_t limit = read_number(cgroup_dir + "/memory.max");
  if (limit > 0) {
    const size_t used = read_number(cgroup_dir + "/memory.current");
    const size_t room = limit > used ? limit - used : 0;
    avail = avail == 0 ? room : std::min(avail, room);
  }
  return avail;
}

}  // namespace glm::engine
