// Progress of a long operation (pull, gen-model, convert, quantize, model load) in bytes.
// ProgressFn: what the operations call, from their own thread, with bytes done of total.
// ProgressLine: its display on stderr: on a terminal one line redrawn with '\r' at most 10 times
// a second ("pull  [#######.............]  35%  1.2 / 3.6 GB  45.3 MB/s  ETA 0:53"); otherwise
// a plain line at each quarter (pull: logs stay short) or nothing (Pipe::kQuiet: the commands
// whose output is a file). Speed and ETA count only this run's bytes (not a resumed part).
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace glm {

using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

class ProgressLine {
 public:
  enum class Pipe { kQuarters, kQuiet };  // what it prints when out is not a terminal
  ProgressLine(std::string label, bool tty, std::FILE* out = stderr, Pipe pipe = Pipe::kQuarters)
      : label_(std::move(label)), tty_(tty), out_(out), pipe_(pipe) {}
  // On stderr, a terminal or not, quiet in pipes.
  static ProgressLine on_stderr(std::string label);
  // update() as a ProgressFn; the line must outlive it.
  ProgressFn fn() {
    return [this](uint64_t done, uint64_t total) { update(done, total); };
  }
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
  Pipe pipe_;
  bool started_ = false;
  uint64_t first_done_ = 0, last_done_ = 0, last_total_ = 0;
  int last_quarter_ = -1;
  std::chrono::steady_clock::time_point t0_, last_draw_;
  bool drawn_ = false;
};

}  // namespace glm
