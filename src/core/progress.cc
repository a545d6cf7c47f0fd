#include "core/progress.h"

#include <unistd.h>

namespace glm {

namespace {

std::string bytes_text(uint64_t n) {
  char buf[32];
  if (n >= 1000000000) {
    std::snprintf(buf, sizeof(buf), "%.2f GB", static_cast<double>(n) / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(n) / 1e6);
  }
  return buf;
}

}  // namespace

std::string ProgressLine::format(uint64_t done, uint64_t total) const {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double rate = secs > 0.05 ? static_cast<double>(done - first_done_) / secs : 0.0;
  char eta[32] = "--:--";
  if (rate > 0 && total >= done) {
    const auto left = static_cast<long long>(static_cast<double>(total - done) / rate);
    std::snprintf(eta, sizeof(eta), "%lld:%02lld", left / 60, left % 60);
  }
  const int pct =
      total > 0 ? static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total))
                : 100;
  constexpr int kBar = 20;
  std::string bar(kBar, '.');
  for (int i = 0; i < kBar && i < pct * kBar / 100; ++i) bar[static_cast<size_t>(i)] = '#';
  char buf[320];
  std::snprintf(buf, sizeof(buf), "%s  [%s] %3d%%  %s / %s  %.1f MB/s  ETA %s", label_.c_str(),
                bar.c_str(), pct, bytes_text(done).c_str(), bytes_text(total).c_str(), rate / 1e6,
                eta);
  return buf;
}

ProgressLine ProgressLine::on_stderr(std::string label) {
  return ProgressLine(std::move(label), ::isatty(::fileno(stderr)) == 1, stderr, Pipe::kQuiet);
}

void ProgressLine::update(uint64_t done, uint64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (!started_) {
    started_ = true;
    first_done_ = done;
    t0_ = now;
  }
  last_done_ = done;
  last_total_ = total;
  if (tty_) {
    if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total) return;
    last_draw_ = now;
    drawn_ = true;
    std::fprintf(out_, "\r\033[K%s", format(done, total).c_str());
    std::fflush(out_);
    return;
  }
  if (pipe_ == Pipe::kQuiet) return;
  const int quarter = total > 0 ? static_cast<int>(4 * done / total) : 4;
  if (quarter == last_quarter_ || (quarter == 0 && done == 0)) return;
  last_quarter_ = quarter;
  std::fprintf(out_, "%s\n", format(done, total).c_str());
}

void ProgressLine::note(const std::string& text) {
  if (tty_ && drawn_) {
    std::fprintf(out_, "\r\033[K%s\n%s", text.c_str(), format(last_done_, last_total_).c_str());
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (tty_ && drawn_) std::fputs("\r\033[K", out_);
  std::fflush(out_);
}

}  // namespace glm
