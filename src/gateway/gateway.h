// Gateway: `glmserve web`, the HTTP face of the engine (docs/gateway.md).
//
//   GET  /                       the chat page (embedded assets: works offline)
//   GET  /health                 engine loading / ready / draining / down (200 only when ready)
//   GET  /metrics                Prometheus text: latency histograms, token and error counters
//   GET  /v1/models              OpenAI: the model(s) served (several: with their state)
//   POST /v1/chat/completions    OpenAI: streaming (SSE) and not
//   /api/conversations...        the page's conversations (SQLite) and its streaming chat
//
// Each route returns its error as a Status instead of writing it; one wrapper (route.h) writes
// every error answer, in the format of the route's API family.
//
// Every generation opens its own connection to the engine socket (engine_client.h), so an
// engine restart needs no reconnection logic; the requests it interrupted are resumed on the
// restarted engine where they were (relay.h), within a bound. Every request goes to the engine
// with a seed (the client's or a random one), so a resumed answer samples what the
// uninterrupted one would have. A /v1 client that disconnects cancels its engine request; the
// page's answers are the gateway's own (live_answer.h): a page that leaves re-attaches, and an
// answer nobody follows finishes and is stored (within `detached_answer_ms`).
//
// HTTP is our evented layer (src/http): connections cost no thread while idle or sending their
// request; a complete request runs on a pool of `threads` workers, and a streaming answer holds
// its worker for its duration. When the pool and its queue are full, requests get 503 with
// Retry-After at once.
//
// Thread-safety: create() and bind() on one thread; serve() blocks on it; drain() and stop() from
// any thread (signal handlers must not call them directly).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "gateway/engine_client.h"
#include "gateway/live_answer.h"
#include "gateway/metrics.h"
#include "gateway/model_router.h"
#include "gateway/relay.h"
#include "gateway/route.h"
#include "gateway/store.h"
#include "http/server.h"

namespace glm::gateway {

struct GatewayOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0 = any free port (tests)
  int listen_fd = -1;         // a listening socket to serve on instead (from glmserve serve)
  std::string engine_socket;  // required (with models_control: the default model's engine)
  // Several models (glmserve serve --model A --model B): serve's control socket
  // (model_router.h); empty = the one engine at engine_socket serves every request.
  std::string models_control;
  // Required: a SQLite file (":memory:" for tests) or a postgres:// URL without its password
  // (store/store.h), which comes in db_password (or libpq's PGPASSWORD / PGPASSFILE).
  std::string db_path;
  std::string db_password;
  // The one model's name (/v1/models, answers); empty = the engine's (its health reply).
  std::string model_name;
  std::string api_key;      // empty = no auth; else "Authorization: Bearer <key>"
  std::string metrics_key;  // empty = /metrics open; else it needs "Authorization: Bearer <key>"
  std::string cors_origin;  // empty = CORS off; "*" or one origin for /v1 and /health
  size_t max_body_bytes = 1 << 20;
  int threads = 256;            // requests handled at once (each stream holds one)
  int queue = 256;              // complete requests waiting for a thread; beyond: 503
  int read_timeout_s = 30;      // a client must send its whole request (head and body) within this
  int idle_timeout_s = 30;      // a keep-alive connection without a request is closed after this
  int write_timeout_s = 30;     // a client that stops reading is dropped after this
  int max_connections = 16384;  // open connections; beyond: 503 and close
  // From one client address; beyond: 503 and close. 0 = 4096, except on a loopback --host,
  // where every client is 127.0.0.1 and only max_connections applies.
  int max_connections_per_ip = 0;
  RelayOptions relay;
  // A graceful stop (SIGTERM) waits this long for the answers in progress to finish.
  int drain_ms = 30000;
  // A page answer that no client has followed for this long is stopped (and stored).
  int detached_answer_ms = 10 * 60 * 1000;
};

class ChatSession;

