#include "http/server_core.h"

#include "http/wire.h"

namespace glm::http {

bool ServerCore::admit(const std::string& ip) {
  std::lock_guard<std::mutex> lock(mu);
  if (connections.load() >= options.max_connections) return false;
  int& n = per_ip[ip];
  if (n >= options.max_connections_per_ip) {
    if (n == 0) per_ip.erase(ip);
    return false;
  }
  ++n;
  connections.fetch_add(1);
  return true;
}

void ServerCore::release(const std::string& ip) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = per_ip.find(ip);
  if (it != per_ip.end() && --it->second <= 0) per_ip.erase(it);
  connections.fetch_sub(1);
}

void ServerCore::handle(Request& req, Response& res) const {
  try {
    if (!pre_routing || !pre_routing(req, res)) {
      if (const Handler* h = router.match(req)) {
        (*h)(req, res);
      } else {
        res.status = 404;
      }
    }
  } catch (...) {
    res = Response{};
    res.status = 500;
    if (exception_handler) {
      exception_handler(req, res, std::current_exception());
    }
  }
  fill_error(req, res);
}

void ServerCore::fill_error(const Request& req, Response& res) const {
  if (res.status < 400 || !res.body.empty() || res.stream) return;
  if (error_handler) error_handler(req, res);
  if (res.body.empty() && !res.stream) {
    res.set_content(
        (res.reason.empty() ? std::string(reason_phrase(res.status)) : res.reason) + "\n",
        "text/plain; charset=utf-8");
  }
}

}  // namespace glm::http
