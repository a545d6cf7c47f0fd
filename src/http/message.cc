#include "http/message.h"

#include "http/wire.h"

namespace glm::http {

std::string Request::param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    const size_t eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq), true) == name) {
      return eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1), true);
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return "";
}

void Response::set_content(std::string content, std::string_view content_type) {
  body = std::move(content);
  stream = nullptr;
  headers.set("Content-Type", std::string(content_type));
}

void Response::set_stream(std::string_view content_type, StreamProvider provider) {
  body.clear();
  stream = std::move(provider);
  headers.set("Content-Type", std::string(content_type));
}

}  // namespace glm::http
