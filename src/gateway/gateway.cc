#include "gateway/gateway.h"

#include <unistd.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "api/openai.h"
#include "core/json.h"
#include "core/log.h"
#include "gateway/assets.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;

// No inline script or style anywhere: model output rendered into the page can never run.
constexpr const char* kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "application/json", any case, with or without parameters ("; charset=utf-8").
bool is_json_media_type(const std::string& content_type) {
  std::string type = lower(content_type.substr(0, content_type.find(';')));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  return type == "application/json";
}

bool is_loopback_host(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]";
}

// The Host header without its port ("127.0.0.1:8080" -> "127.0.0.1", "[::1]:80" -> "[::1]").
std::string host_name(const std::string& host_header) {
  if (!host_header.empty() && host_header[0] == '[') {
    const size_t end = host_header.find(']');
    return end == std::string::npos ? host_header : host_header.substr(0, end + 1);
  }
  const size_t colon = host_header.find(':');
  return colon == std::string::npos ? host_header : host_header.substr(0, colon);
}

// The HTTP layer's counters in Prometheus text (appended to Metrics::render()).
std::string http_metrics(const http::ServerStats& s) {
  std::string out;
  out += "# HELP glmserve_http_connections Open HTTP connections.\n";
  out += "# TYPE glmserve_http_connections gauge\n";
  out += "glmserve_http_connections " + std::to_string(s.connections) + "\n";
  out += "# HELP glmserve_http_refused_total Connections and requests the HTTP layer refused.\n";
  out += "# TYPE glmserve_http_refused_total counter\n";
  const std::pair<const char*, long long> reasons[] = {{"connection_limit", s.refused},
                                                       {"overload", s.overloaded},
                                                       {"timeout", s.timed_out},
                                                       {"bad_request", s.bad_requests}};
  for (const auto& [reason, n] : reasons) {
    out += std::string("glmserve_http_refused_total{reason=\"") + reason + "\"} " +
           std::to_string(n) + "\n";
  }
  return out;
}

// The engine's stats in Prometheus text; glmserve_engine_up 0 alone when it did not answer.
std::string engine_metrics(const protocol::StatsInfo* s) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, long long value) {
    out += std::string("# HELP ") + name + " " + help + "\n";
    out += std::string("# TYPE ") + name + " " + type + "\n";
    out += std::string(name) + " " + std::to_string(value) + "\n";
  };
  metric("glmserve_engine_up", "gauge", "1 when the engine answered this scrape.", s ? 1 : 0);
  if (s == nullptr) return out;
  metric("glmserve_engine_requests_total", "counter", "Requests the engine queued.",
         s->requests_total);
  metric("glmserve_engine_prompt_tokens_total", "counter",
         "Prompt tokens of admitted requests (once per request, whatever its choices).",
         s->prompt_tokens_total);
  metric("glmserve_engine_cached_tokens_total", "counter",
         "Prompt tokens the KV cache already held (not prefilled).", s->cached_tokens_total);
  metric("glmserve_engine_generated_tokens_total", "counter", "Tokens the engine generated.",
         s->generated_tokens_total);
  metric("glmserve_engine_whole_prompts_total", "counter",
         "Requests whose whole prompt was cached with its logits: no forward pass before the "
         "first token.",
         s->whole_prompts_total);
  metric("glmserve_engine_spec_drafted_tokens_total", "counter",
         "Tokens speculative decoding drafted (engine --spec ngram).", s->speculation.drafted);
  metric("glmserve_engine_spec_accepted_tokens_total", "counter",
         "Drafted tokens the model accepted (each saved a decode pass).", s->speculation.accepted);
  metric("glmserve_engine_queued", "gauge", "Requests waiting for admission.", s->queued);
  metric("glmserve_engine_running", "gauge", "Sequences in the batch.", s->running);
  metric("glmserve_engine_kv_blocks_used", "gauge", "KV cache blocks in use.", s->kv_blocks_used);
  metric("glmserve_engine_kv_blocks_free", "gauge", "KV cache blocks free (idle cached included).",
         s->kv_blocks_free);
  return out;
}

