// glmserve serve: the one-command server. Starts `glmserve engine` and `glmserve web` as child
// processes of this same binary and supervises them (serve/supervisor.h): a dead child comes
// back with exponential backoff; SIGTERM/SIGINT stop both gracefully (the engine drains).
// One owner per port and socket: serve opens the gateway's port itself and passes it to each
// web child (web --listen-fd 3), and locks PATH.lock beside the engine socket while it runs.
// Several models (--model A --model B, or --models-dir D alone: the whole store): one on-demand
// engine child per model, started and stopped by serve's ModelManager, which the gateway asks
// through serve's control socket (serve/model_manager.h, docs/operations.md "Several models").
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "cli/secret.h"
#include "cli/serve_models.h"
#include "cli/socket_lock.h"
#include "core/log.h"
#include "core/unix_socket.h"
#include "http/listen.h"
#include "hub/store.h"
#include "protocol/line_buffer.h"
#include "protocol/protocol.h"
#include "serve/control_server.h"
#include "serve/model_manager.h"
#include "serve/supervisor.h"
#include "store/database.h"

namespace glm::cli {
namespace {

constexpr const char* kUsage =
    "usage: glmserve serve --model M.gguf [--port 8080] [--host 127.0.0.1] [flags]\n"
    "       glmserve serve M.gguf [flags]\n"
    "Starts the engine and the web gateway, restarts either if it dies, stops both on\n"
    "SIGTERM/Ctrl-C (in-flight requests finish first). llama-server's -m, -c, -ngl and -t\n"
    "are --model, --ctx-size, --gpu-layers and --threads.\n"
    "  --model M            GGUF model file (or --echo: a model-free echo engine)\n"
    "  --port N, --host H   where the web gateway listens (default 127.0.0.1:8080); serve\n"
    "                       opens the port itself: a port in use stops it at once\n"
    "  --socket PATH        engine socket (default $XDG_RUNTIME_DIR/glmserve/engine-PORT.sock,\n"
    "                       else /tmp/glmserve-UID/engine-PORT.sock), locked (PATH.lock) while\n"
    "                       serve runs, so two serves never share it\n"
    "  --no-web             run and supervise the engine only\n"
    "several models (docs/operations.md): --model given more than once (a path or a store\n"
    "  name, each addressed by its store name or file stem), or --models-dir D without --model\n"
    "  (every model of the store); each loads on its first request:\n"
    "  --keep-alive T       unload a model idle this long (seconds, or 30s/5m/1h; -1 = never;\n"
    "                       default 5m)\n"
    "  --max-loaded N       at most N models loaded at once (default 0 = no limit); the least\n"
    "                       recently used idle one makes room\n"
    "  --max-memory-mb N    the loaded models' file sizes stay under N MB (default 80% of RAM;\n"
    "                       0 = no limit)\n"
    "  --load-wait S        a request waits at most S seconds for its model (default 300)\n"
    "engine flags, passed on: --threads --ctx-size --max-batch --max-queue --prefill-chunk\n"
    "  --max-stall-ms --socket-mode --drain-timeout --max-line --max-connections --log-level\n"
    "  --echo --echo-delay\n"
    "  --kv f16|f32|q8_0 (the KV cache's element type; q8_0: about half the memory)\n"
    "  --kv-disk DIR --kv-disk-max-mb N (the KV cache survives restarts: docs/engine.md; on by\n"
    "  default in $XDG_DATA_HOME/glmserve/kv-cache, else ~/.local/share/glmserve/kv-cache,\n"
    "  at most 4096 MB; --kv-disk off turns it off)\n"
    "  --spec ngram|draft|mtp|off, --draft M.gguf (speculative decoding; the draft model must\n"
    "  share the vocabulary of every served model; mtp: every served model needs its MTP block)\n"
    "  --device auto|cpu|vulkan|vulkan:N, --gpu-layers N (where the models run: docs/gpu.md),\n"
    "  --cpu-moe N|all|auto (GLM-4.5 on a GPU: the routed experts of N layers in host memory)\n"
    "  --reasoning-format auto|think|none (a reasoning model's thinking apart from the answer)\n"
    "  --lora A.gguf[:S] (repeatable: merged into the model at load; one --model only;\n"
    "  docs/adapters.md)\n"
    "  --adapter NAME=PATH[:S] (repeatable: served per request, chosen by model NAME or\n"
    "  BASE:NAME; with several models, on each model it fits; docs/adapters.md)\n"
    "web flags, passed on: --db --cors --max-body --web-threads (web's --threads)\n"
    "  --db PATH|postgres://USER@HOST/DB (several nodes share PostgreSQL: docs/operations.md);\n"
    "  --db-password-file F (or PGPASSWORD / PGPASSFILE; never in the URL)\n"
    "  --api-key-file F (or GLMSERVE_API_KEY; --api-key K, blanked once read) and\n"
    "  --metrics-key-file F (or GLMSERVE_METRICS_KEY): passed to the gateway in its\n"
    "  environment, never on a command line (docs/operations.md, \"Secrets\")\n";

const char* const kEngineFlags[] = {
    "threads",        "ctx-size", "max-batch",       "max-queue",    "socket-mode",
    "drain-timeout",  "max-line", "max-connections", "log-level",    "echo-delay",
    "kv-disk-max-mb", "spec",     "draft",           "kv",           "device",
    "gpu-layers",     "cpu-moe",  "prefill-chunk",   "max-stall-ms", "reasoning-format"};
const char* const kWebFlags[] = {"db", "cors", "max-body"};
// Read by serve and handed to the gateway in its environment (ChildSpec::env), never in argv.
const char* const kSecretFlags[] = {"api-key", "api-key-file", "metrics-key-file",
                                    "db-password-file"};

// The KV disk cache's directory: --kv-disk DIR, else (on by default: serve keeps its state
// under the user's data directory) $XDG_DATA_HOME/glmserve/kv-cache, else
// ~/.local/share/glmserve/kv-cache, created 0700; "" when --kv-disk off (or no home).
std::string kv_disk_dir(const Args& args) {
  std::string dir;
  if (args.has("kv-disk")) {
    dir = args.get("kv-disk");
    if (dir == "off") return "";
  } else {
    const char* xdg = std::getenv("XDG_DATA_HOME");
    const char* home = std::getenv("HOME");
    if (xdg != nullptr && *xdg != '\0') {
      dir = std::string(xdg) + "/glmserve/kv-cache";
    } else if (home != nullptr && *home != '\0') {
      dir = std::string(home) + "/.local/share/glmserve/kv-cache";
    } else {
      return "";
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // a failure: the engine says so and runs on
  ::chmod(dir.c_str(), 0700);
  return dir;
}

// The health status of the engine on `socket` if it is ours (its instance token is
// `instance`); "foreign" if another instance's engine answers there; "" if none answers.
std::string engine_health(const std::string& socket, const std::string& instance,
                          std::string* model) {
  auto fd = connect_unix(socket);
  if (!fd.ok()) return "";
  std::string status;
  if (write_all(*fd, "{\"type\":\"health\"}\n").ok()) {
    pollfd p{*fd, POLLIN, 0};
    protocol::LineBuffer in(1 << 16);
    std::string line;
    char buf[4096];
    while (::poll(&p, 1, 200) > 0) {
      const ssize_t n = ::read(*fd, buf, sizeof(buf));
      if (n <= 0) break;
      in.append(std::string_view(buf, static_cast<size_t>(n)));
      if (in.next(&line) == protocol::LineBuffer::Next::kLine) {
        auto ev = protocol::parse_event(line);
        if (ev.ok()) {
          status = ev->instance == instance ? generation::health_name(ev->health) : "foreign";
          *model = ev->model;
        }
        break;
      }
    }
  }
  ::close(*fd);
  return status;
}

// True if the gateway answers GET /health with 200 through the listening socket `listen_fd`
// (connected on loopback when it listens on a wildcard address) within `timeout_ms`. The
// socket is serve's own, so a connection is always accepted by the kernel: only an answer
// proves that a web child serves it.
// With several models /health asks serve itself (its control socket), which waits in this call:
// `path` "/" then (the page, which only the gateway serves).
bool web_healthy(int listen_fd, int timeout_ms, const char* path = "/health") {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  std::string host;
  char text[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    if (a->sin_addr.s_addr == htonl(INADDR_ANY)) a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    host = ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr)) a->sin6_addr = in6addr_loopback;
    host = std::string("[") + ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text)) + "]";
  } else {
    return false;
  }
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
    const std::string req = std::string("GET ") + path + " HTTP/1.1\r\nHost: " + host + ":" +
                            std::to_string(http::local_port(listen_fd)) +
                            "\r\nConnection: close\r\n\r\n";
    if (write_all(fd, req).ok()) {
      std::string head;
      pollfd p{fd, POLLIN, 0};
      char buf[512];
      while (head.size() < 12 && ::poll(&p, 1, timeout_ms) > 0) {
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      ok = head.rfind("HTTP/1.1 200", 0) == 0 || head.rfind("HTTP/1.0 200", 0) == 0;
    }
  }
  ::close(fd);
  return ok;
}

