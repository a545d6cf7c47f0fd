#include "http/router.h"

namespace glm::http {

void Router::add(std::string method, const std::string& pattern, Handler handler) {
  routes_.push_back(Route{std::move(method), std::regex(pattern), std::move(handler)});
}

const Handler* Router::match(Request& req) const {
  const std::string& method = req.method == "HEAD" ? std::string("GET") : req.method;
  for (const Route& r : routes_) {
    if (r.method != method) continue;
    std::smatch m;
    if (!std::regex_match(req.path, m, r.pattern)) continue;
    req.matches.assign(m.begin(), m.end());
    return &r.handler;
  }
  return nullptr;
}

}  // namespace glm::http
