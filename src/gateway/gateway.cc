#include "gateway/gateway.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/log.h"
#include "gateway/assets.h"
#include "gateway/openai.h"

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

}  // namespace

bool sse_write(httplib::DataSink& sink, const std::string& payload) {
  std::string frame;
  frame.reserve(payload.size() + 8);
  frame += "data: ";
  frame += payload;
  frame += "\n\n";
  return sink.write(frame.data(), frame.size());
}

Gateway::Gateway(const GatewayOptions& options)
    : options_(options), engine_(options.engine_socket) {}

Gateway::~Gateway() { stop(); }

StatusOr<std::unique_ptr<Gateway>> Gateway::create(const GatewayOptions& options) {
  if (options.engine_socket.empty()) {
    return invalid_argument("missing --engine SOCKET (the path given to glmserve engine --socket)");
  }
  if (options.db_path.empty()) return invalid_argument("missing --db PATH");
  std::unique_ptr<Gateway> g(new Gateway(options));
  auto store = Store::open(options.db_path);
  if (!store.ok()) return store.status();
  g->store_ = std::move(store).value();
  g->install_middleware();
  g->install_static_routes();
  g->install_openai_routes();
  g->install_chat_routes();
  return g;
}

void Gateway::install_middleware() {
  const int threads = options_.threads;
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_.set_tcp_nodelay(true);
  server_.set_payload_max_length(options_.max_body_bytes);
  server_.set_read_timeout(options_.read_timeout_s, 0);
  server_.set_write_timeout(options_.write_timeout_s, 0);
  server_.set_keep_alive_max_count(1000);
  server_.set_keep_alive_timeout(30);
  server_.set_default_headers({
      {"Content-Security-Policy", kCsp},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      // No Cross-Origin-Opener-Policy: it makes Chromium swap to a fresh renderer process on
      // every navigation to the page, which costs first paint ~1 s on a loaded 2-core machine;
      // frame-ancestors already keeps the page out of other sites' frames.
      {"Cross-Origin-Resource-Policy", "same-origin"},
  });

  server_.set_pre_routing_handler([this](const httplib::Request& creq, httplib::Response& res) {
    metrics_.http_request();
    // The gateway compresses nothing on the fly: httplib would buffer SSE streams inside its
    // compressor, and the page's files come pre-compressed. Remember whether gzip is welcome.
    auto& req = const_cast<httplib::Request&>(creq);  // httplib owns a mutable Request
    const std::string ae = req.get_header_value("Accept-Encoding");
    req.headers.erase("Accept-Encoding");
    req.headers.erase("X-Glmserve-Gzip");
    if (ae.find("gzip") != std::string::npos) req.headers.emplace("X-Glmserve-Gzip", "1");

    // DNS rebinding: a page from another site must not reach a loopback-bound gateway through
    // a hostname that resolves to 127.0.0.1.
    if (is_loopback_host(options_.host) && req.has_header("Host") &&
        !is_loopback_host(host_name(req.get_header_value("Host")))) {
      set_json_error(res, Status(ErrorCode::kInvalidArgument,
                                 "this gateway is bound to " + options_.host +
                                     " and answers only to that host name; use --host to "
                                     "serve other names"));
      res.status = 421;
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool api = starts_with(req.path, "/v1/") || starts_with(req.path, "/api/");
    const std::string origin = req.get_header_value("Origin");
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
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (api && !authorized(req)) {
      set_json_error(res, Status(ErrorCode::kUnauthorized,
                                 "missing or wrong API key: send the header "
                                 "'Authorization: Bearer <key>' with the --api-key the "
                                 "gateway was started with"));
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    // The APIs accept JSON bodies only: a cross-site form or text/plain POST (which browsers
    // send without a CORS preflight) must not spend this machine's CPU on a generation.
    if (api && (req.method == "POST" || req.method == "PATCH" || req.method == "PUT")) {
      if (!is_json_media_type(req.get_header_value("Content-Type"))) {
        set_json_error(res, invalid_argument("send the body as Content-Type: application/json"));
        res.status = 415;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  server_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      set_json_error(res, not_found("no route " + req.method + " " + req.path +
                                    " (see docs/gateway.md for the API)"));
    } else if (res.status == 413) {
      set_json_error(res, Status(ErrorCode::kInvalidArgument,
                                 "request body over " + std::to_string(options_.max_body_bytes) +
                                     " bytes (raise --max-body)"));
      res.status = 413;
    }
  });
  server_.set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, const std::exception_ptr& ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        GLM_LOG_ERROR("gateway: request failed: %s", what.c_str());
        set_json_error(res, Status(ErrorCode::kInternal, "internal error: " + what));
      });
}

bool Gateway::authorized(const httplib::Request& req) const {
  if (options_.api_key.empty()) return true;
  // "Authorization: Bearer KEY" (the scheme is case-insensitive, RFC 9110), or Anthropic's
  // "x-api-key: KEY".
  const std::string& expected = options_.api_key;
  std::string got = req.get_header_value("x-api-key");
  if (got.empty()) {
    const std::string auth = req.get_header_value("Authorization");
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

void Gateway::set_json_error(httplib::Response& res, const Status& status) {
  res.status = error_code_http_status(status.code());
  // Busy and unavailable are temporary: say when to come back, in the header the OpenAI and
  // Anthropic SDKs read before retrying (seconds) and in their millisecond variant.
  if (status.code() == ErrorCode::kQueueFull || status.code() == ErrorCode::kUnavailable) {
    const int ms = status.code() == ErrorCode::kQueueFull ? 1000 : 2000;
    res.set_header("Retry-After", std::to_string((ms + 999) / 1000));
    res.set_header("retry-after-ms", std::to_string(ms));
  }
  res.set_content(openai_error_json(status), "application/json");
  metrics_.record_error(error_code_name(status.code()));
}

std::string Gateway::model_name() {
  {
    std::lock_guard<std::mutex> lock(model_mutex_);
    if (!model_name_.empty()) return model_name_;
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
  auto serve_asset = [this](const httplib::Request& req, httplib::Response& res) {
    const Asset* a = find_asset(req.path == "/index.html" ? "/" : req.path);
    if (!a) {
      set_json_error(res, not_found("no file " + req.path));
      return;
    }
    res.set_header("ETag", std::string(a->etag));
    // index.html is revalidated (cheap 304); the files it names carry ?v=<hash> and never
    // change under one URL.
    res.set_header("Cache-Control",
                   a->path == "/" ? "no-cache" : "public, max-age=31536000, immutable");
    if (req.get_header_value("If-None-Match") == a->etag) {
      res.status = 304;
      return;
    }
    res.set_header("Vary", "Accept-Encoding");
    if (!a->gzip.empty() && req.has_header("X-Glmserve-Gzip")) {
      res.set_header("Content-Encoding", "gzip");
      res.set_content(a->gzip.data(), a->gzip.size(), std::string(a->content_type));
    } else {
      res.set_content(a->body.data(), a->body.size(), std::string(a->content_type));
    }
  };
  server_.Get("/", serve_asset);
  server_.Get("/index.html", serve_asset);
  server_.Get(R"(/([A-Za-z0-9_.-]+\.(js|css|svg|png|json)))", serve_asset);

  server_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
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
      j["model"] = ev->model;
      j["n_ctx"] = ev->n_ctx;
      if (!ev->model.empty()) {
        std::lock_guard<std::mutex> lock(model_mutex_);
        model_name_ = ev->model;
      }
    } else {
      j["error"] = ev.ok() ? "unexpected reply to a health request" : ev.status().message();
    }
    j["status"] = status;
    res.status = ready ? 200 : 503;
    res.set_header("Cache-Control", "no-store");
    res.set_content(dump_json(j), "application/json");
  });

  server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
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

StatusOr<std::shared_ptr<EngineStream>> Gateway::send_generation(const protocol::Request& request) {
  auto stream = engine_.start(request);
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

StatusOr<Gateway::Started> Gateway::start_generation(const protocol::Request& request) {
  auto stream = send_generation(request);
  if (!stream.ok()) return stream.status();
  return await_started(std::move(stream).value());
}

StatusOr<int> Gateway::bind() {
  int port = options_.port;
  if (port == 0) {
    port = server_.bind_to_any_port(options_.host);
    if (port < 0) port = 0;
  } else if (!server_.bind_to_port(options_.host, port)) {
    port = 0;
  }
  if (port == 0) {
    return Status(ErrorCode::kUnavailable, "cannot listen on " + options_.host + ":" +
                                               std::to_string(options_.port) +
                                               " (is the port in use? pick another with --port)");
  }
  return port;
}

bool Gateway::serve() { return server_.listen_after_bind(); }

void Gateway::stop() {
  if (server_.is_running()) server_.stop();
}

}  // namespace glm::gateway