// "300", "30s", "5m", "1h" -> seconds; "-1" = never.
StatusOr<int64_t> parse_duration_s(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  int64_t mult = 1;
  if (end != nullptr && *end != '\0') {
    const std::string unit = end;
    mult = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  }
  if (text.empty() || errno != 0 || mult == 0 || v < -1 || end == text.c_str()) {
    return invalid_argument("--" + flag +
                            ": expected seconds or 30s / 5m / 1h (-1 = never), got '" + text + "'");
  }
  return v < 0 ? -1 : v * mult;
}

// The engine socket's path without ".sock": the stem of the files serve keeps beside it.
std::string socket_stem(const std::string& socket) {
  const bool sock = socket.size() > 5 && socket.compare(socket.size() - 5, 5, ".sock") == 0;
  return sock ? socket.substr(0, socket.size() - 5) : socket;
}

// Several models' sockets beside the engine socket: PATH.sock -> PATH.mI.sock (model I's
// engine) and PATH.control.sock (serve's control socket).
std::string sibling_socket(const std::string& base, const std::string& part) {
  return socket_stem(base) + "." + part + ".sock";
}

// The `glmserve web` child: the engine socket (the default model's with several) and the flags
// serve passes on.
serve::ChildSpec web_child(const Args& args, const std::vector<std::string>& secrets,
                           const std::string& socket, const std::string& host, int64_t port,
                           int listen_fd, int64_t drain_s) {
  serve::ChildSpec web{"web",
                       "/proc/self/exe",
                       {"glmserve", "web", "--engine", socket, "--port", std::to_string(port),
                        "--host", host, "--listen-fd", "3"},
                       listen_fd};
  web.env = secrets;
  for (const char* f : kWebFlags) {
    if (args.has(f)) {
      web.argv.push_back(std::string("--") + f);
      web.argv.push_back(args.get(f));
    }
  }
  if (args.has("web-threads")) {
    web.argv.push_back("--threads");
    web.argv.push_back(args.get("web-threads"));
  }
  // One drain bound for both: the gateway waits for the page's answers as long as the
  // engine for its requests (and serve for both, plus 5 s).
  web.argv.push_back("--drain-timeout");
  web.argv.push_back(std::to_string(drain_s));
  return web;
}

