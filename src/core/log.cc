#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace glm {
namespace {

LogLevel initial_level() {
  const char* env = std::getenv("GLMSERVE_LOG");
  LogLevel level = LogLevel::kInfo;
  if (env != nullptr) parse_log_level(env, &level);
  return level;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

}  // namespace

void set_log_level(LogLevel level) { level_ref().store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(level_ref().load()); }

bool parse_log_level(const char* name, LogLevel* out) {
  static const struct {
    const char* name;
    LogLevel level;
  } kNames[] = {{"debug", LogLevel::kDebug},
                {"info", LogLevel::kInfo},
                {"warn", LogLevel::kWarn},
                {"error", LogLevel::kError},
                {"off", LogLevel::kOff}};
  for (const auto& n : kNames) {
    if (std::strcmp(name, n.name) == 0) {
      *out = n.level;
      return true;
    }
  }
  return false;
}

void log_message(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) < level_ref().load()) return;
  char line[2048];
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  static const char kLetters[] = "DIWE";
  int n = std::snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %c ",
                        tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                        tm.tm_sec, ms, kLetters[static_cast<int>(level) & 3]);
  va_list args;
  va_start(args, fmt);
  const int m = std::vsnprintf(line + n, sizeof(line) - n - 1, fmt, args);
  va_end(args);
  n = m < 0 ? n : std::min<int>(n + m, sizeof(line) - 2);
  line[n++] = '\n';
  // One write() per line keeps lines from different threads whole.
  ssize_t ignored = ::write(STDERR_FILENO, line, n);
  (void)ignored;
}

}  // namespace glm