class Gateway {
 public:
  static StatusOr<std::unique_ptr<Gateway>> create(const GatewayOptions& options);
  ~Gateway();

  // Binds the listening socket; returns the port (useful with port 0).
  StatusOr<int> bind();
  // Serves until stop(). Returns false if the server failed.
  bool serve();
  // Graceful stop, first half: refuses new generations (503) and waits up to `timeout_ms` for
  // those in progress to end; true if they all did. Clients keep being served meanwhile.
  bool drain(int timeout_ms);
  bool draining() const { return draining_; }
  // Closes every connection and ends the page's answers still running (stored interrupted).
  void stop();
  bool running() const { return server_->running(); }
  http::ServerStats http_stats() const { return server_->stats(); }

  const GatewayOptions& options() const { return options_; }
  Metrics& metrics() { return metrics_; }
  Store& store() { return *store_; }
  // Requests in flight (the page's stop button and tests use this).
  int inflight() const;

 private:
  explicit Gateway(const GatewayOptions& options);
  void install_middleware();
  void install_static_routes();
  void install_openai_routes();
  void install_chat_routes();
  void install_api_routes();  // /v1/completions, /v1/messages (routes_api.cc)
  // /tokenize, /detokenize, /apply-template, /v1/messages/count_tokens (routes_util.cc)
  void install_util_routes();
  void install_responses_routes();  // /v1/responses (routes_responses.cc)
  // A one-line engine request (tokenize, detokenize, prompt) and its tokens reply; the
  // engine's error event becomes the status.
  StatusOr<protocol::Event> query_tokens(const protocol::Request& request,
                                         const std::string& model = "");

  // The streams POST /api/stop can cancel, by request id, with the conversation they answer
  // (deleting a conversation cancels its generation).
  void add_inflight(const std::shared_ptr<EngineStream>& stream, const std::string& conversation);
  void remove_inflight(const std::string& request_id);
  std::shared_ptr<EngineStream> find_inflight(const std::string& request_id) const;
  // Cancels the generations answering `conversation`; returns how many.
  int cancel_conversation(const std::string& conversation);

  // Sends `request` and waits for its first event, so that an immediate refusal (busy,
  // unavailable, bad request) becomes an HTTP error status instead of a 200 stream. The event
  // is returned (nullopt if none within 10 s: the stream continues anyway).
  // The stream is registered as in flight (POST /api/stop can cancel it) until `ticket`, and
  // so the last copy of Started, is destroyed.
  struct Started {
    std::shared_ptr<EngineStream> stream;
    std::optional<protocol::Event> first;
    std::shared_ptr<void> ticket;
  };
  // `model` picks the engine (model_router.h; "" = the default, and one engine takes any name).
  StatusOr<Started> start_generation(const protocol::Request& request,
                                     const std::string& model = "");
  // The two halves of start_generation, for callers with work to overlap with the engine.
  StatusOr<std::shared_ptr<EngineStream>> send_generation(const protocol::Request& request,
                                                          const std::string& model = "");
  StatusOr<Started> await_started(std::shared_ptr<EngineStream> stream,
                                  const std::string& conversation = "");

  // Relays a started generation to `emit` / `heartbeat` (its first event included), cancels it
  // if the client is gone before, and records it under `route`; `t0` is when the HTTP request
  // arrived.
  RelayResult relay_started(Started& state, const std::function<bool(const protocol::Event&)>& emit,
                            const std::function<bool()>& heartbeat, const char* route,
                            std::chrono::steady_clock::time_point t0);

  // relay_started for a non-streamed answer: nothing is written meanwhile; the request's
  // connection ending is the client leaving.
  RelayResult relay_unstreamed(Started& state, const http::Request& req, const char* route,
                               std::chrono::steady_clock::time_point t0);

