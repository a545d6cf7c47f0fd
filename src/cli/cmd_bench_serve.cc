// glmserve bench serve: serving latency at each layer, the seed study's method
// (docs/performance.md): the study's three prompts (bench/seed_prompts.h), warm-ups, runs
// alternated between layers in one session, drop min and max, mean and stddev of the rest; a
// concurrency sweep and multi-turn TTFT by turn. The socket layer is a Daemon in this process over
// the same engine (the protocol, the socket and the I/O thread are all on the path; only the
// process boundary is not) unless --socket names an external engine. --report writes the results as
// one HTML page (src/bench/report_html.h).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "bench/latency_probe.h"
#include "bench/report_html.h"
#include "bench/seed_prompts.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "core/log.h"
#include "daemon/daemon.h"
#include "gguf/gguf.h"
#include "hub/file_type.h"
#include "kernels/thread_pool.h"
#include "testing/echo_engine.h"

namespace glm::cli {
namespace {

using bench::Sample;
using bench::Summary;

constexpr const char* kUsage =
    "usage: glmserve bench serve --model M.gguf [flags]   (or --echo: no model)\n"
    "  --runs N            measured runs per prompt and layer (default 10)\n"
    "  --warmup N          warm-up runs (default 3)\n"
    "  --max-tokens N      tokens generated per request (default 32)\n"
    "  --concurrency LIST  users for the sweep (default 1,2,4,8); --no-sweep skips it\n"
    "  --turns N           multi-turn conversation length (default 5); --no-turns skips it\n"
    "  --http URL          also measure through a running gateway (http://127.0.0.1:8080)\n"
    "  --socket PATH       measure an external engine instead of the in-process daemon\n"
    "  --report FILE.html  also write the results as one self-contained HTML page\n"
    "  --browser FILE      add the page's click-to-first-character to the report (the JSON\n"
    "                      that GLM_MEASURE_JSON=FILE node tests/browser/measure.mjs writes)\n"
    "  --threads T --ctx-size N --max-batch B   engine options\n"
    "  --device D --gpu-layers N                where the model runs (default auto; docs/gpu.md)\n"
    "  --cpu-moe N|all|auto                     GLM-4.5's experts of N layers in host memory\n";

using bench::kSeedPrompts;
using Prompt = bench::SeedPrompt;

int g_request_serial = 0;

// A unique tag per request keeps an engine's prefix cache from serving a repeated prompt.
protocol::Request make_request(const std::string& text, int max_tokens) {
  protocol::Request r;
  r.id = "bench-" + std::to_string(++g_request_serial);
  r.messages.push_back({"user", "(#" + std::to_string(g_request_serial) + ") " + text, ""});
  r.params.temperature = 0.0;
  r.params.seed = 1;
  r.params.max_tokens = max_tokens;
  return r;
}

std::string fmt(const Summary& s) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.2f ± %.2f (med %.2f)", s.mean, s.stddev, s.median);
  return buf;
}

struct LayerResult {
  std::vector<double> ttft, tpot, e2e;
  int tokens = 0;
};

// One shell word as typed: kept when it holds no special character, else single-quoted.
std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_./:=,@%+-") == std::string::npos;
  if (plain) return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// "chatglm, Q4_0" from the GGUF header (cost: one mmap and a metadata parse).
std::string model_type(const std::string& path) {
  auto f = gguf::File::open(path);
  if (!f.ok()) return "unknown (" + f.status().message() + ")";
  auto arch = (*f)->get_string("general.architecture");
  return (arch.ok() ? *arch : std::string("?")) + ", " + hub::weight_type_name(**f);
}

}  // namespace

