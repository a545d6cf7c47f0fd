// glmserve engine: the model service on a Unix socket (docs/protocol.md, docs/operations.md).
// The socket accepts while the model loads (health = loading); SIGTERM/SIGINT drain in-flight
// requests within --drain-timeout and exit 0; a second signal exits at once. Running out of
// memory exits with code 2.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "core/log.h"
#include "core/unix_socket.h"
#include "daemon/adapter_state.h"
#include "daemon/daemon.h"
#include "engine/engine.h"
#include "serve/supervisor.h"
#include "testing/echo_engine.h"

namespace glm::cli {
namespace {

constexpr const char* kUsage =
    "usage: glmserve engine --model M.gguf --socket PATH [flags]\n"
    "  --model M            GGUF model file\n"
    "  --socket PATH        Unix socket to listen on (created 0600; a stale one is replaced)\n"
    "  --socket-mode MODE   socket permissions, e.g. 0660 for group access (never world)\n"
    "  --instance TOKEN     echoed in health answers (serve uses it to know its own engine)\n"
    "  --threads T          compute threads (default: physical cores)\n"
    "  --ctx-size N         context length (default: min(model, 8192)); --ctx is an alias\n"
    "  --max-batch B        sequences decoded together (default 8)\n"
    "  --max-queue Q        waiting requests before 'busy' (default 64)\n"
    "  --prefill-chunk N    prompt tokens per step (default 64): a long prompt is read in\n"
    "                       chunks, so the others' answers go on between them (docs/engine.md)\n"
    "  --max-stall-ms MS    more prompt tokens per step while their measured cost fits MS\n"
    "                       (default 1000; 0: --prefill-chunk exactly)\n"
    "  --drain-timeout S    seconds to finish in-flight requests on SIGTERM (default 30)\n"
    "  --kv f16|f32|q8_0    KV cache element type (default f16; q8_0: about half the memory)\n"
    "  --kv-disk DIR        keep the KV cache (conversations, prefix blocks) in DIR across\n"
    "                       restarts: written when idle and on SIGTERM, read back on demand\n"
    "                       (off without it; --kv-disk off: off, as for serve)\n"
    "  --kv-disk-max-mb N   bound on DIR's files, least recently used removed (default 4096)\n"
    "  --spec ngram|draft|mtp|off  speculative decoding: drafts from each answer's own\n"
    "                       context, a draft model or the model's own MTP block (GLM-4.5),\n"
    "                       verified in the batch (greedy output unchanged; default off)\n"
    "  --draft M.gguf       the draft model: smaller, same vocabulary (implies --spec draft)\n"
    "  --reasoning-format auto|think|none  a reasoning model's <think>...</think> goes out as\n"
    "                       the token events' reasoning, apart from the text (auto: when the\n"
    "                       chat template is a reasoning model's; docs/engine.md#reasoning)\n"
    "  --device D           auto, cpu, vulkan or vulkan:N (default auto; docs/gpu.md)\n"
    "  --gpu-layers N       layers on the GPU (-1, the default: as many as fit)\n"
    "  --cpu-moe N|all|auto GLM-4.5 on a GPU: the router and routed experts of the first N\n"
    "                       layers (all: every layer) in host memory, run by the CPU; auto\n"
    "                       (default): as few as let every layer fit\n"
    "  --lora A.gguf[:S]    merge a LoRA adapter into the weights at load, scale S (default 1;\n"
    "                       repeatable; docs/adapters.md)\n"
    "  --adapter NAME=PATH[:S]  serve an adapter per request, chosen by model name NAME or\n"
    "                       BASE:NAME (repeatable; docs/adapters.md)\n"
    "  --adapter-state FILE keep the adapters loaded at run time in FILE and serve them again\n"
    "                       at the next start (serve gives its engine one)\n"
    "  --max-line BYTES     request line limit (default 1048576)\n"
    "  --max-connections N  concurrent clients (default 1024)\n"
    "  --log-level L        debug, info, warn, error (default info; or GLMSERVE_LOG)\n"
    "  --echo               serve a model-free echo engine (tests, demos); no --model\n"
    "  --echo-delay MS      echo engine: milliseconds per token (default 0)\n";

// The adapters an earlier engine on this socket loaded at run time (daemon/adapter_state.h), after
// the --adapter ones: each that still loads is served again; one that does not (its file gone or
// changed) is left out with a warning, never a failed start.
void restore_adapters(engine::Engine& e, const std::string& state) {
  StatusOr<std::vector<engine::AdapterSpec>> list = daemon::read_adapter_state(state);
  if (!list.ok()) {
    GLM_LOG_WARN("engine: %s; serving the --adapter ones only", list.status().message().c_str());
    return;
  }
  std::set<std::string> served;
  for (const engine::AdapterSpec& a : e.adapters()) served.insert(a.name);
  for (const engine::AdapterSpec& a : *list) {
    if (served.count(a.name) != 0) continue;
    if (Status s = e.load_adapter(a); !s.ok()) {
      GLM_LOG_WARN("engine: adapter %s loaded at run time before is left out: %s", a.name.c_str(),
                   s.message().c_str());
    }
  }
}

std::atomic<daemon::Daemon*> g_daemon{nullptr};
std::atomic<int> g_signals{0};

void on_signal(int sig) {
  if (g_signals.fetch_add(1) > 0) {
    static const char kMsg[] = "glmserve engine: second signal, exiting now\n";
    ssize_t ignored = ::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    ::_exit(128 + sig);
  }
  if (daemon::Daemon* d = g_daemon.load()) d->request_stop();
}

void on_out_of_memory() {
  static const char kMsg[] =
      "glmserve engine: out of memory: an allocation failed; exiting with code 2 (use a smaller "
      "model or quantization, a shorter --ctx, or a smaller --max-batch)\n";
  ssize_t ignored = ::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  (void)ignored;
  ::_exit(2);
}

}  // namespace

int cmd_engine(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto args = Args::parse(argc, argv, {"model",        "socket",
                                       "socket-mode",  "threads",
                                       "ctx-size",     "max-batch",
                                       "max-queue",    "drain-timeout",
                                       "max-line",     "max-connections",
                                       "log-level",    "echo-delay",
                                       "instance",     "kv",
                                       "kv-disk",      "kv-disk-max-mb",
                                       "spec",         "draft",
                                       "device",       "gpu-layers",
                                       "cpu-moe",      "prefill-chunk",
                                       "max-stall-ms", "reasoning-format",
                                       "lora",         "adapter",
                                       "adapter-state"},
                          {"echo"}, llama_cpp_aliases({{"ctx", "ctx-size"}}));
  if (!args.ok()) return fail(args.status());
  if (Status st = args->model_from_positional(); !st.ok()) return fail(st);
  const bool echo = args->has("echo");
  if (args->has("log-level")) {
    LogLevel level;
    if (!parse_log_level(args->get("log-level").c_str(), &level)) {
      return fail(invalid_argument("--log-level: expected debug, info, warn or error"));
    }
    set_log_level(level);
  }
  auto socket = args->require("socket");
  if (!socket.ok()) return fail(socket.status());
  std::string model_path;
  if (!echo) {
    auto m = args->require("model");
    if (!m.ok()) return fail(m.status());
    model_path = *m;
  }

  daemon::DaemonOptions dopts;
  dopts.socket_path = *socket;
  dopts.instance = args->get("instance");
  if (args->has("socket-mode")) {
    auto mode = parse_socket_mode(args->get("socket-mode"));
    if (!mode.ok()) return fail(mode.status());
    dopts.socket_mode = *mode;
  }
  engine::Options eopts;
  eopts.model_path = model_path;
  struct IntFlag {
    const char* name;
    int64_t lo, hi;
    int64_t* out;
  };
  int64_t threads = 0, ctx = 0, max_batch = eopts.max_batch, max_queue = eopts.max_queue;
  int64_t drain_s = 30, max_line = static_cast<int64_t>(dopts.max_line_bytes);
  int64_t max_conn = dopts.max_connections, echo_delay = 0;
  int64_t kv_disk_mb = eopts.kv_disk_max_mb, prefill_chunk = eopts.prefill_chunk;
  int64_t max_stall = eopts.max_stall_ms;
  const IntFlag flags[] = {
      {"threads", 0, 1024, &threads},
      {"ctx-size", 0, 1 << 22, &ctx},
      {"max-batch", 1, 1024, &max_batch},
      {"max-queue", 0, 1 << 20, &max_queue},
      {"drain-timeout", 0, 86400, &drain_s},
      {"max-line", 1024, 1 << 30, &max_line},
      {"max-connections", 1, 1 << 20, &max_conn},
      {"echo-delay", 0, 60000, &echo_delay},
      {"kv-disk-max-mb", 1, int64_t{1} << 30, &kv_disk_mb},
      {"prefill-chunk", 1, 1 << 16, &prefill_chunk},
      {"max-stall-ms", 0, 600000, &max_stall},
  };
  for (const IntFlag& f : flags) {
    auto v = args->get_int(f.name, *f.out);
    if (!v.ok()) return fail(v.status());
    if (*v < f.lo || *v > f.hi) {
      return fail(invalid_argument("--" + std::string(f.name) + " must be in [" +
                                   std::to_string(f.lo) + ", " + std::to_string(f.hi) + "]"));
    }
    *f.out = *v;
  }
  eopts.n_threads = static_cast<int>(threads);
  eopts.n_ctx = static_cast<int>(ctx);
  eopts.max_batch = static_cast<int>(max_batch);
  eopts.max_queue = static_cast<int>(max_queue);
  eopts.prefill_chunk = static_cast<int>(prefill_chunk);
  eopts.max_stall_ms = static_cast<int>(max_stall);
  if (Status st = spec_flags(*args, &eopts); !st.ok()) return fail(st);
  if (Status st = reasoning_flag(*args, &eopts.reasoning); !st.ok()) return fail(st);
  if (Status st = kv_type_flag(*args, "f16", &eopts.kv_type); !st.ok()) return fail(st);
  if (Status st = device_flags(*args, &eopts.device, &eopts.gpu_layers, &eopts.cpu_moe); !st.ok()) {
    return fail(st);
  }
  if (Status st = lora_flags(*args, &eopts.lora); !st.ok()) return fail(st);
  for (const std::string& a : args->get_all("adapter")) {
    StatusOr<engine::AdapterSpec> spec = engine::parse_adapter_spec(a);
    if (!spec.ok()) return fail(spec.status());
    eopts.adapters.push_back(*spec);
  }
  eopts.kv_disk = args->get("kv-disk");
  eopts.kv_disk_max_mb = kv_disk_mb;
  if (args->has("kv-disk") && eopts.kv_disk.empty()) {
    return fail(invalid_argument("--kv-disk: give a directory (it is created if missing)"));
  }
  if (eopts.kv_disk == "off") eopts.kv_disk.clear();  // as serve's --kv-disk off
  dopts.adapter_state = args->get("adapter-state");
  dopts.drain_timeout = std::chrono::seconds(drain_s);
  dopts.max_line_bytes = static_cast<size_t>(max_line);
  dopts.max_connections = static_cast<int>(max_conn);

  std::set_new_handler(on_out_of_memory);
  ::signal(SIGPIPE, SIG_IGN);

  daemon::Daemon d(dopts);
  Status st = d.listen();
  if (!st.ok()) return fail(st);
  g_daemon.store(&d);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  // Health answers "loading" with these bytes until the engine is set.
  eopts.load_progress = [&d](uint64_t done, uint64_t total) { d.set_load_progress(done, total); };
  // A lost GPU: drain (the requests in flight fail with the reason) and exit 4, so that serve
  // or systemd starts a fresh engine (docs/gpu.md#failures).
  eopts.on_fatal = [&d](const Status& st) { d.fail_running(st, serve::kExitDeviceLost); };
  d.start();
  GLM_LOG_INFO("engine: listening on %s; loading %s", dopts.socket_path.c_str(),
               echo ? "the echo engine" : model_path.c_str());

  std::atomic<bool> loaded{false};
  std::thread loader([&] {
    if (echo) {
      testing::EchoOptions o;
      o.token_delay_ms = static_cast<int>(echo_delay);
      o.max_queue = eopts.max_queue;
      o.max_running = eopts.max_batch;
      o.reasoning = eopts.reasoning;
      d.set_engine(std::make_unique<testing::EchoEngine>(o));
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      auto e = engine::load_engine(eopts);
      if (e.ok()) {
        GLM_LOG_INFO("engine: model loaded in %.0f ms", std::chrono::duration<double, std::milli>(
                                                            std::chrono::steady_clock::now() - t0)
                                                            .count());
        if (!dopts.adapter_state.empty()) restore_adapters(**e, dopts.adapter_state);
        d.set_engine(std::move(e).value());
      } else {
        // A file that is bad, missing or unsupported fails the same way on every try: exit
        // code 3 tells serve not to restart (serve::kExitNoRetry). Memory may free up: 2.
        const ErrorCode code = e.status().code();
        const bool no_retry = code == ErrorCode::kBadFile || code == ErrorCode::kUnsupported ||
                              code == ErrorCode::kNotFound || code == ErrorCode::kInvalidArgument;
        if (code == ErrorCode::kOutOfMemory) {
          GLM_LOG_ERROR("engine: out of memory while loading the model; exiting with code 2");
        }
        d.fail_loading(e.status(), code == ErrorCode::kOutOfMemory ? 2
                                   : no_retry                      ? serve::kExitNoRetry
                                                                   : 1);
      }
    }
    loaded.store(true);
  });
  const int rc = d.wait();
  g_daemon.store(nullptr);
  if (!loaded.load()) {
    // Stopped while the model was still loading: nothing is in flight, leave without waiting.
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  loader.join();
  return rc;
}

}  // namespace glm::cli
