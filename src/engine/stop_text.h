// StopText: finds stop strings in streamed text. Text that might be the start of a stop string
// is held back until it is known not to be, so the client never sees any part of a stop string.
// Input is whole UTF-8 characters (tok::StreamDecoder output); output is too, as a held-back
// suffix always starts where a stop string starts.
// One per generation; not thread-safe. Cost: O(text * stops) per push.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace glm::engine {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops);
  // Appends text; returns what is safe to emit. After a match, returns the text before the stop
  // string, matched() becomes true and later pushes return nothing.
  std::string push(std::string_view text);
  // The held-back text at the end of the generation (empty after a match).
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace glm::engine
