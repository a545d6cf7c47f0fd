// Download progress on stderr: on a terminal one line redrawn with '\r' at most 10 times a
// second ("q4_0.gguf  1.2 / 3.6 GB  45.3 MB/s  ETA 0:53"); otherwise a plain line at each
// quarter, so logs stay short. Speed and ETA count only this run's bytes (not a resumed part).
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace glm::hub {

class ProgressLine {
 public:
  ProgressLine(std::string label, bool tty, std::FILE* out = stderr)
      : label_(std::move(label)), tty_(tty), out_(out) {}
  // `done` of `total` bytes are in place.
  void update(uint64_t done, uint64_t total);
  // Ends the line (a terminal's redrawn line is cleared).
  void finish();
  // Prints a note on its own line without breaking the progress line.
  void note(const std::string& text);

 private:
  std::string format(uint64_t done, uint64_t total) const;
  std::string label_;
  bool tty_;
  std::FILE* out_;
  bool started_ = false;
  uint64_t first_done_ = 0, last_done_ = 0, last_total_ = 0;
  int last_quarter_ = -1;
  std::chrono::steady_clock::time_point t0_, last_draw_;
  bool drawn_ = false;
};

}  // namespace glm::hub