int cmd_bench_serve(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto args = Args::parse(argc, argv,
                          {"model", "runs", "warmup", "max-tokens", "concurrency", "turns", "http",
                           "socket", "threads", "ctx-size", "max-batch", "echo-delay", "report",
                           "browser", "device", "gpu-layers", "cpu-moe"},
                          {"echo", "no-sweep", "no-turns"}, {{"ctx", "ctx-size"}});
  if (!args.ok()) return fail(args.status());
  const bool echo = args->has("echo");
  auto runs = args->get_int("runs", 10);
  auto warmup = args->get_int("warmup", 3);
  auto max_tokens = args->get_int("max-tokens", 32);
  auto turns = args->get_int("turns", 5);
  auto threads = args->get_int("threads", 0);
  auto ctx = args->get_int("ctx-size", 0);
  auto max_batch = args->get_int("max-batch", 8);
  auto echo_delay = args->get_int("echo-delay", 0);
  for (const auto* v :
       {&runs, &warmup, &max_tokens, &turns, &threads, &ctx, &max_batch, &echo_delay}) {
    if (!v->ok()) return fail(v->status());
  }
  if (*runs < 1 || *warmup < 0 || *max_tokens < 1 || *turns < 1) {
    return fail(invalid_argument("--runs, --max-tokens and --turns must be >= 1"));
  }
  std::vector<int32_t> sweep = {1, 2, 4, 8};
  if (args->has("concurrency")) {
    auto list = args->get_int_list("concurrency");
    if (!list.ok()) return fail(list.status());
    sweep = *list;
  }
  if (args->has("no-sweep")) sweep.clear();
  const std::string http = args->get("http");
  // The report: its file opened now (a bad path fails before minutes of measuring), the
  // browser's measurements read now for the same reason.
  const std::string report_path = args->get("report");
  std::ofstream report_file;
  bench::ReportInput report;
  if (!report_path.empty()) {
    report.command_line = "glmserve bench serve";
    for (int i = 0; i < argc; ++i) report.command_line += " " + shell_quote(argv[i]);
    report.date_utc = utc_now();
    report.cpu_model = bench::cpu_model_name();
    report.cpus = static_cast<int>(std::thread::hardware_concurrency());
    report.threads = echo           ? std::string("none (echo engine)")
                     : *threads > 0 ? std::to_string(*threads)
                                    : std::to_string(kernels::physical_cores()) +
                                          " (the engine's default: physical cores)";
    report.runs = static_cast<int>(*runs);
    report.warmup = static_cast<int>(*warmup);
    report.max_tokens = static_cast<int>(*max_tokens);
    for (const Prompt& p : kSeedPrompts) report.prompts.push_back({p.name, p.text});
  } else if (args->has("browser")) {
    return fail(invalid_argument("--browser only adds to a report: add --report FILE.html"));
  }
  if (args->has("browser")) {
    std::ifstream bf(args->get("browser"), std::ios::binary);
    if (!bf) return fail(invalid_argument("--browser: cannot read " + args->get("browser")));
    std::stringstream text;
    text << bf.rdbuf();
    auto b = bench::parse_browser_json(text.str());
    if (!b.ok()) return fail(b.status());
    report.browser.push_back(std::move(b).value());
  }
  if (!report_path.empty()) {
    report_file.open(report_path, std::ios::binary | std::ios::trunc);
    if (!report_file) {
      return fail(invalid_argument("--report: cannot write " + report_path +
                                   " (check the directory exists and is writable)"));
    }
  }
  // Per-request log lines would land inside the measured path; keep them out unless asked for.
  if (std::getenv("GLMSERVE_LOG") == nullptr) set_log_level(LogLevel::kWarn);

  // The engine.
  std::unique_ptr<engine::Engine> engine;
  if (echo) {
    testing::EchoOptions o;
    o.token_delay_ms = static_cast<int>(*echo_delay);
    o.max_running = static_cast<int>(*max_batch);
    o.max_queue = 1024;
    engine = std::make_unique<testing::EchoEngine>(o);
  } else {
    auto model = args->require("model");
    if (!model.ok()) return fail(model.status());
    engine::Options eo;
    eo.model_path = *model;
    eo.n_threads = static_cast<int>(*threads);
    eo.n_ctx = static_cast<int>(*ctx);
    eo.max_batch = static_cast<int>(*max_batch);
    eo.max_queue = 1024;
    if (Status st = device_flags(*args, &eo.device, &eo.gpu_layers, &eo.cpu_moe); !st.ok())
      return fail(st);
    auto loaded = engine::load_engine(eo);
    if (!loaded.ok()) return fail(loaded.status());
    engine = std::move(loaded).value();
  }
  engine::Engine* eng = engine.get();
  const std::string model_name = eng->model_name();
  report.model_name = model_name;
  report.model_type = echo ? "echo engine (no model: the serving stack's own cost)"
                           : model_type(args->get("model"));

  // The socket layer: an in-process daemon over the same engine, or an external one.
  std::string socket = args->get("socket");
  std::unique_ptr<daemon::Daemon> d;
  std::string tmp_dir;
  if (socket.empty()) {
    char tmpl[] = "/tmp/glm-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return fail(invalid_argument("mkdtemp failed"));
    tmp_dir = tmpl;
    socket = tmp_dir + "/engine.sock";
    daemon::DaemonOptions dopt;
    dopt.socket_path = socket;
    d = std::make_unique<daemon::Daemon>(dopt);
    Status st = d->listen();
    if (!st.ok()) return fail(st);
    d->start();
    d->set_engine(std::move(engine));
  }
  auto cleanup = [&] {
    if (d) {
      d->request_stop();
      d->wait();
      d.reset();
    }
    if (!tmp_dir.empty()) ::rmdir(tmp_dir.c_str());
  };

  std::printf("# glmserve bench serve: model %s, %lld runs (+%lld warm-up), %lld tokens/request\n",
              model_name.c_str(), static_cast<long long>(*runs), static_cast<long long>(*warmup),
              static_cast<long long>(*max_tokens));
  std::printf("# times in ms: mean ± stddev of the runs without min and max (median of all)\n\n");

  // 1. Layers, runs alternated so that drifting machine speed hits every layer alike.
  enum Layer { kInProcess, kSocket, kHttp };
  const char* kLayerNames[] = {"in-process", "socket", "http"};
  std::vector<Layer> layers = {kInProcess, kSocket};
  if (!http.empty()) layers.push_back(kHttp);
  std::vector<double> overhead_all;
  std::printf(
      "| prompt | layer | TTFT | TPOT | end-to-end | tokens |\n|---|---|---|---|---|---|\n");
  for (const Prompt& p : kSeedPrompts) {
    std::map<Layer, LayerResult> res;
    std::vector<double> overhead;
    for (int i = 0; i < *warmup + *runs; ++i) {
      std::map<Layer, double> ttft;
      for (Layer layer : layers) {
        const protocol::Request r = make_request(p.text, static_cast<int>(*max_tokens));
        StatusOr<Sample> s = layer == kInProcess ? bench::run_in_process(*eng, r)
                             : layer == kSocket  ? bench::run_socket(socket, r)
                                                 : bench::run_http(http, r);
        if (!s.ok()) {
          cleanup();
          return fail(Status(s.status().code(),
                             std::string(kLayerNames[layer]) + ": " + s.status().message()));
        }
        if (i < *warmup) continue;
        // A reply without text (a random model emitting only partial or special tokens) has no
        // first token: it counts for end-to-end only.
        if (s->tokens > 0) res[layer].ttft.push_back(s->ttft_ms);
        if (s->tokens > 1) res[layer].tpot.push_back(s->tpot_ms);
        res[layer].e2e.push_back(s->e2e_ms);
        res[layer].tokens = s->tokens;
        if (s->tokens > 0) ttft[layer] = s->ttft_ms;
      }
      if (i >= *warmup && ttft.count(kSocket) && ttft.count(kInProcess)) {
        overhead.push_back(ttft[kSocket] - ttft[kInProcess]);
      }
    }
    for (Layer layer : layers) {
      const LayerResult& r = res[layer];
      const bench::LayerRow row{p.name,
                                kLayerNames[layer],
                                bench::summarize(r.ttft),
                                bench::summarize(r.tpot),
                                bench::summarize(r.e2e),
                                r.tokens};
      std::printf("| %s | %s | %s | %s | %s | %d |\n", p.name, kLayerNames[layer],
                  fmt(row.ttft).c_str(), fmt(row.tpot).c_str(), fmt(row.e2e).c_str(), r.tokens);
      report.layers.push_back(row);
    }
    overhead_all.insert(overhead_all.end(), overhead.begin(), overhead.end());
  }
  const Summary ov = bench::summarize(overhead_all);
  report.socket_overhead = ov;
  std::printf(
      "\nsocket overhead (socket TTFT - in-process TTFT, paired runs): median %.3f ms, "
      "mean %.3f ± %.3f ms\n",
      ov.median, ov.mean, ov.stddev);

  // 2. Concurrency sweep through the socket: N users send the marketing prompt at once.
  if (!sweep.empty()) {
    std::printf(
        "\n| users | TTFT | TPOT | end-to-end | aggregate tokens/s | vs 1 user |\n"
        "|---|---|---|---|---|---|\n");
    double base_tps = 0;
    for (int32_t users : sweep) {
      if (users < 1) continue;
      std::vector<double> ttft, tpot, e2e, tps;
      const int rounds = static_cast<int>(std::max<int64_t>(3, *runs / 2));
      for (int round = 0; round < 1 + rounds; ++round) {  // one warm-up round
        std::vector<StatusOr<Sample>> out(users, Status(ErrorCode::kInternal, "not run"));
        std::vector<protocol::Request> reqs;
        for (int u = 0; u < users; ++u) {
          reqs.push_back(make_request(kSeedPrompts[1].text, static_cast<int>(*max_tokens)));
        }
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> ts;
        for (int u = 0; u < users; ++u) {
          ts.emplace_back([&, u] { out[u] = bench::run_socket(socket, reqs[u]); });
        }
        for (auto& t : ts) t.join();
        const double wall_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (round == 0) continue;
        int total_tokens = 0;
        for (auto& s : out) {
          if (!s.ok()) {
            cleanup();
            return fail(s.status());
          }
          if (s->tokens > 0) ttft.push_back(s->ttft_ms);
          if (s->tokens > 1) tpot.push_back(s->tpot_ms);
          e2e.push_back(s->e2e_ms);
          total_tokens += s->tokens;
        }
        tps.push_back(total_tokens / wall_s);
      }
      const Summary agg = bench::summarize(tps);
      if (base_tps == 0) base_tps = agg.mean;
      report.sweep.push_back(
          {users, bench::summarize(ttft), bench::summarize(tpot), bench::summarize(e2e), agg});
      std::printf("| %d | %s | %s | %s | %.2f ± %.2f | %.2fx |\n", users,
                  fmt(bench::summarize(ttft)).c_str(), fmt(bench::summarize(tpot)).c_str(),
                  fmt(bench::summarize(e2e)).c_str(), agg.mean, agg.stddev,
                  base_tps > 0 ? agg.mean / base_tps : 0.0);
    }
  }

  // 3. Multi-turn: same-length new user messages; TTFT by turn, with the cached prefix.
  if (!args->has("no-turns")) {
    const int conversations = static_cast<int>(std::max<int64_t>(3, *runs / 2));
    std::vector<std::vector<double>> ttft(*turns);
    std::vector<std::vector<double>> cached(*turns), prompt(*turns);
    for (int c = 0; c < 1 + conversations; ++c) {  // one warm-up conversation
      protocol::Request r;
      r.conversation = "bench-conv-" + std::to_string(++g_request_serial);
      r.params.temperature = 0.0;
      r.params.seed = 1;
      r.params.max_tokens = static_cast<int>(*max_tokens);
      for (int t = 0; t < *turns; ++t) {
        r.id = "bench-" + std::to_string(++g_request_serial);
        // Every turn's new message has the same length; the first one is tagged so that no
        // earlier conversation's cache serves it (turn 1 must be a cold prefill).
        const std::string tag = t == 0 ? "(#" + std::to_string(1000 + c) + ") " : "(#....) ";
        r.messages.push_back(
            {"user",
             tag + "第" + std::to_string(t + 1) + "轮：请把上一段话换一种说法，再补充一个例子。",
             ""});
        auto s = bench::run_socket(socket, r);
        if (!s.ok()) {
          cleanup();
          return fail(s.status());
        }
        r.messages.push_back({"assistant", s->text, ""});
        if (c == 0 || s->tokens == 0) continue;
        ttft[t].push_back(s->ttft_ms);
        cached[t].push_back(s->cached_tokens);
        prompt[t].push_back(s->prompt_tokens);
      }
    }
    std::printf(
        "\n| turn | prompt tokens | cached tokens | TTFT | vs turn 1 |\n"
        "|---|---|---|---|---|\n");
    const double first = bench::summarize(ttft[0]).mean;
    for (int t = 0; t < *turns; ++t) {
      const Summary s = bench::summarize(ttft[t]);
      report.turns.push_back(
          {t + 1, bench::summarize(prompt[t]).mean, bench::summarize(cached[t]).mean, s});
      std::printf("| %d | %.0f | %.0f | %s | %.2fx |\n", t + 1, bench::summarize(prompt[t]).mean,
                  bench::summarize(cached[t]).mean, fmt(s).c_str(),
                  first > 0 ? s.mean / first : 0.0);
    }
  }
  cleanup();
  if (!report_path.empty()) {
    report_file << bench::render_report_html(report);
    report_file.close();
    if (!report_file) return fail(invalid_argument("--report: writing " + report_path + " failed"));
    std::printf("\nreport: %s\n", report_path.c_str());
  }
  return 0;
}

}  // namespace glm::cli
