#include "gateway/relay.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/log.h"

namespace glm::gateway {

using generation::FinishReason;
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

enum class Resumed { kYes, kClientGone, kCancelled, kFailed };

// Waits for the engine to take `stream`'s request again, resumed after `generated`, within the
// window; heartbeats go out meanwhile. The first event of the resumed request (queued) is read
// here: a refusal that says "retry" (busy, or unavailable while the restarted engine loads) is
// retried, any other refusal fails the answer with it.
Resumed resume_stream(EngineStream& stream, const EngineClient& engine,
                      const std::vector<int32_t>& generated, const std::function<bool()>& heartbeat,
                      const RelayOptions& options, Status* error) {
  const auto t0 = Clock::now();
  auto last_beat = t0;
  Status last = Status(ErrorCode::kUnavailable, "the engine did not come back");
  while (ms_since(t0) < options.resume.window_ms) {
    if (stream.cancel_sent()) return Resumed::kCancelled;
    if (ms_since(last_beat) >= options.heartbeat_ms) {
      last_beat = Clock::now();
      if (!heartbeat()) return Resumed::kClientGone;
    }
    int wait_ms = options.resume.retry_ms;
    Status st = engine.resume(&stream, generated);
    if (st.ok()) {
      auto ev = stream.next(std::min(options.heartbeat_ms, 10000));
      if (ev.ok() && (!ev->has_value() || (*ev)->type != protocol::EventType::kError)) {
        return Resumed::kYes;  // queued (or still silent: the stream goes on)
      }
      if (ev.ok()) {
        const protocol::Event& e = **ev;
        st = Status(e.code == ErrorCode::kOk ? ErrorCode::kInternal : e.code, e.message);
        if (e.code != ErrorCode::kUnavailable && e.code != ErrorCode::kQueueFull) {
          *error = st;
          return Resumed::kFailed;
        }
        // A loading engine is asked again soon (its hint is for clients, not for a wait that
        // should end the moment it is ready); a busy one when it says.
        if (e.code == ErrorCode::kQueueFull && e.retry_after_ms > 0) {
          wait_ms = std::min(e.retry_after_ms, options.heartbeat_ms);
        }
      } else {
        st = ev.status();
      }
    }
    last = st;
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }
  char window[32];
  std::snprintf(window, sizeof(window), "%.1f s", options.resume.window_ms / 1000.0);
  *error = Status(ErrorCode::kUnavailable,
                  std::string("the engine stopped mid-answer and did not take it back within ") +
                      window + " (" + last.message() + "); retry the request");
  return Resumed::kFailed;
}

}  // namespace