// glmserve_engine_info{model, device} 1: what the engine serves and where it runs (docs/gpu.md).
std::string engine_info_metric(const protocol::Event& health) {
  return "# HELP glmserve_engine_info The model the engine serves and the device it runs on.\n"
         "# TYPE glmserve_engine_info gauge\n"
         "glmserve_engine_info{model=\"" +
         escape_label(health.model) + "\",device=\"" + escape_label(health.device) + "\"} 1\n";
}

// A random seed in [1, 2^53): exact as a JSON number on every side.
uint64_t random_seed() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return (rng() & ((uint64_t{1} << 53) - 1)) | 1;
}

}  // namespace

bool sse_write(http::StreamSink& sink, const std::string& payload) {
  std::string frame;
  frame.reserve(payload.size() + 8);
  frame += "data: ";
  frame += payload;
  frame += "\n\n";
  return sink.write(frame);
}

Gateway::Gateway(const GatewayOptions& options)
    : options_(options),
      engine_(options.engine_socket),
      router_(options.engine_socket, options.models_control) {}

Gateway::~Gateway() { stop(); }

StatusOr<std::unique_ptr<Gateway>> Gateway::create(const GatewayOptions& options) {
  if (options.engine_socket.empty()) {
    return invalid_argument("missing --engine SOCKET (the path given to glmserve engine --socket)");
  }
  if (options.db_path.empty()) return invalid_argument("missing --db PATH");
  std::unique_ptr<Gateway> g(new Gateway(options));
  Store::Options so;
  so.password = options.db_password;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  so.node = std::string(host) + ":" + std::to_string(options.port);
  auto store = Store::open(options.db_path, so);
  if (!store.ok()) return store.status();
  g->store_ = std::move(store).value();
  g->install_middleware();
  g->install_static_routes();
  g->install_openai_routes();
  g->install_models_routes();
  g->install_chat_routes();
  g->install_api_routes();
  g->install_util_routes();
  g->install_responses_routes();
  return g;
}

