// Leveled logging to stderr: "2026-11-30T13:00:00.123Z I engine: ready in 812 ms".
// Thread-safe (one write per line). The level is process-wide (set_log_level, or the
// GLMSERVE_LOG environment variable: debug, info, warn, error).
#pragma once

namespace glm {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Parses "debug"/"info"/"warn"/"error"/"off"; false if unknown.
bool parse_log_level(const char* name, LogLevel* out);

void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace glm

#define GLM_LOG_DEBUG(...) ::glm::log_message(::glm::LogLevel::kDebug, __VA_ARGS__)
#define GLM_LOG_INFO(...) ::glm::log_message(::glm::LogLevel::kInfo, __VA_ARGS__)
#define GLM_LOG_WARN(...) ::glm::log_message(::glm::LogLevel::kWarn, __VA_ARGS__)
#define GLM_LOG_ERROR(...) ::glm::log_message(::glm::LogLevel::kError, __VA_ARGS__)
