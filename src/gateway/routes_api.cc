// The rest of the API surface: POST /v1/completions (OpenAI's legacy completions: a raw
// continuation) and POST /v1/messages (Anthropic's Messages API), on the same engine requests,
// relay and tool-call reader as /v1/chat/completions (routes_openai.cc).
#include <ctime>

#include "api/anthropic.h"
#include "api/completions.h"
#include "api/openai.h"
#include "api/tool_calls.h"
#include "gateway/gateway.h"

namespace glm::gateway {
namespace {

using Clock = std::chrono::steady_clock;

void set_sse_headers(http::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
}

}  // namespace

void Gateway::install_api_routes() {
  routes_->post(
      "/v1/completions", [this](const http::Request& req, http::Response& res) -> RouteStatus {
        const auto t0 = Clock::now();
        auto parsed = api::parse_completion_request(req.body);
        if (!parsed.ok()) return parsed.status();
        auto p = std::make_shared<api::CompletionRequest>(std::move(parsed).value());
        p->request.id = "cmpl-" + protocol::make_request_id();
        if (p->model.empty()) p->model = model_name();
        auto started = start_generation(p->request, p->model);
        if (!started.ok()) return started.status();
        auto state = std::make_shared<Started>(std::move(started).value());
        const int64_t created = static_cast<int64_t>(std::time(nullptr));
        const std::string echo = p->echo ? p->request.prompt : "";

        if (p->stream) {
          set_sse_headers(res);
          res.set_stream("text/event-stream", [this, p, state, created, t0,
                                               echo](http::StreamSink& sink) {
            const std::string& id = p->request.id;
            SseWriter out(sink);
            const int n = p->request.n;
            if (!echo.empty()) {
              for (int i = 0; i < n; ++i) {
                out.event(api::completion_chunk_text_json(id, created, p->model, echo, "", nullptr,
                                                          0, i));
              }
            }
            const bool logprobs = p->request.params.top_logprobs >= 0;
            std::vector<size_t> offset(n, 0);  // bytes of each answer so far, for text_offset
            auto emit = [&](const protocol::Event& e) {
              if (e.index < 0 || e.index >= n) return out.ok();
              if (e.type == protocol::EventType::kChoiceDone) {  // n > 1: that choice's end
                const api::Outcome o = api::outcome_of(e.finish_reason);
                if (!api::is_complete(o)) return out.ok();
                return out.event(api::completion_chunk_text_json(
                    id, created, p->model, "", api::openai_finish_reason(o), nullptr, 0, e.index));
              }
              if (e.type != protocol::EventType::kToken) return out.ok();
              size_t& at = offset[e.index];
              const bool ok = out.event(
                  api::completion_chunk_text_json(id, created, p->model, e.text, "",
                                                  logprobs ? &e.logprobs : nullptr, at, e.index));
              for (const generation::GeneratedLogprobs& g : e.logprobs) at += g.chosen.bytes.size();
              return ok;
            };
            RelayResult r = relay_started(
                *state, emit, [&] { return out.heartbeat(); }, "completions", t0);
            if (r.outcome == api::Outcome::kDisconnected) return;
            if (!api::is_complete(r.outcome)) {
              sse_write(sink, api::openai_error_json(cut_or_error(r)));
            } else {
              if (n == 1) {  // several choices ended with their choice_done
                sse_write(sink,
                          api::completion_chunk_text_json(id, created, p->model, "",
                                                          api::openai_finish_reason(r.outcome)));
              }
              if (p->include_usage)
                sse_write(sink, api::usage_chunk_json(id, created, p->model, r.usage));
              sse_write(sink, "[DONE]");
            }
            sink.done();
          });
          return {};
        }
        RelayResult r = relay_unstreamed(*state, req, "completions", t0);
        res.set_header("Cache-Control", "no-store");
        if (RouteStatus st = unfinished(r); !st.ok()) return st;
        const bool logprobs = p->request.params.top_logprobs >= 0;
        if (p->request.n > 1) {
          std::vector<api::TextChoiceOut> choices;
          r.choices.resize(p->request.n);
          for (const ChoiceResult& c : r.choices) {
            choices.push_back({echo + c.text, api::openai_finish_reason(c.outcome),
                               logprobs ? &c.logprobs : nullptr});
          }
          res.set_content(
              api::text_completion_json(p->request.id, created, p->model, choices, r.usage),
              "application/json");
          return {};
        }
        res.set_content(api::text_completion_json(p->request.id, created, p->model, echo + r.text,
                                                  api::openai_finish_reason(r.outcome), r.usage,
                                                  logprobs ? &r.logprobs : nullptr),
                        "application/json");
        return {};
      });

  routes_->post(
      "/v1/messages",
      [this](const http::Request& req, http::Response& res) -> RouteStatus {
        const auto t0 = Clock::now();
        auto parsed = api::parse_messages_request(req.body);
        if (!parsed.ok()) return parsed.status();
        auto p = std::make_shared<api::MessagesRequest>(std::move(parsed).value());
        p->request.id = "msg-" + protocol::make_request_id();
        if (p->model.empty()) p->model = model_name();
        auto started = start_generation(p->request, p->model);
        if (!started.ok()) return started.status();
        auto state = std::make_shared<Started>(std::move(started).value());
        const std::string id = api::message_id(p->request.id);

        if (p->stream) {
          set_sse_headers(res);
          res.set_stream("text/event-stream", [this, p, state, t0, id](http::StreamSink& sink) {
            api::MessagesStream events(id, p->model);
            api::ToolAnswerStream tools(p->tool_names);  // a call whole, or none if cut
            // Without tools the text has its leading whitespace dropped, as with tools the
            // engine's reading drops it (a plain answer, as HF's process_response strips it).
            api::ToolCallStream plain({});
            auto pieces = [&](const protocol::Event& e) {
              return p->tool_names.empty() ? plain.feed(e.text) : e.tool;
            };
            SseWriter out(sink);
            bool started_msg = false;
            auto write = [&](const std::string& s) { return out.frame(s); };
            auto emit = [&](const protocol::Event& e) {
              if (e.type == protocol::EventType::kStart && !started_msg) {
                started_msg = true;
                return write(events.start(e.usage));
              }
              if (e.type != protocol::EventType::kToken) return out.ok();
              if (!started_msg) {
                started_msg = true;
                write(events.start(protocol::Usage{}));
              }
              if (!e.reasoning.empty()) write(events.thinking(e.reasoning));
              for (const api::ToolDelta& d : tools.feed(pieces(e))) write(events.delta(d));
              return out.ok();
            };
            auto heartbeat = [&] { return out.heartbeat(); };  // an SSE comment: SDKs skip it
            RelayResult r = relay_started(*state, emit, heartbeat, "messages", t0);
            if (r.outcome == api::Outcome::kDisconnected) return;
            if (!started_msg) write(events.start(r.usage));
            if (!api::is_complete(r.outcome)) {
              write(api::MessagesStream::error(cut_or_error(r)));
            } else {
              const std::vector<api::ToolDelta> end =
                  p->tool_names.empty() ? plain.finish() : r.tool_end;
              for (const api::ToolDelta& d : tools.finish(r.outcome, end)) write(events.delta(d));
              write(events.finish(api::anthropic_stop_reason(r.outcome, tools.is_call()), r.usage));
            }
            sink.done();
          });
          return {};
        }
        RelayResult r = relay_unstreamed(*state, req, "messages", t0);
        res.set_header("Cache-Control", "no-store");
        if (RouteStatus st = unfinished(r); !st.ok()) return st;
        if (p->tool_names.empty()) {  // no tools: as streamed (leading whitespace dropped)
          api::ToolCallStream plain({});
          r.tool = plain.feed(r.text);
          r.tool_end = plain.finish();
        }
        const api::ToolAnswer a =
            api::read_whole_answer(p->tool_names, r.tool, r.tool_end, r.outcome);
        api::MessageOut m;
        m.id = id;
        m.model = p->model;
        m.thinking = r.reasoning;
        m.text = a.content;  // as streamed: the leading whitespace dropped
        for (size_t i = 0; i < a.calls.size(); ++i) {
          m.calls.push_back({api::tool_use_id(p->request.id, static_cast<int>(i)), a.calls[i].name,
                             a.calls[i].arguments});
        }
        m.stop_reason = api::anthropic_stop_reason(r.outcome, !a.calls.empty());
        m.usage = r.usage;
        res.set_content(api::anthropic_message_json(m), "application/json");
        return {};
      },
      ErrorFormat::kAnthropic);
}

}  // namespace glm::gateway