void Gateway::install_middleware() {
  http::ServerOptions so;
  so.host = options_.host;
  so.port = options_.port;
  so.listen_fd = options_.listen_fd;
  // Two event-loop threads where there are two cores: requests are read and parsed on them,
  // and one alone became the bottleneck at 100 concurrent streams on a loaded 2-core machine.
  so.io_threads = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  so.workers = options_.threads;
  so.max_queue = options_.queue;
  so.max_body_bytes = options_.max_body_bytes;
  so.request_timeout_ms = options_.read_timeout_s * 1000;
  so.idle_timeout_ms = options_.idle_timeout_s * 1000;
  so.write_timeout_ms = options_.write_timeout_s * 1000;
  so.max_connections = options_.max_connections;
  so.max_connections_per_ip = options_.max_connections_per_ip > 0 ? options_.max_connections_per_ip
                              : is_loopback_host(options_.host)   ? options_.max_connections
                                                                  : 4096;
  so.default_headers.add("Content-Security-Policy", kCsp);
  so.default_headers.add("X-Content-Type-Options", "nosniff");
  so.default_headers.add("X-Frame-Options", "DENY");
  so.default_headers.add("Referrer-Policy", "no-referrer");
  // No Cross-Origin-Opener-Policy: it makes Chromium swap to a fresh renderer process on
  // every navigation to the page, which costs first paint ~1 s on a loaded 2-core machine;
  // frame-ancestors already keeps the page out of other sites' frames.
  so.default_headers.add("Cross-Origin-Resource-Policy", "same-origin");
  server_ = std::make_unique<http::Server>(std::move(so));
  routes_ = std::make_unique<Routes>(server_.get(), &metrics_, &engine_retry_ms_);

  server_->set_pre_routing([this](http::Request& req, http::Response& res) {
    metrics_.http_request();
    // DNS rebinding: a page from another site must not reach a loopback-bound gateway through
    // a hostname that resolves to 127.0.0.1.
    if (is_loopback_host(options_.host) && req.has_header("Host") &&
        !is_loopback_host(host_name(req.header("Host")))) {
      routes_->write_error(res, Status(ErrorCode::kInvalidArgument,
                                       "this gateway is bound to " + options_.host +
                                           " and answers only to that host name; use --host to "
                                           "serve other names"));
      res.status = 421;
      return true;
    }
    const bool api = starts_with(req.path, "/v1/") || starts_with(req.path, "/api/") ||
                     req.path == "/tokenize" || req.path == "/detokenize" ||
                     req.path == "/apply-template";
    const std::string& origin = req.header("Origin");
    const bool cors = !options_.cors_origin.empty() && !origin.empty() &&
                      (options_.cors_origin == "*" || options_.cors_origin == origin) &&
                      (starts_with(req.path, "/v1/") || req.path == "/health");
    if (cors) {
      res.set_header("Access-Control-Allow-Origin", options_.cors_origin == "*" ? "*" : origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return true;
      }
    }
    if (api && !authorized(req, options_.api_key)) {
      routes_->write_error(res, Status(ErrorCode::kUnauthorized,
                                       "missing or wrong API key: send the header "
                                       "'Authorization: Bearer <key>' with the --api-key the "
                                       "gateway was started with"));
      res.set_header("WWW-Authenticate", "Bearer");
      return true;
    }
    // The APIs read every body as JSON, whatever its Content-Type claims (`curl -d` sends
    // application/x-www-form-urlencoded; llama-server and Ollama accept it too): a body that
    // does not parse is the route's 400. The one exception is a browser's: a cross-site form
    // or text/plain POST (sent without a CORS preflight, and always with an Origin header)
    // must not spend this machine's CPU on a generation, so a request with an Origin needs a
    // JSON media type (the page and CORS clients send one).
    if (api && (req.method == "POST" || req.method == "PATCH" || req.method == "PUT")) {
      if (!is_json_media_type(req.header("Content-Type")) && !req.header("Origin").empty()) {
        routes_->write_error(res,
                             invalid_argument("send the body as Content-Type: application/json"));
        res.status = 415;
        return true;
      }
    }
    return false;
  });

  // Answers without a body: no route, and the HTTP layer's own refusals (its reason says why).
  // Runs on the event loop for the latter: only formatting here.
  server_->set_error_handler([this](const http::Request& req, http::Response& res) {
    const int status = res.status;
    if (status == 404) {
      routes_->write_error(res, not_found("no route " + req.method + " " + req.path +
                                          " (see docs/gateway.md for the API)"));
    } else if (status == 413) {
      GLM_LOG_INFO("refused a request body over --max-body (%zu bytes)",
                   static_cast<size_t>(options_.max_body_bytes));
      routes_->write_error(res, Status(ErrorCode::kInvalidArgument,
                                       "the request body is over this server's limit of " +
                                           std::to_string(options_.max_body_bytes) +
                                           " bytes: shorten the conversation or start a new one"));
    } else if (status == 503) {
      routes_->write_error(res, Status(ErrorCode::kUnavailable, res.reason));
    } else if (!res.reason.empty()) {
      routes_->write_error(res, invalid_argument(res.reason));
    }
    res.status = status;
  });
  server_->set_exception_handler(
      [this](const http::Request&, http::Response& res, const std::exception_ptr& ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        GLM_LOG_ERROR("gateway: request failed: %s", what.c_str());
        routes_->write_error(res, Status(ErrorCode::kInternal, "internal error: " + what));
      });
}

bool Gateway::authorized(const http::Request& req, const std::string& expected) {
  if (expected.empty()) return true;
  // "Authorization: Bearer KEY" (the scheme is case-insensitive, RFC 9110), or Anthropic's
  // "x-api-key: KEY".
  std::string got = req.header("x-api-key");
  if (got.empty()) {
    const std::string& auth = req.header("Authorization");
    if (auth.size() > 7 && lower(auth.substr(0, 7)) == "bearer ") got = auth.substr(7);
  }
  // Constant-time compare: the key's prefix must not leak through timing.
  if (got.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff |= static_cast<unsigned char>(got[i] ^ expected[i]);
  }
  return diff == 0;
}

