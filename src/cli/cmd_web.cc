// glmserve web: the HTTP gateway (src/gateway, docs/gateway.md).
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/secret.h"
#include "core/log.h"
#include "gateway/assets.h"
#include "gateway/gateway.h"

namespace glm::cli {
namespace {

constexpr const char* kHelp =
    "usage: glmserve web --engine SOCKET [--port 8080] [--host 127.0.0.1] [--db PATH]\n"
    "                    [--api-key-file F] [--metrics-key-file F] [--cors ORIGIN]\n"
    "                    [--max-body BYTES] [--threads N]\n"
    "                    [--queue N] [--max-conns-per-ip N] [--listen-fd FD]\n"
    "                    [--drain-timeout S]\n"
    "\n"
    "The HTTP gateway: the web chat page, the OpenAI-compatible API (/v1/chat/completions,\n"
    "/v1/models), /health and /metrics, in front of a `glmserve engine` on a Unix socket.\n"
    "\n"
    "  --engine SOCKET   the engine's socket (glmserve engine --socket SOCKET)\n"
    "  --models-control SOCKET  several models: serve's control socket, which starts each\n"
    "                    model's engine on demand (glmserve serve --model A --model B sets it;\n"
    "                    --engine is then the default model's)\n"
    "  --port N          TCP port (default 8080; 0 = any free port, printed at start)\n"
    "  --host H          address to bind (default 127.0.0.1: this machine only)\n"
    "  --db PATH         conversation database (SQLite; default\n"
    "                    ~/.local/share/glmserve/conversations.db), or postgres://USER@HOST/DB\n"
    "                    (PostgreSQL, shared by several nodes: docs/operations.md)\n"
    "  --db-password-file F  PostgreSQL's password, the first line of F (default: libpq's\n"
    "                    PGPASSWORD or PGPASSFILE / ~/.pgpass); never put it in the URL\n"
    "  --api-key-file F  require 'Authorization: Bearer KEY' on /v1 and /api, KEY the first\n"
    "                    line of F (default: the GLMSERVE_API_KEY environment variable, else\n"
    "                    no key); --api-key KEY works too, but a command line is readable by\n"
    "                    every local user (it is blanked once read)\n"
    "  --metrics-key-file F  /metrics needs 'Authorization: Bearer KEY' too, KEY the first\n"
    "                    line of F (or GLMSERVE_METRICS_KEY); default: /metrics is open\n"
    "  --cors ORIGIN     allow this browser origin ('*' for any) to call /v1; default off\n"
    "  --max-body BYTES  largest request body (default 1048576)\n"
    "  --threads N       requests handled at once; each streaming answer holds one (default 256)\n"
    "  --queue N         complete requests waiting for a thread; beyond it 503 (default 256)\n"
    "  --max-conns-per-ip N  open connections from one client address (default 4096; on a\n"
    "                    loopback --host every client is 127.0.0.1: no per-address limit)\n"
    "  --listen-fd FD    serve on this inherited listening socket instead of binding --port\n"
    "                    (glmserve serve opens the port and passes it to the gateway it runs)\n"
    "  --model-name NAME the model's name in /v1/models and answers (default: the engine's,\n"
    "                    its file's general.name; serve gives its store name or file stem)\n"
    "  --drain-timeout S seconds SIGTERM waits for the answers in progress to finish (default\n"
    "                    30); past it, the page's answers are stored as interrupted\n";

// Idle connections cost a file descriptor each: lift the soft limit to the hard one.
void raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

std::string default_db_path() {
  const char* home = std::getenv("HOME");
  if (!home || !*home) return "glmserve-conversations.db";
  std::string dir = std::string(home) + "/.local";
  ::mkdir(dir.c_str(), 0700);
  dir += "/share";
  ::mkdir(dir.c_str(), 0700);
  dir += "/glmserve";
  ::mkdir(dir.c_str(), 0700);
  return dir + "/conversations.db";
}

}  // namespace

int cmd_web(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  auto args =
      Args::parse(argc, argv,
                  {"engine", "models-control", "port", "host", "db", "api-key", "api-key-file",
                   "metrics-key-file", "cors", "max-body", "threads", "queue", "max-conns-per-ip",
                   "listen-fd", "drain-timeout", "model-name", "db-password-file"});
  blank_flag_value(argc, argv, "api-key");  // `ps` must not show it from now on
  if (!args.ok()) return fail(args.status());
  auto api_key = read_secret(*args, {"api-key", "api-key-file", "GLMSERVE_API_KEY"});
  if (!api_key.ok()) return fail(api_key.status());
  auto metrics_key = read_secret(*args, {nullptr, "metrics-key-file", "GLMSERVE_METRICS_KEY"});
  if (!metrics_key.ok()) return fail(metrics_key.status());
  auto db_password = read_secret(*args, {nullptr, "db-password-file", nullptr});
  if (!db_password.ok()) return fail(db_password.status());
  auto engine = args->require("engine");
  if (!engine.ok()) return fail(engine.status());
  auto port = args->get_int("port", 8080);
  if (!port.ok()) return fail(port.status());
  auto max_body = args->get_int("max-body", 1 << 20);
  if (!max_body.ok()) return fail(max_body.status());
  auto threads = args->get_int("threads", 256);
  if (!threads.ok()) return fail(threads.status());
  auto queue = args->get_int("queue", 256);
  if (!queue.ok()) return fail(queue.status());
  auto per_ip = args->get_int("max-conns-per-ip", 0);
  if (!per_ip.ok()) return fail(per_ip.status());
  auto drain_s = args->get_int("drain-timeout", 30);
  if (!drain_s.ok()) return fail(drain_s.status());
  if (*drain_s < 0 || *drain_s > 86400) {
    return fail(invalid_argument("--drain-timeout must be between 0 and 86400 seconds"));
  }
  auto listen_fd = args->get_int("listen-fd", -1);
  if (!listen_fd.ok()) return fail(listen_fd.status());
  if (*listen_fd < -1 || *listen_fd > 65535) {
    return fail(invalid_argument("--listen-fd must be an open file descriptor number"));
  }
  if (*port < 0 || *port > 65535) {
    return fail(invalid_argument("--port must be between 0 and 65535"));
  }
  if (*max_body < 1024 || *threads < 2 || *threads > 4096 || *queue < 0 || *per_ip < 0) {
    return fail(
        invalid_argument("--max-body must be >= 1024, --threads in [2, 4096], --queue >= 0, "
                         "--max-conns-per-ip >= 0"));
  }
  gateway::GatewayOptions opt;
  opt.engine_socket = *engine;
  opt.models_control = args->get("models-control");
  opt.port = static_cast<int>(*port);
  opt.listen_fd = static_cast<int>(*listen_fd);
  opt.host = args->get("host", "127.0.0.1");
  opt.db_path = args->has("db") ? args->get("db") : default_db_path();
  opt.db_password = *db_password;
  opt.model_name = args->get("model-name");
  opt.api_key = *api_key;
  opt.metrics_key = *metrics_key;
  opt.cors_origin = args->get("cors", "");
  opt.max_body_bytes = static_cast<size_t>(*max_body);
  opt.threads = static_cast<int>(*threads);
  opt.queue = static_cast<int>(*queue);
  opt.max_connections_per_ip = static_cast<int>(*per_ip);
  opt.drain_ms = static_cast<int>(*drain_s) * 1000;
  raise_fd_limit();

  // SIGINT/SIGTERM end the server through one waiting thread; SIGPIPE is a closed client.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto gw = gateway::Gateway::create(opt);
  if (!gw.ok()) return fail(gw.status());
  auto bound = (*gw)->bind();
  if (!bound.ok()) return fail(bound.status());
  if (opt.listen_fd < 0) {
    std::printf("glmserve web: http://%s:%d/ (engine %s, %zu KB page gzip, db %s)\n",
                opt.host.c_str(), *bound, opt.engine_socket.c_str(),
                gateway::assets_gzip_bytes() / 1024, opt.db_path.c_str());
    std::fflush(stdout);
  } else {
    // Under serve (or a socket-activating manager): the owner of the socket says where to go
    // once everything serves (serve: "ready: ... open http://..."), never before.
    GLM_LOG_INFO("web: serving on the inherited socket (fd %d; engine %s, db %s)", opt.listen_fd,
                 opt.engine_socket.c_str(), opt.db_path.c_str());
  }
  gateway::Gateway* g = gw->get();
  std::thread waiter([g, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    GLM_LOG_INFO("web: signal %d, stopping", sig);
    // The answers in progress finish first (their pages keep streaming), then everything
    // closes; a second signal during the drain is not waited for (supervisord's SIGKILL is).
    g->drain(g->options().drain_ms);
    g->stop();
  });
  const bool ok = g->serve();
  if (waiter.joinable()) {
    // serve() ended without a signal (listen failure): wake the waiter so it can be joined.
    // The waiter blocks in sigwait() for SIGTERM; this delivers it to that thread only.
    pthread_kill(waiter.native_handle(), SIGTERM);  // NOLINT(bugprone-bad-signal-to-kill-thread)
    waiter.join();
  }
  return ok ? 0 : 1;
}

}  // namespace glm::cli
