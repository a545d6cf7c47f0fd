// Routes: a method and a regular expression over the whole decoded path, tried in the order
// they were added. Add every route before the server runs; match() is then thread-safe.
// Cost: match() tries each route's regex until one matches (the gateway has ~15).
#pragma once

#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "http/message.h"

namespace glm::http {

using Handler = std::function<void(const Request&, Response&)>;

class Router {
 public:
  // `pattern`: ECMAScript regex that must match the whole path; its groups become
  // Request::matches[1..]. A GET route also answers HEAD.
  void add(std::string method, const std::string& pattern, Handler handler);
  // The handler for `req` (filling req.matches), or nullptr.
  const Handler* match(Request& req) const;

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace glm::http