RouteStatus Gateway::unfinished(const RelayResult& r) {
  if (api::is_complete(r.outcome)) return {};
  return RouteStatus::uncounted(cut_or_error(r));
}

std::vector<std::string> Gateway::served_adapters() {
  if (router_.several()) return {};
  protocol::Request req;
  req.type = protocol::RequestType::kHealth;
  req.id = protocol::make_request_id();
  auto ev = engine_.query(req, 2000);
  if (!ev.ok()) return {};
  return ev->adapters;
}

void Gateway::name_model(const std::string& model, protocol::Request* r) {
  if (model.empty()) return;
  const std::string base = model_name();
  if (model == base) return;
  const size_t colon = model.rfind(':');
  if (colon != std::string::npos && colon == base.size() && model.compare(0, colon, base) == 0) {
    r->adapter = model.substr(colon + 1);  // "BASE:" alone: the bare model
    return;
  }
  // A name no adapter can have (not a protocol id) is the bare model without a word to the engine.
  if (protocol::check_id(model, "model").ok()) r->model = model;
}

std::string Gateway::model_name() {
  if (!options_.model_name.empty() && !router_.several()) return options_.model_name;
  {
    std::lock_guard<std::mutex> lock(model_mutex_);
    if (!model_name_.empty()) return model_name_;
  }
  if (router_.several()) {  // serve's first model, which never changes
    auto list = router_.list();
    if (!list.ok()) return "glmserve";
    std::lock_guard<std::mutex> lock(model_mutex_);
    model_name_ = list->value("default", "glmserve");
    return model_name_;
  }
  protocol::Request req;
  req.type = protocol::RequestType::kHealth;
  req.id = protocol::make_request_id();
  auto ev = engine_.query(req, 2000);
  if (!ev.ok() || ev->model.empty()) return "glmserve";
  std::lock_guard<std::mutex> lock(model_mutex_);
  model_name_ = ev->model;
  return model_name_;
}

