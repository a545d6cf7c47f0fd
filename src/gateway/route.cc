#include "gateway/route.h"

#include "api/anthropic.h"
#include "api/openai.h"

namespace glm::gateway {

std::string error_body(const Status& status, ErrorFormat format) {
  return format == ErrorFormat::kAnthropic ? api::anthropic_error_json(status)
                                           : api::openai_error_json(status);
}

http::Handler Routes::wrap(RouteHandler h, ErrorFormat f) const {
  return [this, h = std::move(h), f](const http::Request& req, http::Response& res) {
    const RouteStatus st = h(req, res);
    if (!st.ok()) write_error(res, st, f);
  };
}

void Routes::write_error(http::Response& res, const RouteStatus& st, ErrorFormat f) const {
  const Status& status = st.status();
  res.status = error_code_http_status(status.code());
  // Busy and unavailable are temporary: say when to come back, in the header the OpenAI and
  // Anthropic SDKs read before retrying (seconds) and in their millisecond variant.
  if (status.code() == ErrorCode::kQueueFull || status.code() == ErrorCode::kUnavailable) {
    // A busy engine says when to come back; a missing or loading one is asked again in 2 s.
    const int ms = status.code() == ErrorCode::kQueueFull ? busy_retry_ms_->load() : 2000;
    res.set_header("Retry-After", std::to_string((ms + 999) / 1000));
    res.set_header("retry-after-ms", std::to_string(ms));
  }
  res.set_content(error_body(status, f), "application/json");
  if (st.counted()) metrics_->record_error(error_code_name(status.code()));
}

void Routes::add(const char* method, const std::string& pattern, RouteHandler h, ErrorFormat f) {
  server_->route(method, pattern, wrap(std::move(h), f));
}

}  // namespace glm::gateway
