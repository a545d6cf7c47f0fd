#include "http/wire.h"

#include <cstdio>

namespace glm::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Fields the server writes itself: a handler's value for them is ignored.
bool is_framing_field(std::string_view name) {
  return iequals(name, "Content-Length") || iequals(name, "Transfer-Encoding") ||
         iequals(name, "Connection");
}

}  // namespace

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%' && i + 2 < s.size()) {
      const int hi = hex_value(s[i + 1]);
      const int lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += plus_is_space && c == '+' ? ' ' : c;
  }
  return out;
}

void split_target(std::string_view target, std::string* path, std::string* query) {
  const size_t q = target.find('?');
  *path = percent_decode(target.substr(0, q), false);
  *query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 421:
      return "Misdirected Request";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Unknown";
  }
}

bool status_has_body(int status) { return status >= 200 && status != 204 && status != 304; }

std::string response_head(const Response& res, const Headers& defaults, int version,
                          bool keep_alive) {
  std::string head = version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  head += std::to_string(res.status);
  head += ' ';
  head += reason_phrase(res.status);
  head += "\r\n";
  auto field = [&head](std::string_view name, std::string_view value) {
    head.append(name);
    head += ": ";
    head.append(value);
    head += "\r\n";
  };
  for (const auto& [name, value] : res.headers) {
    if (!is_framing_field(name)) field(name, value);
  }
  for (const auto& [name, value] : defaults) {
    if (!res.headers.has(name)) field(name, value);
  }
  if (status_has_body(res.status)) {
    if (!res.stream) {
      field("Content-Length", std::to_string(res.body.size()));
    } else if (version >= 11) {
      field("Transfer-Encoding", "chunked");
    }
  }
  if (!keep_alive) {
    field("Connection", "close");
  } else if (version == 10) {
    field("Connection", "keep-alive");
  }
  head += "\r\n";
  return head;
}

std::string chunk_frame(std::string_view data) {
  if (data.empty()) return "";
  char size[20];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out;
  out.reserve(static_cast<size_t>(n) + data.size() + 2);
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace glm::http
