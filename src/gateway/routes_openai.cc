// The OpenAI-compatible routes: POST /v1/chat/completions (and /v1/embeddings, refused with a
// pointer to an embedding server). /v1/models is routes_models.cc.
#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "api/openai.h"
#include "api/tool_calls.h"
#include "gateway/gateway.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

}  // namespace

void Gateway::record_generation(const char* route, const RelayResult& r, Clock::time_point t0) {
  Metrics::Generation g;
  g.route = route;
  g.outcome = r.outcome;
  g.prompt_tokens = r.usage.prompt_tokens;
  g.cached_tokens = r.usage.cached_tokens;
  g.completion_tokens = r.usage.completion_tokens;
  if (r.outcome != api::Outcome::kError) {
    g.engine_ttft_ms = r.timings.ttft_ms;
    g.engine_tpot_ms = r.timings.tpot_ms;
    g.queue_ms = r.timings.queue_ms;
  }
  if (r.first_token_at != Clock::time_point{}) {
    g.gateway_ttft_ms = std::chrono::duration<double, std::milli>(r.first_token_at - t0).count();
  }
  g.e2e_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  g.resumes = r.resumes;
  metrics_.record_generation(g);
  if (r.outcome == api::Outcome::kError) metrics_.record_error(error_code_name(r.error.code()));
}

RelayResult Gateway::relay_started(Started& state,
                                   const std::function<bool(const protocol::Event&)>& emit,
                                   const std::function<bool()>& heartbeat, const char* route,
                                   Clock::time_point t0) {
  RelayResult r;
  bool first_ok = true;
  if (state.first) first_ok = emit(*state.first);
  if (first_ok) {
    const EngineClient engine(state.stream->socket_path());  // a resume goes where it went
    r = relay_generation(*state.stream, emit, heartbeat, options_.relay, &engine);
  } else {
    state.stream->cancel();
    r = relay_generation(
        *state.stream, [](const protocol::Event&) { return false; }, [] { return false; },
        options_.relay);
    r.outcome = api::Outcome::kDisconnected;
  }
  record_generation(route, r, t0);
  return r;
}

RelayResult Gateway::relay_unstreamed(Started& state, const http::Request& req, const char* route,
                                      Clock::time_point t0) {
  auto still_there = [&req] { return !req.client_gone(); };
  return relay_started(
      state, [&](const protocol::Event&) { return still_there(); }, still_there, route, t0);
}

