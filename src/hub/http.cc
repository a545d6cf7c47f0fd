#include "hub/http.h"

#include <curl/curl.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/check.h"

namespace glm::hub {

namespace {

struct Call {
  HttpResponse head;
  const BodySink* sink = nullptr;
  const std::atomic<bool>* cancel = nullptr;
};

std::string lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// Link: <https://hub/api/...&cursor=x>; rel="next"
std::string next_link(const std::string& value) {
  size_t pos = 0;
  while (pos < value.size()) {
    const size_t lt = value.find('<', pos);
    const size_t gt = value.find('>', lt == std::string::npos ? pos : lt);
    if (lt == std::string::npos || gt == std::string::npos) return "";
    size_t end = value.find(',', gt);
    if (end == std::string::npos) end = value.size();
    const std::string params = lower(value.substr(gt + 1, end - gt - 1));
    if (params.find("rel=\"next\"") != std::string::npos ||
        params.find("rel=next") != std::string::npos) {
      return value.substr(lt + 1, gt - lt - 1);
    }
    pos = end + 1;
  }
  return "";
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<Call*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (the first, or one after a redirect)
    call->head = HttpResponse{};
    const size_t sp = line.find(' ');
    if (sp != std::string::npos)
      call->head.status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  const std::string name = lower(line.substr(0, colon));
  std::string value = line.substr(colon + 1);
  value.erase(0, value.find_first_not_of(" \t"));
  if (name == "content-range" && lower(value).rfind("bytes ", 0) == 0) {
    char* end = nullptr;
    const long long start = std::strtoll(value.c_str() + 6, &end, 10);
    if (end != value.c_str() + 6 && *end == '-' && start >= 0) call->head.range_start = start;
  } else if (name == "link") {
    call->head.link_next = next_link(value);
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<Call*>(user);
  const size_t len = size * n;
  if (call->head.status < 200 || call->head.status >= 300) {
    const size_t room = 2048 - std::min<size_t>(2048, call->head.error_body.size());
    call->head.error_body.append(data, std::min(room, len));
    return len;
  }
  if (!(*call->sink)(call->head, data, len)) {
    call->head.aborted = true;
    return 0;  // anything but len aborts the transfer
  }
  return len;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* call = static_cast<Call*>(user);
  if (call->cancel != nullptr && call->cancel->load()) {
    call->head.aborted = true;
    return 1;
  }
  return 0;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { GLM_CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK); });
}

}  // namespace

HttpClient::HttpClient(HttpOptions options) : options_(std::move(options)) {
  global_init();
  curl_ = curl_easy_init();
  GLM_CHECK(curl_ != nullptr);
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResponse HttpClient::get(const std::string& url, uint64_t offset, const BodySink& sink) {
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);
  Call call;
  call.sink = &sink;
  call.cancel = options_.cancel;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "glmserve/" GLMSERVE_HUB_VERSION);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, options_.stall_timeout_s);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &call);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &call);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &call);
  // No transparent decompression: a Range is about the bytes of the file itself.
  curl_easy_setopt(c, CURLOPT_HTTP_CONTENT_DECODING, 0L);
  const std::string range = std::to_string(offset) + "-";
  if (offset > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  curl_slist* headers = nullptr;
  std::string auth;
  if (!options_.bearer_token.empty()) {
    // A header given this way is not sent to another host after a redirect (libcurl >= 7.58).
    auth = "Authorization: Bearer " + options_.bearer_token;
    headers = curl_slist_append(headers, auth.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  }
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    call.head.transport_error = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
    while (!call.head.transport_error.empty() && call.head.transport_error.back() == '\n') {
      call.head.transport_error.pop_back();
    }
  }
  return call.head;
}

}  // namespace glm::hub
