// How one HTTP generation ended, as the gateway sees it: the engine's finish reasons plus the
// two endings only the gateway knows (an error event or a lost engine, and a client that left).
// One name table: the names are the `outcome` label of /metrics and the `finish_reason` the
// page stores. Pure; thread-safe.
#pragma once

#include "generation/outcome.h"

namespace glm::api {

enum class Outcome { kStop, kLength, kCancelled, kError, kDisconnected };

// "stop", "length", "cancelled", "error", "disconnected".
const char* outcome_name(Outcome o);
Outcome outcome_of(generation::FinishReason r);
// True for the endings where the answer is what the model chose to say (stop, length).
inline bool is_complete(Outcome o) { return o == Outcome::kStop || o == Outcome::kLength; }

}  // namespace glm::api
