// LineBuffer: splits a byte stream into newline-terminated lines with a length limit, for both
// ends of the socket. A line longer than the limit is reported once as overlong and its bytes
// are dropped up to the next newline, so one bad line never desynchronizes the stream.
// Not thread-safe (one per connection). Cost: amortized O(bytes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace glm::protocol {

class LineBuffer {
 public:
  explicit LineBuffer(size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  // Appends received bytes.
  void append(std::string_view bytes);

  enum class Next { kNone, kLine, kOverlong };
  // Takes the next complete line (without "\n") into *line: kLine. kOverlong: a line exceeded
  // the limit (*line holds its first bytes, for logging and id recovery); kNone: need more bytes.
  Next next(std::string* line);

  // Bytes buffered of the current, unfinished line.
  size_t pending_bytes() const { return buf_.size() - start_; }

 private:
  size_t max_line_bytes_;
  std::string buf_;
  size_t start_ = 0;         // first unconsumed byte
  size_t scanned_ = 0;       // bytes from start_ already known to hold no newline
  bool discarding_ = false;  // dropping an overlong line up to its newline
};

}  // namespace glm::protocol
