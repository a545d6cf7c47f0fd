#include "gateway/outcome.h"

namespace glm::gateway {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kStop:
      return "stop";
    case Outcome::kLength:
      return "length";
    case Outcome::kCancelled:
      return "cancelled";
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

}  // namespace glm::gateway
