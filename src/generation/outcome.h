// How a generation ended and what state the engine is in: enums with one name table each, so
// no layer compares strings ("cancelled") and every layer spells the names the same way on the
// wire. Pure; thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace glm::generation {

enum class FinishReason {
  kStop,       // a stop token or stop string, or the observer ended it
  kLength,     // max_tokens or the context ran out
  kCancelled,  // cancel(), a drain bound, or the client left
};
// "stop", "length", "cancelled".
const char* finish_reason_name(FinishReason r);
std::optional<FinishReason> parse_finish_reason(std::string_view name);

enum class Health {
  kLoading,  // the model is loading: generate requests are refused with a retry hint
  kReady,
  kDraining,  // stopping: in-flight requests finish, new ones are refused
  kStopped,
};
// "loading", "ready", "draining", "stopped".
const char* health_name(Health h);
std::optional<Health> parse_health(std::string_view name);

}  // namespace glm::generation
