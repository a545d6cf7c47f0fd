// glmserve bench engine: prompt processing (pp) and generation (tg) tokens/s of the model
// forward, like llama-bench (docs/performance.md), plus the memory-bandwidth view of generation:
// bytes of weights read per generated token x tokens/s, against a read bandwidth measured here.
//   pp<P>: one forward of P random tokens from an empty cache (logits of the last one).
//   tg<N>: N single-token forwards from an empty cache, one after the other.
//   -d D: both start after D random tokens already in the cache (prefilled once, not timed), as
//   llama-bench's -d: the speed deep in a conversation, where attention reads D positions more.
// Each test runs -r times after a warm-up; the median, spread and every sample are reported.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "gguf/gguf.h"
#include "kernels/bandwidth.h"
#include "kernels/isa.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "model/kv_pool.h"
#include "model/model.h"

namespace glm::cli {
namespace {

constexpr const char* kHelp =
    "usage: glmserve bench engine --model M.gguf [-p 512] [-n 128] [-t THREADS] [-r 5] [--json]\n"
    "                             [-d 0] [--kv f16|f32|q8_0] [--bw-mb 1024] [--repack 1|0]\n"
    "                             [--spec ngram|mtp] [--draft D.gguf] [--device D]\n"
    "                             [--lora A.gguf[:S]]... [--adapter A.gguf[:S]]\n"
    "Measures the model forward like llama-bench:\n"
    "  pp<P>  prompt processing: one batch of P tokens (tokens/s)\n"
    "  tg<N>  generation: N single-token steps (tokens/s)\n"
    "and generation against the memory-bandwidth limit: weight bytes read per token x tokens/s,\n"
    "over a streaming read bandwidth measured with the same threads.\n"
    "  -p, --n-prompt  prompt tokens (0 skips pp)         -n, --n-gen  generated tokens (0 skips)\n"
    "  -t, --threads   threads (default: physical cores)  -r, --reps   repetitions (default 5)\n"
    "  -d, --depth D   tokens already in the KV cache when pp and tg start (default 0; they are\n"
    "                  prefilled once before the tests, not timed), like llama-bench's -d\n"
    "  --kv            KV cache type: f16 (default), f32 or q8_0\n"
    "  --bw-mb         bandwidth buffer (MiB; 0 skips)\n"
    "  --repack        1 (default): repack weights for the fastest kernels at load (as the\n"
    "                  engine does); 0: compute from the file's mapping\n"
    "  --json          one JSON object instead of the table\n"
    "  --device D      auto, cpu, vulkan or vulkan:N (default auto); --gpu-layers N and\n"
    "                  --cpu-moe N|all|auto as run's\n"
    "  --spec ngram    also the cost of speculative decoding's verify pass of k = 1, 2, 4, 8\n"
    "                  drafted tokens in decode passes, and the acceptance where each breaks\n"
    "                  even (tokens/s of real drafts: glmserve run --spec ngram; docs/engine.md)\n"
    "  --draft D.gguf  the same with a draft model: also D's decode pass (r decode passes of M),\n"
    "                  and each k's break-even with k draft passes added (c + k r)\n"
    "  --spec mtp      the same with the model's MTP block (GLM-4.5) as the drafter: its pass\n"
    "                  of one token is r (tokens/s of real drafts: glmserve run --spec mtp)\n"
    "  --lora A.gguf   a LoRA merged into the weights at load (as run --lora)\n"
    "  --adapter A.gguf  a LoRA applied per request (the side path of serve --adapter):\n"
    "                  compare its tg with --lora's for the cost per token (docs/adapters.md)\n"
    "'t/s per CPU' = tokens / (process CPU seconds / threads): the speed with the cores to itself\n"
    "(on a busy machine wall time stretches, CPU time much less).\n"
    "Set GLMSERVE_ISA=scalar|avx2|avx512 to force a kernel variant (GLMSERVE_AVXVNNI=0: avx2\n"
    "without AVX-VNNI).\n";

struct Stats {
  std::vector<double> tps;  // tokens/s per repetition
  double median = 0, mean = 0, stddev = 0, min = 0, max = 0;
};

Stats summarize(std::vector<double> v) {
  Stats s;
  s.tps = v;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  for (double x : v) s.mean += x / n;
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = n > 1 ? std::sqrt(s.stddev / (n - 1)) : 0;
  return s;
}

nlohmann::json to_json(const Stats& s, int n_tokens) {
  return {{"n_tokens", n_tokens},   {"tps_median", s.median}, {"tps_mean", s.mean},
          {"tps_stddev", s.stddev}, {"tps_min", s.min},       {"tps_max", s.max},
          {"samples", s.tps}};
}

// CPU seconds used by this process so far (all threads).
double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// A field of /proc/self/smaps_rollup in MiB ("Rss", "AnonHugePages"); -1 if unavailable.
double smaps_mib(const std::string& field) {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atof(line.c_str() + field.size() + 1) / 1024;
  }
  return -1;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Weight bytes a decode token reads: every tensor of the trunk (token_embd only as a tied head:
// a token reads one row of it), of a MoE layer's stacked experts the n_expert_used chosen of
// n_expert; not the MTP blocks after the trunk (they run only to draft).
size_t weight_bytes_per_token(const gguf::File& f, const model::Config& c) {
  const bool tied = f.tensor("output.weight") == nullptr;
  size_t total = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name == "token_embd.weight" && !tied) continue;
    if (t.name.rfind("blk.", 0) == 0 && std::atoi(t.name.c_str() + 4) >= c.n_layer) continue;
    if (t.shape.size() == 3 && c.moe.n_expert > 0) {
      total += t.n_bytes / c.moe.n_expert * c.moe.n_expert_used;
      continue;
    }
    total += t.n_bytes;
  }
  return total;
}

// Every weight byte of the file (the table's size, as llama-bench's).
size_t weight_bytes(const gguf::File& f) {
  size_t total = 0;
  for (const gguf::TensorInfo& t : f.tensors()) total += t.n_bytes;
  return total;
}

// The type holding most of the weight bytes ("q4_0").
std::string main_type(const gguf::File& f) {
  std::map<std::string, size_t> bytes;
  for (const gguf::TensorInfo& t : f.tensors()) bytes[dtype_name(t.type)] += t.n_bytes;
  std::string best;
  size_t most = 0;
  for (const auto& [name, b] : bytes) {
    if (b > most) {
      most = b;
      best = name;
    }
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The per-token acceptance a at which a draft of k tokens breaks even with plain decoding when
// its verify pass costs c decode passes: expected tokens per pass 1 + a + ... + a^k = c
// (bisection; 0 when even a = 0 pays, 1 when nothing does).
double break_even_acceptance(int k, double c) {
  auto tokens = [k](double a) {
    double sum = 0, p = 1;
    for (int i = 0; i <= k; ++i, p *= a) sum += p;
    return sum;
  };
  if (tokens(0) >= c) return 0;
  if (tokens(1) <= c) return 1;
  double lo = 0, hi = 1;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (tokens(mid) < c ? lo : hi) = mid;
  }
  return lo;
}

class Runner {
 public:
  Runner(model::Model* m, model::KvPool* kv, uint32_t seed) : model_(m), kv_(kv), rng_(seed) {
    for (int i = 0; i < kv->n_blocks(); ++i) blocks_.push_back(i);
  }

  // Every forward runs with this adapter (per request); null = none.
  void set_adapter(const model::Adapter* a) { adapter_ = a; }

  // One batch of n tokens after n_past written positions; returns seconds.
  StatusOr<double> prefill(int n, int n_past = 0) {
    std::vector<int32_t> tokens = random_tokens(n);
    const auto t0 = std::chrono::steady_clock::now();
    GLM_RETURN_IF_ERROR(step(tokens.data(), n, n_past));
    return seconds_since(t0);
  }
  // Writes positions [0, depth) in batches of at most 512 (the depth of -d); returns seconds.
  StatusOr<double> fill(int depth) {
    double total = 0;
    for (int p = 0; p < depth; p += 512) {
      StatusOr<double> s = prefill(std::min(512, depth - p), p);
      if (!s.ok()) return s.status();
      total += *s;
    }
    return total;
  }
  // One pass of n tokens after n_past written positions with every position's logits (a
  // speculative verify of n - 1 drafted tokens; n = 1 is a decode step); returns seconds.
  StatusOr<double> verify(int n, int n_past) {
    std::vector<int32_t> tokens = random_tokens(n);
    const auto t0 = std::chrono::steady_clock::now();
    GLM_RETURN_IF_ERROR(step(tokens.data(), n, n_past, /*all_logits=*/true));
    return seconds_since(t0);
  }
  // n single-token steps after n_past written positions; returns seconds.
  StatusOr<double> generate(int n, int n_past = 0) {
    std::vector<int32_t> tokens = random_tokens(n);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) GLM_RETURN_IF_ERROR(step(&tokens[i], 1, n_past + i));
    return seconds_since(t0);
  }

 private:
  std::vector<int32_t> random_tokens(int n) {
    std::uniform_int_distribution<int32_t> dist(0, model_->config().n_vocab - 1);
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = dist(rng_);
    return t;
  }
  Status step(const int32_t* tokens, int n, int n_past, bool all_logits = false) {
    model::SeqInput in;
    in.all_logits = all_logits;
    in.tokens = tokens;
    in.n_tokens = n;
    in.n_past = n_past;
    in.blocks = blocks_.data();
    in.n_blocks = (n_past + n + kv_->block_tokens() - 1) / kv_->block_tokens();
    in.adapter = adapter_;
    out_.clear();
    return model_->forward({in}, kv_, &out_);
  }

  model::Model* model_;
  model::KvPool* kv_;
  std::mt19937 rng_;
  std::vector<int32_t> blocks_;
  std::vector<float> out_;
  const model::Adapter* adapter_ = nullptr;
};

}  // namespace