  // The page's live answers (routes_chat.cc): a follower's SSE stream from event `from`, until
  // the answer ends or the client leaves; the generation thread of one answer; a continued
  // answer's request (its text so far tokenized into resume).
  void follow_live(LiveAnswer& live, size_t from, http::StreamSink& sink);
  void generate_live(LiveAnswer& live, ChatSession& session, Started& started,
                     std::chrono::steady_clock::time_point t0);
  StatusOr<protocol::Request> continue_request(protocol::Request request, const std::string& prefix,
                                               const std::string& model);
  static Status draining_status();

  // Records one finished generation of `route` ("openai", "chat") in /metrics; `t0` is when
  // its HTTP request arrived.
  void record_generation(const char* route, const RelayResult& r,
                         std::chrono::steady_clock::time_point t0);

  // True when `expected` is empty or the request carries it (Bearer, or Anthropic's x-api-key).
  static bool authorized(const http::Request& req, const std::string& expected);
  // A non-streamed answer that did not complete (the client left, the engine failed, or the
  // answer was cut): its error, uncounted (record_generation counted it); OK when complete.
  static RouteStatus unfinished(const RelayResult& r);
  // The model a request without one gets: the one engine's (from its health), or serve's
  // default (its first --model).
  std::string model_name();
  // One engine: the adapters it serves by name (its health answer; docs/adapters.md).
  std::vector<std::string> served_adapters();
  // One engine: what a request's `model` asks of it, without asking it anything: nothing for
  // the served model's own name; adapter NAME for "BASE:NAME" with that name as BASE (the
  // engine refuses an unknown NAME with not_found); any other name as GenerateRequest::model,
  // which the engine answers with the adapter it serves under that name, else the bare model
  // (one engine answers whatever model a client names).
  void name_model(const std::string& model, protocol::Request* r);
  // GET /v1/models and /v1/models/{id}, /health with several models (routes_models.cc).
  void install_models_routes();
  void several_models_health(http::Response& res);

  GatewayOptions options_;
  EngineClient engine_;  // the one engine, or the default model's (/metrics)
  ModelRouter router_;
  std::unique_ptr<Store> store_;
  Metrics metrics_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<Routes> routes_;  // registers on server_; writes every error answer
  mutable std::mutex inflight_mutex_;
  struct Inflight {
    std::weak_ptr<EngineStream> stream;
    std::string conversation;  // the page's conversation id, or empty
  };
  std::map<std::string, Inflight> inflight_;  // by request id
  std::mutex model_mutex_;
  std::string model_name_;  // cached from the engine's health reply
  // The engine's last retry hint (its busy / unavailable error events' retry_after_ms): what
  // Retry-After says for a busy engine.
  std::atomic<int> engine_retry_ms_{1000};
  std::atomic<bool> draining_{false};
  std::atomic<int> followers_{0};  // follow_live() calls writing to a page now
  // Last: destroyed first, joining the answers' threads while what they use still exists.
  LiveAnswers live_answers_;
};

// Writes one SSE event ("data: <payload>\n\n"); false if the client is gone.
bool sse_write(http::StreamSink& sink, const std::string& payload);

// One SSE response being written: events, and at each heartbeat a keep-alive comment when
// nothing else went out since the last one (so an idle stream still notices a client that
// left). Every call returns false once the client is gone. One per response, on its thread.
class SseWriter {
 public:
  explicit SseWriter(http::StreamSink& sink) : sink_(sink) {}
  bool event(const std::string& payload) {
    if (ok_) ok_ = sse_write(sink_, payload);
    wrote_ = true;
    return ok_;
  }
  // A whole frame of another event format ("event: NAME\ndata: ...\n\n", Anthropic's).
  bool frame(const std::string& text) {
    if (ok_ && !text.empty()) ok_ = sink_.write(text);
    wrote_ = true;
    return ok_;
  }
  bool heartbeat() {
    if (ok_ && !wrote_) ok_ = sink_.write(": keep-alive\n\n");
    wrote_ = false;
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  http::StreamSink& sink_;
  bool ok_ = true;
  bool wrote_ = false;
};

}  // namespace glm::gateway
