#include "gateway/relay.h"

#include <chrono>

namespace glm::gateway {

using generation::FinishReason;
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

RelayResult relay_generation(EngineStream& stream,
                             const std::function<bool(const protocol::Event&)>& emit,
                             const std::function<bool()>& heartbeat, const RelayOptions& options) {
  RelayResult result;
  const auto t0 = Clock::now();
  auto last_event = t0;
  auto last_beat = t0;
  bool client_gone = false;
  Clock::time_point cancel_at;
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
      result.outcome = Outcome::kError;
      result.error = ev.status();
      return result;
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
        result.outcome = Outcome::kError;
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
        result.usage = e.usage;
        result.timings = e.timings;
        result.engine_confirmed_cancel = e.finish_reason == FinishReason::kCancelled;
        result.outcome = client_gone ? Outcome::kDisconnected : outcome_of(e.finish_reason);
        return result;
      case protocol::EventType::kError:
        if (client_gone) {
          result.outcome = Outcome::kDisconnected;
          return result;
        }
        result.outcome = Outcome::kError;
        result.error = Status(e.code == ErrorCode::kOk ? ErrorCode::kInternal : e.code, e.message);
        return result;
      case protocol::EventType::kToken:
        result.text += e.text;
        result.logprobs.insert(result.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        if (result.first_token_at == Clock::time_point{}) result.first_token_at = Clock::now();
        break;
      case protocol::EventType::kNotice:
        result.notice = e.message;
        result.dropped_messages = e.dropped_messages;
        break;
      case protocol::EventType::kCancel:
        continue;  // the reply to our cancel line; the done event follows
      default:
        break;
    }
    if (!client_gone && !emit(e)) {
      client_gone = true;
      cancel_at = Clock::now();
      stream.cancel();
    }
  }
  result.outcome = Outcome::kDisconnected;
  return result;
}

Status cut_or_error(const RelayResult& r) {
  if (r.outcome == Outcome::kError) return r.error;
  return Status(ErrorCode::kUnavailable,
                "the answer was cut off after " + std::to_string(r.usage.completion_tokens) +
                    " tokens: the server stopped the generation (it may be restarting); "
                    "retry the request");
}

}  // namespace glm::gateway
