// Status: the one error type of glmserve for expected failures (bad file, bad request, context
// overflow, queue full, cancelled, peer gone). Bugs abort through GLM_CHECK instead (check.h).
// One table maps each code to its protocol name and HTTP status (status.cc).
// Thread-safety: value types, freely copyable.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace glm {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // malformed request or flag
  kNotFound,         // unknown model, conversation, file
  kBadFile,          // corrupt or unsupported model file
  kUnsupported,      // valid but not implemented (architecture, weight type)
  kContextOverflow,  // prompt does not fit the context
  kQueueFull,        // engine busy, retry later
  kCancelled,        // request cancelled by client
  kPeerGone,         // client disconnected
  kUnavailable,      // engine not ready / down / draining
  kOutOfMemory,      // KV cache or allocation exhausted
  kUnauthorized,     // bad or missing API key
  kInternal,         // unexpected failure inside one request
};

// Stable snake_case name used in the wire protocol ("invalid_argument").
const char* error_code_name(ErrorCode code);
// HTTP status for the gateway (400, 404, 413, 429, 499, 503, 500...).
int error_code_http_status(ErrorCode code);
// Inverse of error_code_name; kInternal for unknown names.
ErrorCode error_code_from_name(const std::string& name);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "bad_file: tensor blk.0.attn_qkv.weight: data out of range"
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) {
  return Status(ErrorCode::kInvalidArgument, std::move(m));
}
inline Status bad_file(std::string m) { return Status(ErrorCode::kBadFile, std::move(m)); }
inline Status not_found(std::string m) { return Status(ErrorCode::kNotFound, std::move(m)); }
inline Status unsupported(std::string m) { return Status(ErrorCode::kUnsupported, std::move(m)); }

// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace glm

// Returns early from the enclosing function if `expr` yields a non-ok Status.
#define GLM_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::glm::Status glm_status_ = (expr);        \
    if (!glm_status_.ok()) return glm_status_; \
  } while (0)