int cmd_bench_engine(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  StatusOr<Args> args = Args::parse(
      argc, argv,
      {"model", "n-prompt", "n-gen", "threads", "reps", "kv", "bw-mb", "repack", "spec", "draft",
       "depth", "device", "gpu-layers", "cpu-moe", "lora", "adapter"},
      {"json"},
      llama_cpp_aliases({{"p", "n-prompt"}, {"n", "n-gen"}, {"r", "reps"}, {"d", "depth"}}));
  if (!args.ok()) return fail(args.status());
  if (Status st = args->model_from_positional(); !st.ok()) return fail(st);
  StatusOr<std::string> path = args->require("model");
  if (!path.ok()) return fail(path.status());
  StatusOr<int64_t> n_prompt = args->get_int("n-prompt", 512);
  StatusOr<int64_t> n_gen = args->get_int("n-gen", 128);
  StatusOr<int64_t> threads = args->get_int("threads", 0);
  StatusOr<int64_t> reps = args->get_int("reps", 5);
  StatusOr<int64_t> bw_mb = args->get_int("bw-mb", 1024);
  StatusOr<int64_t> repack = args->get_int("repack", 1);
  StatusOr<int64_t> depth_flag = args->get_int("depth", 0);
  for (const auto* v : {&n_prompt, &n_gen, &threads, &reps, &bw_mb, &repack, &depth_flag}) {
    if (!v->ok()) return fail(v->status());
  }
  if (*n_prompt < 0 || *n_gen < 0 || *n_prompt > 1 << 20 || *n_gen > 1 << 20) {
    return fail(invalid_argument("-p and -n must be between 0 and 1048576"));
  }
  if (*threads < 0 || *threads > 1024) return fail(invalid_argument("-t: expected 0 to 1024"));
  if (*reps < 1 || *reps > 1000) return fail(invalid_argument("-r: expected 1 to 1000"));
  if (*bw_mb < 0) return fail(invalid_argument("--bw-mb: expected >= 0 (0 skips)"));
  if (*repack != 0 && *repack != 1) return fail(invalid_argument("--repack: expected 0 or 1"));
  if (*depth_flag < 0 || *depth_flag > 1 << 20) {
    return fail(invalid_argument("-d: expected 0 to 1048576"));
  }
  const int n_depth = static_cast<int>(*depth_flag);
  DType kv_type = DType::kF16;
  if (Status st = kv_type_flag(*args, "f16", &kv_type); !st.ok()) return fail(st);
  const std::string kv_name = args->get("kv", "f16");
  const bool json = args->has("json");
  engine::Options spec;
  if (Status st = spec_flags(*args, &spec); !st.ok()) return fail(st);
  const bool spec_on = spec.spec != generation::SpecMode::kOff;

  StatusOr<std::unique_ptr<gguf::File>> opened = gguf::File::open(*path);
  if (!opened.ok()) return fail(opened.status());
  std::shared_ptr<const gguf::File> file(std::move(*opened));
  const int n_threads = *threads > 0 ? static_cast<int>(*threads) : kernels::physical_cores();
  model::LoadOptions load;
  load.n_threads = n_threads;
  load.repack = *repack == 1;
  if (Status st = device_flags(*args, &load.device, &load.gpu_layers, &load.cpu_moe); !st.ok())
    return fail(st);
  if (Status st = lora_flags(*args, &load.lora); !st.ok()) return fail(st);
  constexpr int kBlockTokens = 16;
  const int max_pos = n_depth + static_cast<int>(std::max<int64_t>({*n_prompt, *n_gen, 16}));
  const int n_blocks = (max_pos + kBlockTokens - 1) / kBlockTokens + 1;
  if (spec.spec == generation::SpecMode::kMtp) {  // a GPU model then uploads the block
    if (auto c = model::read_config(*file); c.ok()) {
      load.mtp_kv_bytes =
          model::KvPool::bytes_for(model::mtp_kv_config(*c), n_blocks, kBlockTokens, kv_type);
    }
  }
  const auto t_load = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<model::Model>> m = model::load_model(file, load);
  if (!m.ok()) return fail(m.status());
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const model::Config& cfg = (*m)->config();
  // Past the trained context the model still runs (the positions are only untrained), as in
  // llama-bench, so a depth of 16384 can be timed on a file that says 8192.
  if (cfg.n_ctx_train > 0 && max_pos > cfg.n_ctx_train) {
    std::fprintf(stderr,
                 "note: -d + max(-p, -n) = %d exceeds the model's trained context %d: timed "
                 "anyway (the answers there would be untrained)\n",
                 max_pos, cfg.n_ctx_train);
  }
  if (const std::string why = model::kv_type_unsupported(cfg, kv_type); !why.empty()) {
    return fail(invalid_argument(why));
  }
  model::KvPool kv(cfg, n_blocks, kBlockTokens, kv_type, (*m)->kv_host_layers());
  Runner runner(m->get(), &kv, 1234);
  std::shared_ptr<const model::Adapter> adapter;  // --adapter: the side path on every step
  if (args->has("adapter")) {
    StatusOr<model::LoraSpec> a = model::parse_lora_spec(args->get("adapter"));
    if (!a.ok()) return fail(a.status());
    StatusOr<std::shared_ptr<const model::Adapter>> l =
        model::load_adapter(a->path, cfg, a->scale, a->path);
    if (!l.ok()) return fail(l.status());
    adapter = *l;
    runner.set_adapter(adapter.get());
  }
  // --draft: the draft model's decode pass at the same depth (its own KV).
  std::unique_ptr<model::Model> draft;
  std::unique_ptr<model::KvPool> draft_kv;
  std::unique_ptr<Runner> draft_runner;
  if (!spec.draft_path.empty()) {
    StatusOr<std::unique_ptr<gguf::File>> df = gguf::File::open(spec.draft_path);
    if (!df.ok()) return fail(df.status());
    StatusOr<std::unique_ptr<model::Model>> dm =
        model::load_model(std::shared_ptr<const gguf::File>(std::move(*df)), load);
    if (!dm.ok()) return fail(dm.status());
    draft = std::move(*dm);
    if (const std::string why = model::kv_type_unsupported(draft->config(), kv_type);
        !why.empty()) {
      return fail(invalid_argument("--draft: " + why));
    }
    draft_kv = std::make_unique<model::KvPool>(draft->config(), kv.n_blocks(), kBlockTokens,
                                               kv_type, draft->kv_host_layers());
    draft_runner = std::make_unique<Runner>(draft.get(), draft_kv.get(), 4321);
    if (Status s = draft_runner->generate(2).status(); !s.ok()) return fail(s);
  }

  // --spec mtp: the MTP block's pass (one token, its logits) at the same depth, in its own
  // one-layer K/V, whose positions before it are written once (untimed).
  std::unique_ptr<model::KvPool> mtp_kv;
  auto mtp_pass = [&](int n_past, int n_tokens) -> StatusOr<double> {
    std::vector<int32_t> blocks(mtp_kv->n_blocks()), tokens(n_tokens);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
    for (int i = 0; i < n_tokens; ++i) tokens[i] = (31 * (n_past + i) + 5) % cfg.n_vocab;
    const std::vector<float> hidden(static_cast<size_t>(n_tokens) * cfg.n_embd, 0.01f);
    model::MtpInput in;
    in.seq.tokens = tokens.data();
    in.seq.n_tokens = n_tokens;
    in.seq.n_past = n_past;
    in.seq.blocks = blocks.data();
    in.seq.n_blocks = static_cast<int>(blocks.size());
    in.hidden = hidden.data();
    std::vector<float> logits, rows;
    const auto t0 = std::chrono::steady_clock::now();
    GLM_RETURN_IF_ERROR((*m)->forward_mtp({in}, mtp_kv.get(), &logits, &rows));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (spec.spec == generation::SpecMode::kMtp) {
    if (!(*m)->has_mtp()) {
      return fail(invalid_argument("--spec mtp: this model has no multi-token-prediction block"));
    }
    mtp_kv = std::make_unique<model::KvPool>(model::mtp_kv_config(cfg), kv.n_blocks(), kBlockTokens,
                                             kv_type, (*m)->device_name() == "cpu" ? 1 : 0);
    const int before = n_depth + static_cast<int>(std::max<int64_t>(*n_gen, 1)) - 1;
    if (before > 0) {
      if (Status st = mtp_pass(0, before).status(); !st.ok()) return fail(st);
    }
  }

  // Warm-up: faults in every weight page and the threads' scratch.
  if (Status s = runner.prefill(std::min<int>(16, max_pos)).status(); !s.ok()) return fail(s);
  if (Status s = runner.generate(2).status(); !s.ok()) return fail(s);
  // The depth: positions [0, D) written once. Every test then writes after them only, so they
  // stay in place for all repetitions.
  double depth_s = 0;
  if (n_depth > 0) {
    StatusOr<double> s = runner.fill(n_depth);
    if (!s.ok()) return fail(s.status());
    depth_s = *s;
    if (!json) std::fprintf(stderr, "  depth %d prefilled in %.2f s\n", n_depth, depth_s);
  }

  const size_t wbytes = weight_bytes_per_token(*file, cfg);
  kernels::ThreadPool bw_pool(n_threads);
  // Besides wall time, tokens per CPU-second x threads: what the run would reach with the cores
  // to itself (a shared machine stretches wall time; CPU time much less).
  std::vector<double> pp, tg, bw, pp_cpu, tg_cpu;
  for (int r = 0; r < *reps; ++r) {
    if (*n_prompt > 0) {
      const double c0 = cpu_seconds();
      StatusOr<double> s = runner.prefill(static_cast<int>(*n_prompt), n_depth);
      if (!s.ok()) return fail(s.status());
      pp.push_back(*n_prompt / *s);
      pp_cpu.push_back(*n_prompt * n_threads / std::max(cpu_seconds() - c0, 1e-9));
      if (!json)
        std::fprintf(stderr, "  pp%lld rep %d: %.2f t/s\n", (long long)*n_prompt, r, pp.back());
    }
    if (*n_gen > 0) {
      const double c0 = cpu_seconds();
      StatusOr<double> s = runner.generate(static_cast<int>(*n_gen), n_depth);
      if (!s.ok()) return fail(s.status());
      tg.push_back(*n_gen / *s);
      tg_cpu.push_back(*n_gen * n_threads / std::max(cpu_seconds() - c0, 1e-9));
      if (!json)
        std::fprintf(stderr, "  tg%lld rep %d: %.2f t/s\n", (long long)*n_gen, r, tg.back());
    }
    // Interleaved with the runs: the machine's bandwidth drifts.
    if (*bw_mb > 0) bw.push_back(kernels::measure_read_bandwidth(*bw_mb << 20, 3, &bw_pool));
  }
  // Speculative decoding's cost: a verify pass of k drafted tokens (k + 1 positions, all
  // logits) against a decode pass, at the depth generation reached; alternated per rep.
  const int depth = n_depth + static_cast<int>(std::max<int64_t>(*n_gen, 1));
  const int kDrafts[] = {1, 2, 4, 8};
  std::map<int, std::vector<double>> verify_s;  // k -> seconds per pass (k = 0: decode)
  for (int r = 0; spec_on && r < *reps; ++r) {
    for (int k : {0, 1, 2, 4, 8}) {
      if (depth + k + 1 > max_pos + kBlockTokens) continue;
      StatusOr<double> s = runner.verify(k + 1, depth - 1);
      if (!s.ok()) return fail(s.status());
      verify_s[k].push_back(*s);
    }
    if (draft_runner || mtp_kv) {  // k = -1: the draft model's decode pass or the MTP block's
      StatusOr<double> s =
          draft_runner ? draft_runner->verify(1, depth - 1) : mtp_pass(depth - 1, 1);
      if (!s.ok()) return fail(s.status());
      verify_s[-1].push_back(*s);
    }
  }
  // With a draft model a step of k drafted tokens also runs k draft passes: r decode passes each.
  const double draft_r =
      verify_s.count(-1) && verify_s.count(0) ? median(verify_s[-1]) / median(verify_s[0]) : 0;
  const Stats pps = summarize(pp);
  const Stats tgs = summarize(tg);
  const Stats bws = summarize(bw);
  const double tg_gbs = tgs.median * static_cast<double>(wbytes) / 1e9;
  const double frac = bws.median > 0 ? tg_gbs / bws.median : 0;

  const double rss_mib = smaps_mib("Rss");
  const double huge_mib = smaps_mib("AnonHugePages");
  const std::string type = main_type(*file);
  // The isa column names the GPU where the model runs on one ("vulkan:0 (NVIDIA H200)").
  const std::string device = (*m)->device_name();
  const std::string isa_name = device == "cpu" ? kernels::matmul_isa() : device;
  const char* isa = isa_name.c_str();
  if (json) {
    nlohmann::json j = {{"model", *path},
                        {"arch", cfg.arch_name},
                        {"type", type},
                        {"threads", n_threads},
                        {"isa", isa},
                        {"device", device},
                        {"kv", kv_name},
                        {"depth", n_depth},
                        {"depth_prefill_s", depth_s},
                        {"kv_mib", kv.bytes() / 1048576.0},
                        {"reps", *reps},
                        {"weight_bytes_per_token", wbytes},
                        {"repack", *repack == 1},
                        {"load_s", load_s},
                        {"rss_mib", rss_mib},
                        {"anon_huge_mib", huge_mib}};
    if (*n_prompt > 0) {
      j["pp"] = to_json(pps, static_cast<int>(*n_prompt));
      j["pp"]["depth"] = n_depth;
      j["pp"]["cpu_tps_median"] = summarize(pp_cpu).median;
    }
    if (*n_gen > 0) {
      j["tg"] = to_json(tgs, static_cast<int>(*n_gen));
      j["tg"]["depth"] = n_depth;
      j["tg"]["cpu_tps_median"] = summarize(tg_cpu).median;
    }
    if (*bw_mb > 0) {
      j["bandwidth_gbs"] = {
          {"median", bws.median}, {"min", bws.min}, {"max", bws.max}, {"samples", bws.tps}};
      if (*n_gen > 0) {
        j["tg_weight_gbs"] = tg_gbs;
        j["tg_bandwidth_fraction"] = frac;
      }
    }
    if (spec_on && !verify_s[0].empty()) {
      const double decode = median(verify_s[0]);
      nlohmann::json v = nlohmann::json::array();
      for (int k : kDrafts) {
        if (verify_s[k].empty()) continue;
        const double c = median(verify_s[k]) / decode;
        v.push_back({{"k", k},
                     {"ms", median(verify_s[k]) * 1e3},
                     {"cost", c},
                     {"break_even_acceptance", break_even_acceptance(k, c)},
                     {"break_even_acceptance_draft", break_even_acceptance(k, c + k * draft_r)}});
      }
      j["spec_verify"] = {{"depth", depth}, {"decode_ms", decode * 1e3}, {"drafts", v}};
      if (draft_r > 0) {
        j["spec_verify"]["draft_pass_ms"] = median(verify_s[-1]) * 1e3;
        j["spec_verify"]["drafter"] = mtp_kv ? "mtp" : "model";
      }
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("loaded in %.2f s (repack %s); resident %.0f MiB, of it %.0f MiB in huge pages\n\n",
              load_s, *repack == 1 ? "on" : "off", rss_mib, huge_mib);
  std::printf(
      "| model | type | size | threads | isa | kv | test | t/s (median) | spread (min-max) |"
      " t/s per CPU |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  // "tg128" or, with -d, "tg128 @ d4096" (llama-bench's name for it).
  const std::string at = n_depth > 0 ? " @ d" + std::to_string(n_depth) : "";
  auto row = [&](const char* test, int64_t n, const Stats& s, const std::vector<double>& cpu) {
    std::printf(
        "| %s | %s | %.2f GiB | %d | %s | %s | %s%lld%s | %.2f ± %.2f | %.2f - %.2f | %.2f |\n",
        cfg.arch_name.c_str(), type.c_str(), weight_bytes(*file) / 1073741824.0, n_threads, isa,
        kv_name.c_str(), test, (long long)n, at.c_str(), s.median, s.stddev, s.min, s.max,
        summarize(cpu).median);
  };
  if (*n_prompt > 0) row("pp", *n_prompt, pps, pp_cpu);
  if (*n_gen > 0) row("tg", *n_gen, tgs, tg_cpu);
  if (spec_on && !verify_s[0].empty()) {
    const double decode = median(verify_s[0]);
    std::printf(
        "\nspeculative verify at depth %d: a pass of k drafted tokens costs c "
        "decode passes; it pays when 1 + a + ... + a^k > c, a = each draft token's acceptance\n"
        "| k | ms per pass | c | break-even a |\n|---|---|---|---|\n| 0 (decode) | %.2f | 1 | - "
        "|\n",
        depth, decode * 1e3);
    for (int k : kDrafts) {
      if (verify_s[k].empty()) continue;
      const double c = median(verify_s[k]) / decode;
      std::printf("| %d | %.2f | %.2f | %.2f |\n", k, median(verify_s[k]) * 1e3, c,
                  break_even_acceptance(k, c));
    }
    if (draft_r > 0) {
      std::printf(
          "\n%s: a pass %.2f ms = r = %.3f target decode passes; a "
          "step of k drafts costs c + k r\n| k | c + k r | break-even a |\n|---|---|---|\n",
          mtp_kv ? "MTP block (--spec mtp)" : "draft model (--draft)", median(verify_s[-1]) * 1e3,
          draft_r);
      for (int k : kDrafts) {
        if (verify_s[k].empty()) continue;
        const double c = median(verify_s[k]) / decode + k * draft_r;
        std::printf("| %d | %.2f | %.2f |\n", k, c, break_even_acceptance(k, c));
      }
    }
  }
  if (*bw_mb > 0 && *n_gen > 0) {
    std::printf(
        "\ngeneration reads %.2f GB of weights per token: %.1f GB/s at the median tg; "
        "measured read bandwidth %.1f GB/s (median, %.1f-%.1f): %.0f%% of the limit\n",
        wbytes / 1e9, tg_gbs, bws.median, bws.min, bws.max, 100 * frac);
  }
  return 0;
}

}  // namespace glm::cli