void Gateway::install_static_routes() {
  auto serve_asset = [](const http::Request& req, http::Response& res) -> RouteStatus {
    const Asset* a = find_asset(req.path == "/index.html" ? "/" : req.path);
    if (!a) return not_found("no file " + req.path);
    res.set_header("ETag", std::string(a->etag));
    // index.html is revalidated (cheap 304); the files it names carry ?v=<hash> and never
    // change under one URL.
    res.set_header("Cache-Control",
                   a->path == "/" ? "no-cache" : "public, max-age=31536000, immutable");
    if (req.header("If-None-Match") == a->etag) {
      res.status = 304;
      return {};
    }
    res.set_header("Vary", "Accept-Encoding");
    // Pre-compressed only: the gateway compresses nothing on the fly (that would buffer SSE).
    if (!a->gzip.empty() && req.header("Accept-Encoding").find("gzip") != std::string::npos) {
      res.set_header("Content-Encoding", "gzip");
      res.set_content(a->gzip.data(), a->gzip.size(), std::string(a->content_type));
    } else {
      res.set_content(a->body.data(), a->body.size(), std::string(a->content_type));
    }
    return {};
  };
  routes_->get("/", serve_asset);
  routes_->get("/index.html", serve_asset);
  routes_->get(R"(/([A-Za-z0-9_.-]+\.(js|css|svg|png|json)))", serve_asset);

  routes_->get("/health", [this](const http::Request&, http::Response& res) -> RouteStatus {
    if (router_.several()) {
      several_models_health(res);
      return {};
    }
    protocol::Request req;
    req.type = protocol::RequestType::kHealth;
    req.id = protocol::make_request_id();
    auto ev = engine_.query(req, 2000);
    json j = {{"gateway", "ok"}, {"inflight", inflight()}};
    std::string status = "down";  // the gateway's own word: no engine answered
    bool ready = false;
    if (ev.ok() && ev->type == protocol::EventType::kHealth) {
      status = generation::health_name(ev->health);
      ready = ev->health == generation::Health::kReady;
      j["model"] = options_.model_name.empty() ? ev->model : options_.model_name;
      j["description"] = ev->model;  // the file's general.name (the page's demo badge reads it)
      j["n_ctx"] = ev->n_ctx;
      if (!ev->device.empty()) j["device"] = ev->device;
      if (ev->load_total_bytes > 0) {
        j["load"] = {
            {"done_bytes", ev->load_done_bytes},
            {"total_bytes", ev->load_total_bytes},
            {"percent", protocol::load_percent(ev->load_done_bytes, ev->load_total_bytes)}};
      }
      if (!ev->model.empty()) {
        std::lock_guard<std::mutex> lock(model_mutex_);
        model_name_ = ev->model;
      }
      // Adapters served by name: the page's picker lists the model and each adapter (its
      // choice goes out as the request's model, docs/adapters.md).
      if (!ev->adapters.empty()) {
        json models = json::array({{{"name", j["model"]}, {"state", "loaded"}}});
        for (const std::string& a : ev->adapters) {
          models.push_back({{"name", a}, {"state", "loaded"}, {"parent", j["model"]}});
        }
        j["models"] = std::move(models);
      }
    } else {
      j["error"] = ev.ok() ? "unexpected reply to a health request" : ev.status().message();
    }
    if (draining_) {  // stopping: load balancers send new work elsewhere while streams finish
      status = generation::health_name(generation::Health::kDraining);
      ready = false;
    }
    j["status"] = status;
    res.status = ready ? 200 : 503;
    res.set_header("Cache-Control", "no-store");
    res.set_content(dump_json(j), "application/json");
    return {};
  });

  routes_->get(
      "/metrics", [this](const http::Request& http_req, http::Response& res) -> RouteStatus {
        if (!authorized(http_req, options_.metrics_key)) {  // Prometheus: authorization.credentials
          res.set_header("WWW-Authenticate", "Bearer");
          return Status(ErrorCode::kUnauthorized,
                        "/metrics needs 'Authorization: Bearer <key>' with the key of "
                        "--metrics-key-file (or GLMSERVE_METRICS_KEY)");
        }
        // The engine's own counters (what it admitted and prefilled, its KV cache) beside the
        // gateway's; absent when the engine does not answer within a second.
        protocol::Request req;
        req.type = protocol::RequestType::kStats;
        req.id = protocol::make_request_id();
        auto ev = engine_.query(req, 1000);
        const bool engine_up = ev.ok() && ev->type == protocol::EventType::kStats;
        std::string info;
        if (engine_up) {
          protocol::Request hreq;
          hreq.type = protocol::RequestType::kHealth;
          hreq.id = protocol::make_request_id();
          auto h = engine_.query(hreq, 1000);
          const bool health = h.ok() && h->type == protocol::EventType::kHealth;
          if (health && !h->device.empty()) info = engine_info_metric(*h);
          // vLLM's names for routers that score workers by them, labelled with the name clients
          // send as "model" (as /health's "model").
          const std::string name = !options_.model_name.empty()  ? options_.model_name
                                   : health && !h->model.empty() ? h->model
                                                                 : std::string("glmserve");
          info += vllm_metrics(ev->stats, name);
        }
        res.set_header("Cache-Control", "no-store");
        res.set_content(metrics_.render() + http_metrics(server_->stats()) +
                            engine_metrics(engine_up ? &ev->stats : nullptr) + info,
                        "text/plain; version=0.0.4; charset=utf-8");
        return {};
      });
}

void Gateway::add_inflight(const std::shared_ptr<EngineStream>& stream,
                           const std::string& conversation) {
  std::lock_guard<std::mutex> lock(inflight_mutex_);
  inflight_[stream->id()] = Inflight{stream, conversation};
}

int Gateway::cancel_conversation(const std::string& conversation) {
  std::vector<std::shared_ptr<EngineStream>> streams;
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    for (const auto& [id, entry] : inflight_) {
      if (entry.conversation != conversation) continue;
      if (auto s = entry.stream.lock()) streams.push_back(std::move(s));
    }
  }
  for (const auto& s : streams) s->cancel();
  return static_cast<int>(streams.size());
}

void Gateway::remove_inflight(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(inflight_mutex_);
  inflight_.erase(request_id);
}