// Several models: engines 0..n-1 on demand (ModelManager), the gateway last, which asks serve's
// control socket (BASE.control.sock) for each request's engine.
int serve_several(const Args& args, const std::vector<std::string>& secrets,
                  std::vector<serve::ManagedModel> models,
                  const std::vector<std::vector<std::string>>& adapter_flags,
                  const std::string& socket, const std::string& instance, int listen_fd,
                  const std::string& host, int64_t port, int64_t drain_s) {
  serve::ManagerOptions mo;
  mo.instance = instance;
  auto keep = parse_duration_s("keep-alive", args.get("keep-alive", "5m"));
  if (!keep.ok()) return fail(keep.status());
  mo.keep_alive_s = static_cast<int>(std::min<int64_t>(*keep, 1 << 30));
  auto max_loaded = args.get_int("max-loaded", 0);
  if (!max_loaded.ok()) return fail(max_loaded.status());
  if (*max_loaded < 0) return fail(invalid_argument("--max-loaded must be >= 0 (0 = no limit)"));
  mo.max_loaded = static_cast<int>(*max_loaded);
  const uint64_t ram = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                       static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  auto max_mb = args.get_int("max-memory-mb", static_cast<int64_t>(ram / 10 * 8 >> 20));
  if (!max_mb.ok()) return fail(max_mb.status());
  if (*max_mb < 0) return fail(invalid_argument("--max-memory-mb must be >= 0 (0 = no limit)"));
  mo.max_memory_bytes = static_cast<uint64_t>(*max_mb) << 20;
  auto wait_s = args.get_int("load-wait", 300);
  if (!wait_s.ok()) return fail(wait_s.status());
  if (*wait_s < 1) return fail(invalid_argument("--load-wait must be >= 1 (seconds)"));
  mo.wait_ms = static_cast<int>(std::min<int64_t>(*wait_s, 86400) * 1000);

  const std::string kv_dir = kv_disk_dir(args);  // each engine creates its DIR/NAME below it
  std::vector<serve::ChildSpec> children;
  for (size_t i = 0; i < models.size(); ++i) {
    models[i].socket = sibling_socket(socket, "m" + std::to_string(i));
    models[i].child = i;
    serve::ChildSpec engine{"engine " + models[i].name,
                            "/proc/self/exe",
                            {"glmserve", "engine", "--socket", models[i].socket, "--instance",
                             instance, "--model", models[i].path}};
    engine.on_demand = true;
    for (const char* f : kEngineFlags) {
      if (args.has(f)) {
        engine.argv.push_back(std::string("--") + f);
        engine.argv.push_back(args.get(f));
      }
    }
    for (const std::string& a : adapter_flags[i]) {
      engine.argv.push_back("--adapter");
      engine.argv.push_back(a);
    }
    if (!kv_dir.empty()) {
      // Each model's KV cache in its own directory: one model's cache means nothing to another.
      engine.argv.push_back("--kv-disk");
      engine.argv.push_back(kv_dir + "/" + models[i].name);
    }
    children.push_back(std::move(engine));
  }
  const std::string control = sibling_socket(socket, "control");
  serve::ChildSpec web = web_child(args, secrets, models[0].socket, host, port, listen_fd, drain_s);
  web.argv.push_back("--models-control");
  web.argv.push_back(control);
  children.push_back(std::move(web));
  const size_t web_index = models.size();

  serve::SupervisorOptions options;
  options.stop_timeout = std::chrono::seconds(drain_s + 5);
  serve::Supervisor supervisor(children, options);
  std::string names;
  for (const auto& m : models) names += (names.empty() ? "" : ", ") + m.name;
  serve::ModelManager manager(std::move(models), mo, &supervisor);
  serve::ControlServer control_server(&manager, &supervisor);
  if (Status st = control_server.listen(control); !st.ok()) return fail(st);
  bool ready = false;
  supervisor.on_start = [&](size_t index, pid_t) {
    if (index == web_index) {
      ready = false;
    } else {
      manager.on_start(index);
    }
  };
  supervisor.on_exit = [&](size_t index, const std::string& how) { manager.on_exit(index, how); };
  supervisor.on_tick = [&] {
    manager.on_tick();
    if (ready || !web_healthy(listen_fd, 500, "/")) return;
    supervisor.mark_up(web_index);
    ready = true;
    GLM_LOG_INFO("serve: ready: models %s (each loads on its first request); open http://%s:%lld/",
                 names.c_str(), host.c_str(), static_cast<long long>(port));
  };
  GLM_LOG_INFO("serve: control socket %s", control.c_str());
  return supervisor.run();
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::set<std::string> known = {"model",      "port",          "host",
                                 "socket",     "web-threads",   "keep-alive",
                                 "max-loaded", "max-memory-mb", "load-wait"};
  for (const char* f : kEngineFlags) known.insert(f);
  for (const char* f : kWebFlags) known.insert(f);
  for (const char* f : kSecretFlags) known.insert(f);
  known.insert("kv-disk");
  known.insert("lora");
  known.insert("adapter");
  auto args =
      Args::parse(argc, argv, known, {"echo", "no-web"}, llama_cpp_aliases({{"ctx", "ctx-size"}}));
  blank_flag_value(argc, argv, "api-key");  // `ps` must not show it from now on
  if (!args.ok()) return fail(args.status());
  if (Status st = args->model_from_positional(); !st.ok()) return fail(st);
  // The gateway's secrets, for its environment: a command line is readable by every local user.
  std::vector<std::string> secrets;
  auto api_key = read_secret(*args, {"api-key", "api-key-file", "GLMSERVE_API_KEY"});
  if (!api_key.ok()) return fail(api_key.status());
  auto metrics_key = read_secret(*args, {nullptr, "metrics-key-file", "GLMSERVE_METRICS_KEY"});
  if (!metrics_key.ok()) return fail(metrics_key.status());
  if (!api_key->empty()) secrets.push_back("GLMSERVE_API_KEY=" + *api_key);
  if (!metrics_key->empty()) secrets.push_back("GLMSERVE_METRICS_KEY=" + *metrics_key);
  // PostgreSQL's password (--db postgres://...): libpq reads PGPASSWORD in the gateway.
  auto db_password = read_secret(*args, {nullptr, "db-password-file", nullptr});
  if (!db_password.ok()) return fail(db_password.status());
  if (!db_password->empty()) secrets.push_back("PGPASSWORD=" + *db_password);
  // A PostgreSQL database the gateway cannot reach (or log in to) stops serve now, with its
  // reason, instead of a gateway restarted until serve gives up. (A SQLite path the gateway
  // cannot open still takes that road: a local file, found at once.)
  if (args->has("db") && store::is_postgres_url(args->get("db")) && !args->has("no-web")) {
    if (Status st = store::check_database(args->get("db"), *db_password); !st.ok()) {
      return fail(st);
    }
  }
  const bool echo = args->has("echo");
  engine::Options spec;  // checked here, so that a refused mode stops serve before its engine
  if (Status st = spec_flags(*args, &spec); !st.ok()) return fail(st);
  if (Status st = kv_type_flag(*args, "f16", &spec.kv_type); !st.ok()) return fail(st);
  if (Status st = device_flags(*args, &spec.device, &spec.gpu_layers, &spec.cpu_moe); !st.ok())
    return fail(st);
  if (Status st = lora_flags(*args, &spec.lora); !st.ok()) return fail(st);
  const bool several = !echo && (args->get_all("model").size() > 1 ||
                                 (!args->has("model") && args->has("models-dir")));
  std::vector<serve::ManagedModel> models;
  if (several && !spec.lora.empty()) {
    return fail(invalid_argument("--lora merges into one model: give one --model"));
  }
  for (const std::string& a : args->get_all("adapter")) {
    StatusOr<engine::AdapterSpec> as = engine::parse_adapter_spec(a);
    if (!as.ok()) return fail(as.status());
  }
  std::vector<std::vector<std::string>> adapter_flags;  // several: each model's --adapter values
  if (several) {
    if (args->has("no-web")) {
      return fail(invalid_argument("--no-web runs one engine: give one --model"));
    }
    auto m = served_models(*args);
    if (!m.ok()) return fail(m.status());
    models = std::move(m).value();
    if (Status st = attach_adapters(*args, &models, &adapter_flags); !st.ok()) return fail(st);
  } else if (!echo) {
    auto model = args->require("model");
    if (!model.ok()) return fail(model.status());
    if (::access(model->c_str(), R_OK) != 0) {
      return fail(not_found("cannot read model file '" + *model + "'"));
    }
  }
  auto port = args->get_int("port", 8080);
  if (!port.ok()) return fail(port.status());
  if (*port < 0 || *port > 65535) return fail(invalid_argument("--port must be in [0, 65535]"));
  const std::string host = args->get("host", "127.0.0.1");
  const bool with_web = !args->has("no-web");
  // The port first, and for the whole of serve's life: a port in use stops serve at once, and
  // no other process can take it while the gateway restarts (each web child inherits it).
  int listen_fd = -1;
  if (with_web) {
    auto fd = http::listen_tcp(host, static_cast<int>(*port), 4096);
    if (!fd.ok()) return fail(fd.status());
    listen_fd = *fd;
    *port = http::local_port(listen_fd);  // --port 0: the one the kernel chose
  }
  std::string socket = args->get("socket");
  if (socket.empty()) {
    auto dir = socket_dir();
    if (!dir.ok()) return fail(dir.status());
    remove_stale_locks(*dir);
    socket = *dir + "/engine-" + std::to_string(*port) + ".sock";
  }
  auto lock = lock_socket_path(socket);
  if (!lock.ok()) return fail(lock.status());
  struct Unlock {  // on every return from here: the lock file goes with serve
    std::string socket;
    int fd;
    ~Unlock() { unlock_socket_path(socket, fd); }
  } unlock{socket, *lock};
  auto drain_s = args->get_int("drain-timeout", 30);
  if (!drain_s.ok()) return fail(drain_s.status());

  const std::string self = "/proc/self/exe";
  // A token only this serve knows: health answers carry it, so an engine of another instance
  // answering on the same socket path is never taken for ours.
  std::random_device rd;
  char token[33];
  std::snprintf(token, sizeof(token), "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  const std::string instance = token;
  if (several) {
    return serve_several(*args, secrets, std::move(models), adapter_flags, socket, instance,
                         listen_fd, host, *port, *drain_s);
  }
  serve::ChildSpec engine{
      "engine", self, {"glmserve", "engine", "--socket", socket, "--instance", instance}};
  if (echo) {
    engine.argv.push_back("--echo");
  } else {
    engine.argv.push_back("--model");
    engine.argv.push_back(args->get("model"));
  }
  for (const char* f : kEngineFlags) {
    if (args->has(f)) {
      engine.argv.push_back(std::string("--") + f);
      engine.argv.push_back(args->get(f));
    }
  }
  for (const char* f : {"lora", "adapter"}) {
    for (const std::string& v : args->get_all(f)) {
      engine.argv.push_back(std::string("--") + f);
      engine.argv.push_back(v);
    }
  }
  std::string adapter_state;  // removed when serve ends
  if (!echo) {
    // Adapters loaded at run time survive an engine restart, not serve's: each serve starts
    // from its flags (docs/adapters.md).
    adapter_state = socket_stem(socket) + ".adapters.json";
    ::unlink(adapter_state.c_str());
    engine.argv.push_back("--adapter-state");
    engine.argv.push_back(adapter_state);
  }
  if (!echo) {
    if (const std::string kv_dir = kv_disk_dir(*args); !kv_dir.empty()) {
      engine.argv.push_back("--kv-disk");
      engine.argv.push_back(kv_dir);
    }
  }
  std::vector<serve::ChildSpec> children = {engine};
  if (with_web) {
    serve::ChildSpec web = web_child(*args, secrets, socket, host, *port, listen_fd, *drain_s);
    if (!echo) {  // named as with several models, not by the file's description
      web.argv.push_back("--model-name");
      web.argv.push_back(served_name(args->get_all("model").back(), args->get("model")));
    }
    children.push_back(std::move(web));
  }

  serve::SupervisorOptions options;
  options.stop_timeout = std::chrono::seconds(*drain_s + 5);
  serve::Supervisor supervisor(children, options);
  std::string model_name;
  // Ready = our own engine answers ready on the socket and (with the gateway) the web child
  // answers /health with 200; reported again after either child restarts.
  bool engine_ready = false;
  bool ready = false;
  bool warned_foreign = false;
  supervisor.on_start = [&](size_t index, pid_t) {
    if (index == 0) engine_ready = false;
    ready = false;
  };
  supervisor.on_tick = [&] {
    if (ready) return;
    std::string model;
    if (!engine_ready) {
      const std::string health = engine_health(socket, instance, &model);
      if (health == "foreign" && !warned_foreign) {
        warned_foreign = true;
        GLM_LOG_ERROR(
            "serve: another instance's engine answers on %s; not ready (stop it, or give "
            "this serve its own --socket)",
            socket.c_str());
      }
      if (health != "ready") return;
      engine_ready = true;
      supervisor.mark_up(0);
      model_name = model;
    }
    if (!with_web) {
      ready = true;
      GLM_LOG_INFO("serve: ready: model %s on %s", model_name.c_str(), socket.c_str());
      return;
    }
    if (!web_healthy(listen_fd, 500)) return;
    supervisor.mark_up(1);
    ready = true;
    GLM_LOG_INFO("serve: ready: model %s; open http://%s:%lld/", model_name.c_str(), host.c_str(),
                 static_cast<long long>(*port));
  };
  GLM_LOG_INFO("serve: engine socket %s", socket.c_str());
  const int rc = supervisor.run();
  if (!adapter_state.empty()) ::unlink(adapter_state.c_str());
  return rc;
}

}  // namespace glm::cli
