// The text of HTTP/1.1 that this server writes itself: response heads, chunk frames, and the
// decoding of request targets. Pure functions; thread-safe. Parsing requests is Beast's
// (connection.cc).
#pragma once

#include <string>
#include <string_view>

#include "http/headers.h"
#include "http/message.h"

namespace glm::http {

// "%41b+c" -> "Ab c" with `plus_is_space` (query strings), "Ab+c" without (paths). A malformed
// escape is kept as it is.
std::string percent_decode(std::string_view s, bool plus_is_space);

// "/a%20b?x=1" -> path "/a b", query "x=1".
void split_target(std::string_view target, std::string* path, std::string* query);

// "OK", "Not Found", ...; "Unknown" for a code without a phrase.
const char* reason_phrase(int status);

// Whether a response with `status` carries a body at all (not 1xx, 204, 304).
bool status_has_body(int status);

// The status line and fields of `res` (then `defaults` for names `res` does not set), and the
// framing fields the server owns: Content-Length for a fixed body, Transfer-Encoding: chunked
// for a stream on HTTP/1.1 (none on HTTP/1.0: that body ends when the connection closes), and
// Connection: close or keep-alive. Ends with the blank line.
std::string response_head(const Response& res, const Headers& defaults, int version,
                          bool keep_alive);

// One chunk of a chunked body: "<hex size>\r\n<data>\r\n". Empty data gives nothing (an empty
// chunk would end the body); the end is kLastChunk.
std::string chunk_frame(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace glm::http