std::shared_ptr<EngineStream> Gateway::find_inflight(const std::string& request_id) const {
  std::lock_guard<std::mutex> lock(inflight_mutex_);
  auto it = inflight_.find(request_id);
  return it == inflight_.end() ? nullptr : it->second.stream.lock();
}

int Gateway::inflight() const {
  std::lock_guard<std::mutex> lock(inflight_mutex_);
  return static_cast<int>(inflight_.size());
}

Status Gateway::draining_status() {
  return Status(ErrorCode::kUnavailable,
                "the gateway is stopping (finishing the answers in progress); retry in a moment");
}

StatusOr<std::shared_ptr<EngineStream>> Gateway::send_generation(const protocol::Request& request,
                                                                 const std::string& model) {
  if (draining_) return draining_status();
  auto route = router_.route_for(model);  // several models: waits while it loads
  if (!route.ok()) return route.status();
  if (draining_) return draining_status();
  // A seed of our own when the client gave none: an answer resumed after an engine crash then
  // continues with the draws the uninterrupted one would have made (docs/gateway.md).
  protocol::Request seeded = request;
  if (seeded.params.seed == 0) seeded.params.seed = random_seed();
  if (seeded.adapter.empty() && seeded.model.empty()) {
    if (router_.several()) {
      seeded.adapter = route->adapter;
    } else {
      name_model(model, &seeded);
    }
  }
  auto stream = route->engine.start(seeded);
  if (!stream.ok()) return stream.status();
  return std::shared_ptr<EngineStream>(std::move(stream).value());
}

StatusOr<Gateway::Started> Gateway::await_started(std::shared_ptr<EngineStream> stream,
                                                  const std::string& conversation) {
  Started s;
  s.stream = std::move(stream);
  auto ev = s.stream->next(10000);
  if (!ev.ok()) return ev.status();
  if (ev->has_value()) {
    if ((*ev)->type == protocol::EventType::kError) {
      const ErrorCode code = (*ev)->code == ErrorCode::kOk ? ErrorCode::kInternal : (*ev)->code;
      if ((*ev)->retry_after_ms > 0) engine_retry_ms_ = std::min((*ev)->retry_after_ms, 600000);
      return Status(code, (*ev)->message);
    }
    s.first = std::move(**ev);
  }
  add_inflight(s.stream, conversation);
  metrics_.inflight_add(1);
  const std::string id = s.stream->id();
  s.ticket = std::shared_ptr<void>(nullptr, [this, id](void*) {
    remove_inflight(id);
    metrics_.inflight_add(-1);
  });
  return s;
}

StatusOr<Gateway::Started> Gateway::start_generation(const protocol::Request& request,
                                                     const std::string& model) {
  auto stream = send_generation(request, model);
  if (!stream.ok()) return stream.status();
  return await_started(std::move(stream).value());
}

StatusOr<int> Gateway::bind() { return server_->bind(); }

bool Gateway::serve() { return server_->run(); }

bool Gateway::drain(int timeout_ms) {
  draining_ = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const int n = inflight();
  if (n > 0) GLM_LOG_INFO("web: draining: %d answers in progress (at most %d ms)", n, timeout_ms);
  live_answers_.wait_idle(timeout_ms);
  // The /v1 streams end with their connections, the page's followers once they wrote the end:
  // polled (they have no registry to wait on).
  auto busy = [&] { return inflight() > 0 || followers_ > 0; };
  while (busy() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (busy()) {
    GLM_LOG_WARN("web: drain bound reached with %d answers in progress", inflight());
    return false;
  }
  // What the last handlers wrote leaves through the event loop: a moment for it to go out
  // before stop() closes the connections.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return true;
}

void Gateway::stop() {
  draining_ = true;
  // The page's answers still running end now, stored as interrupted (the page offers to
  // continue them); their threads store within the relay's drain bound. None starts after.
  live_answers_.close();
  for (const auto& live : live_answers_.all()) {
    live->mark_shutdown();
    if (auto stream = find_inflight(live->request_id())) stream->cancel();
  }
  if (server_) server_->stop();
  live_answers_.join_all();
}

}  // namespace glm::gateway
