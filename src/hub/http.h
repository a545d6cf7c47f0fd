// A small HTTP GET client over libcurl for the hub: redirects followed (the hub sends large files
// to a CDN), http/https only, a bearer token that libcurl drops on a redirect to another host,
// a Range start, and bodies streamed to a sink. One object holds one libcurl handle, so
// consecutive requests to the same host reuse the connection. Not thread-safe: one per thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace glm::hub {

struct HttpResponse {
  long status = 0;              // the final HTTP status (after redirects); 0 when none came
  std::string transport_error;  // set when the transfer failed: refused, reset, timed out, aborted
  bool aborted = false;         // the sink or the cancel flag stopped the transfer
  int64_t range_start = -1;     // first byte of a 206's Content-Range; -1 when absent
  std::string link_next;        // the Link header's rel="next" URL (a paged answer), or ""
  std::string error_body;       // the first 2 KB of a non-2xx body (the hub's error message)
};

// Receives the body of a 2xx answer, piece by piece; returns false to abort the transfer.
using BodySink = std::function<bool(const HttpResponse& head, const char* data, size_t n)>;

struct HttpOptions {
  std::string bearer_token;  // "Authorization: Bearer ..." when not empty (HF_TOKEN)
  long connect_timeout_s = 20;
  long stall_timeout_s = 60;  // a transfer slower than 1 byte/s for this long is dropped
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by SIGINT) to abort a transfer
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // GET `url`, asking for bytes from `offset` on when it is > 0 ("Range: bytes=OFFSET-").
  HttpResponse get(const std::string& url, uint64_t offset, const BodySink& sink);

  const HttpOptions& options() const { return options_; }

 private:
  HttpOptions options_;
  void* curl_;  // CURL*
};

}  // namespace glm::hub
