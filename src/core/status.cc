#include "core/status.h"

#include <cstring>

namespace glm {
namespace {

struct CodeInfo {
  ErrorCode code;
  const char* name;
  int http_status;
};

// The one error-code table: protocol names and HTTP statuses.
constexpr CodeInfo kCodes[] = {
    {ErrorCode::kOk, "ok", 200},
    {ErrorCode::kInvalidArgument, "invalid_argument", 400},
    {ErrorCode::kNotFound, "not_found", 404},
    {ErrorCode::kBadFile, "bad_file", 422},
    {ErrorCode::kUnsupported, "unsupported", 422},
    {ErrorCode::kContextOverflow, "context_overflow", 413},
    {ErrorCode::kQueueFull, "busy", 429},
    {ErrorCode::kCancelled, "cancelled", 499},
    {ErrorCode::kPeerGone, "peer_gone", 499},
    {ErrorCode::kUnavailable, "unavailable", 503},
    {ErrorCode::kOutOfMemory, "out_of_memory", 503},
    {ErrorCode::kUnauthorized, "unauthorized", 401},
    {ErrorCode::kInternal, "internal", 500},
};

const CodeInfo& info(ErrorCode code) {
  for (const CodeInfo& c : kCodes) {
    if (c.code == code) return c;
  }
  return kCodes[sizeof(kCodes) / sizeof(kCodes[0]) - 1];
}

}  // namespace

const char* error_code_name(ErrorCode code) { return info(code).name; }
int error_code_http_status(ErrorCode code) { return info(code).http_status; }

ErrorCode error_code_from_name(const std::string& name) {
  for (const CodeInfo& c : kCodes) {
    if (name == c.name) return c.code;
  }
  return ErrorCode::kInternal;
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace glm