void Gateway::install_openai_routes() {
  // No embedding model: a clear answer in OpenAI's shape instead of "no route".
  routes_->post("/v1/embeddings", [](const http::Request&, http::Response&) -> RouteStatus {
    return unsupported(
        "this server serves a chat model and computes no embeddings "
        "(use an embedding server for /v1/embeddings)");
  });

  routes_->post(
      "/v1/chat/completions", [this](const http::Request& req, http::Response& res) -> RouteStatus {
        const auto t0 = Clock::now();
        auto parsed = api::parse_chat_completion(req.body);
        if (!parsed.ok()) return parsed.status();
        auto p = std::make_shared<api::ChatCompletionRequest>(std::move(parsed).value());
        p->request.id = "chatcmpl-" + protocol::make_request_id();
        if (p->model.empty()) p->model = model_name();
        auto started = start_generation(p->request, p->model);
        if (!started.ok()) return started.status();
        auto state = std::make_shared<Started>(std::move(started).value());
        const int64_t created = static_cast<int64_t>(std::time(nullptr));

        // Runs the relay on the worker thread; `emit` sends one piece (false = client gone).
        auto run = [this, state, t0](const std::function<bool(const protocol::Event&)>& emit,
                                     const std::function<bool()>& heartbeat) {
          return relay_started(*state, emit, heartbeat, "openai", t0);
        };

        if (p->stream) {
          res.set_header("Cache-Control", "no-store");
          res.set_header("X-Accel-Buffering", "no");
          res.set_stream("text/event-stream", [p, created, run](http::StreamSink& sink) {
            const std::string& id = p->request.id;
            SseWriter out(sink);
            const int n = p->request.n;
            for (int i = 0; i < n; ++i) {
              out.event(
                  api::completion_chunk_json(id, created, p->model, nullptr, true, "", nullptr, i));
            }
            // With tools, the text goes through the tool-call reader (tool_calls.h): a call is
            // sent whole at the end, or not at all when max_tokens cut it.
            api::ToolAnswerStream tools(p->tool_names);
            api::ToolCallIndex call_index;  // GLM-4.5 may make several calls: tool_calls[i]
            auto write_deltas = [&](const std::vector<api::ToolDelta>& deltas) {
              for (const api::ToolDelta& d : deltas) {
                out.event(api::tool_delta_chunk_json(id, created, p->model, d, call_index.of(d)));
              }
              return out.ok();
            };
            auto emit = [&](const protocol::Event& e) {
              if (e.type == protocol::EventType::kChoiceDone) {  // n > 1: that choice's end
                const api::Outcome o = api::outcome_of(e.finish_reason);
                if (!api::is_complete(o)) return out.ok();
                return out.event(api::completion_chunk_json(id, created, p->model, nullptr, false,
                                                            api::openai_finish_reason(o), nullptr,
                                                            e.index));
              }
              if (e.type != protocol::EventType::kToken) return out.ok();
              if (!e.reasoning.empty() && !out.event(api::reasoning_chunk_json(
                                              id, created, p->model, e.reasoning, e.index))) {
                return false;
              }
              if (e.text.empty() && e.logprobs.empty()) return out.ok();
              if (!p->tool_names.empty()) return write_deltas(tools.feed(e.tool));
              const bool logprobs = p->request.params.top_logprobs >= 0;
              return out.event(api::completion_chunk_json(id, created, p->model, &e.text, false, "",
                                                          logprobs ? &e.logprobs : nullptr,
                                                          e.index));
            };
            auto heartbeat = [&] { return out.heartbeat(); };
            RelayResult r = run(emit, heartbeat);
            if (r.outcome == api::Outcome::kDisconnected) return;
            if (!api::is_complete(r.outcome)) {
              // An error or a cut answer ends with an error event and no [DONE]: the SDKs
              // raise it, so a drained stream never passes for a complete one.
              sse_write(sink, api::openai_error_json(cut_or_error(r)));
            } else {
              write_deltas(tools.finish(r.outcome, r.tool_end));
              const std::string finish = tools.is_call() && r.outcome == api::Outcome::kStop
                                             ? "tool_calls"
                                             : api::openai_finish_reason(r.outcome);
              // With several choices each one's end went out with its choice_done.
              if (n == 1) {
                sse_write(sink, api::completion_chunk_json(id, created, p->model, nullptr, false,
                                                           finish));
              }
              if (p->include_usage)
                sse_write(sink, api::usage_chunk_json(id, created, p->model, r.usage));
              sse_write(sink, "[DONE]");
            }
            sink.done();
          });
          return {};
        }

        // Not streaming: the answer is one JSON object, sent when it is known, so its status is
        // the outcome's (an engine that fails mid-answer gives 503, not 200 with an error body).
        // Nothing is written meanwhile: the HTTP layer notices a client that leaves by its
        // connection's end, and the generation is cancelled.
        RelayResult r = relay_unstreamed(*state, req, "openai", t0);
        res.set_header("Cache-Control", "no-store");
        if (RouteStatus st = unfinished(r); !st.ok()) return st;
        const bool logprobs = p->request.params.top_logprobs >= 0;
        if (p->request.n > 1) {  // no tools (refused with n > 1)
          std::vector<api::ChatChoiceOut> choices;
          r.choices.resize(p->request.n);
          for (const ChoiceResult& c : r.choices) {
            choices.push_back({c.text, api::openai_finish_reason(c.outcome), nullptr,
                               logprobs ? &c.logprobs : nullptr, c.reasoning});
          }
          res.set_content(api::completion_json(p->request.id, created, p->model, choices, r.usage),
                          "application/json");
        } else if (p->tool_names.empty()) {
          res.set_content(
              api::completion_json(p->request.id, created, p->model, r.text,
                                   api::openai_finish_reason(r.outcome), r.usage, nullptr,
                                   logprobs ? &r.logprobs : nullptr, r.reasoning),
              "application/json");
        } else {
          // The same reader as the stream's, so both give the same call.
          const api::ToolAnswer a =
              api::read_whole_answer(p->tool_names, r.tool, r.tool_end, r.outcome);
          const std::vector<api::ToolCallOut> calls = api::tool_calls_out(p->request.id, a);
          res.set_content(api::completion_json(p->request.id, created, p->model, a.content,
                                               !calls.empty() && r.outcome == api::Outcome::kStop
                                                   ? "tool_calls"
                                                   : api::openai_finish_reason(r.outcome),
                                               r.usage, &calls, nullptr, r.reasoning),
                          "application/json");
        }
        return {};
      });
}

}  // namespace glm::gateway
