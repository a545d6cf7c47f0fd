#include "api/outcome.h"

namespace glm::api {

const char* outcome_name(Outcome o) {
  // The engine's endings keep the engine's names (generation's one table).
  switch (o) {
    case Outcome::kStop:
      return generation::finish_reason_name(generation::FinishReason::kStop);
    case Outcome::kLength:
      return generation::finish_reason_name(generation::FinishReason::kLength);
    case Outcome::kCancelled:
      return generation::finish_reason_name(generation::FinishReason::kCancelled);
    case Outcome::kError:
      return "error";
    case Outcome::kDisconnected:
      return "disconnected";
  }
  return "error";
}

Outcome outcome_of(generation::FinishReason r) {
  switch (r) {
    case generation::FinishReason::kStop:
      return Outcome::kStop;
    case generation::FinishReason::kLength:
      return Outcome::kLength;
    case generation::FinishReason::kCancelled:
      return Outcome::kCancelled;
  }
  return Outcome::kError;
}

}  // namespace glm::api