RelayResult relay_generation(EngineStream& stream,
                             const std::function<bool(const protocol::Event&)>& emit,
                             const std::function<bool()>& heartbeat, const RelayOptions& options,
                             const EngineClient* engine) {
  RelayResult result;
  std::vector<int32_t> generated;  // the ids of the tokens relayed so far (for a resume)
  // Every token event carried its ids (an engine that sends none cannot be resumed without
  // repeating text), and the request has one choice (several interleave).
  bool ids_complete = stream.request().n <= 1;
  const auto t0 = Clock::now();
  auto last_event = t0;
  auto last_beat = t0;
  bool client_gone = false;
  Clock::time_point cancel_at;
  // The engine stopped the answer before its end (`why`): resumes it on the engine that comes
  // back, or sets the result's error. False = the relay ends.
  // Several choices (an index > 0 or a choice_done seen): each is kept by index, choice 0
  // from what result.text already holds. Their tokens interleave, so none is resumed.
  auto choice = [&](int index) -> ChoiceResult& {
    ids_complete = false;
    if (result.choices.empty()) {
      result.choices.resize(1);
      result.choices[0].text = result.text;
      result.choices[0].logprobs = result.logprobs;
    }
    index = std::min(index, 127);
    if (static_cast<int>(result.choices.size()) <= index) result.choices.resize(index + 1);
    return result.choices[index];
  };
  auto resume_or_end = [&](const Status& why) {
    if (engine == nullptr || !ids_complete || stream.cancel_sent()) {
      result.outcome = api::Outcome::kError;
      result.error = why;
      return false;
    }
    if (result.resumes >= options.resume.max_resumes) {
      result.outcome = api::Outcome::kError;
      result.error = Status(ErrorCode::kUnavailable,
                            "the engine stopped mid-answer " + std::to_string(result.resumes + 1) +
                                " times (the last: " + why.message() +
                                "); giving up on this answer (check the engine's log)");
      return false;
    }
    const auto t_lost = Clock::now();
    GLM_LOG_WARN("web: %s: the engine stopped the answer after %zu tokens (%s); resuming",
                 stream.id().c_str(), generated.size(), why.message().c_str());
    Status error;
    const Resumed r = resume_stream(stream, *engine, generated, heartbeat, options, &error);
    result.resume_wait_ms += ms_since(t_lost);
    switch (r) {
      case Resumed::kClientGone:
        result.outcome = api::Outcome::kDisconnected;
        return false;
      case Resumed::kCancelled:
        result.outcome = api::Outcome::kCancelled;
        return false;
      case Resumed::kFailed:
        result.outcome = api::Outcome::kError;
        result.error = error;
        return false;
      case Resumed::kYes:
        break;
    }
    ++result.resumes;
    GLM_LOG_INFO("web: %s: resumed after %zu tokens; the engine took it back in %.0f ms",
                 stream.id().c_str(), generated.size(), ms_since(t_lost));
    last_event = Clock::now();
    return true;
  };
  while (true) {
    int wait_ms = options.heartbeat_ms;
    if (client_gone) {
      const double left = options.drain_ms - ms_since(cancel_at);
      if (left <= 0) break;  // the engine did not confirm in time; the socket close cancels it
      wait_ms = static_cast<int>(left) + 1;
    }
    auto ev = stream.next(wait_ms);
    if (!ev.ok()) {
      if (client_gone) break;
      if (!resume_or_end(ev.status())) return result;
      continue;
    }
    // Heartbeats go out every heartbeat_ms whether or not events flow: a non-streaming answer
    // writes nothing else until the end, and must still notice a client that left.
    if (!client_gone && ms_since(last_beat) >= options.heartbeat_ms) {
      last_beat = Clock::now();
      if (!heartbeat()) {
        client_gone = true;
        cancel_at = Clock::now();
        stream.cancel();
      }
    }
    if (!ev->has_value()) {
      if (client_gone) continue;
      if (ms_since(last_event) > options.idle_timeout_ms) {
        stream.cancel();
        result.outcome = api::Outcome::kError;
        result.error =
            Status(ErrorCode::kUnavailable,
                   "the engine sent nothing for " + std::to_string(options.idle_timeout_ms / 1000) +
                       " s; the request was cancelled (check the engine's log)");
        return result;
      }
      continue;
    }
    last_event = Clock::now();
    const protocol::Event& e = **ev;
    if (!e.id.empty() && e.id != stream.id()) continue;  // not ours (cannot happen per connection)
    switch (e.type) {
      case protocol::EventType::kDone:
        // Cancelled without our asking: the engine's drain bound cut it (a restart, e.g.
        // `supervisorctl restart`): the answer goes on on the engine that comes back.
        if (e.finish_reason == FinishReason::kCancelled && !client_gone && engine != nullptr &&
            ids_complete && !stream.cancel_sent()) {
          if (!resume_or_end(Status(ErrorCode::kUnavailable,
                                    "the engine cut the answer (drained for a stop)"))) {
            return result;
          }
          continue;
        }
        result.usage = e.usage;
        result.timings = e.timings;
        result.tool_end = e.tool;
        result.engine_confirmed_cancel = e.finish_reason == FinishReason::kCancelled;
        result.outcome =
            client_gone ? api::Outcome::kDisconnected : api::outcome_of(e.finish_reason);
        return result;
      case protocol::EventType::kError: {
        if (client_gone) {
          result.outcome = api::Outcome::kDisconnected;
          return result;
        }
        const Status error(e.code == ErrorCode::kOk ? ErrorCode::kInternal : e.code, e.message);
        // The engine stops to be restarted (a lost GPU), not for this request: the answer goes
        // on on the engine that comes back, as after a crash (with this error if it does not).
        if (e.restart) {
          if (!resume_or_end(error)) return result;
          continue;
        }
        result.outcome = api::Outcome::kError;
        result.error = error;
        return result;
      }
      case protocol::EventType::kToken:
        if (e.index > 0 || !result.choices.empty()) {
          ChoiceResult& c = choice(e.index);
          c.text += e.text;
          c.reasoning += e.reasoning;
          c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        }
        if (e.index == 0) {
          result.text += e.text;
          result.reasoning += e.reasoning;
          result.logprobs.insert(result.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
          result.tool.insert(result.tool.end(), e.tool.begin(), e.tool.end());
          generated.insert(generated.end(), e.tokens.begin(), e.tokens.end());
          if (!e.text.empty() && e.tokens.empty()) ids_complete = false;
        }
        if (result.first_token_at == Clock::time_point{}) result.first_token_at = Clock::now();
        break;
      case protocol::EventType::kChoiceDone: {
        ChoiceResult& c = choice(e.index);
        c.outcome = api::outcome_of(e.finish_reason);
        c.completion_tokens = e.usage.completion_tokens;
        break;
      }
      case protocol::EventType::kNotice:
        result.notice = e.message;
        result.dropped_messages = e.dropped_messages;
        break;
      case protocol::EventType::kCancel:
        continue;  // the reply to our cancel line; the done event follows
      default:
        break;
    }
    // A resumed request's queued/start/notice were relayed the first time.
    if (result.resumes > 0 && e.type != protocol::EventType::kToken) continue;
    if (!client_gone && !emit(e)) {
      client_gone = true;
      cancel_at = Clock::now();
      stream.cancel();
    }
  }
  result.outcome = api::Outcome::kDisconnected;
  return result;
}

Status cut_or_error(const RelayResult& r) {
  if (r.outcome == api::Outcome::kDisconnected) {
    return Status(ErrorCode::kCancelled, "the client closed the connection");
  }
  if (r.outcome == api::Outcome::kError) return r.error;
  return Status(ErrorCode::kUnavailable,
                "the answer was cut off after " + std::to_string(r.usage.completion_tokens) +
                    " tokens: the server stopped the generation (it may be restarting); "
                    "retry the request");
}

}  // namespace glm::gateway
