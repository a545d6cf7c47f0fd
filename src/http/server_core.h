// What every connection of one Server shares: options, routes, hooks, the worker pool, the
// connection limits and counters. Internal to the http module. Thread-safety: the routes,
// hooks and options are fixed before the server runs; the rest is atomic or under `mu`.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "http/router.h"
#include "http/server.h"
#include "http/worker_pool.h"

namespace glm::http {

class Connection;

struct ServerCore {
  ServerOptions options;
  Router router;
  Server::PreRouting pre_routing;
  Server::ErrorHandler error_handler;
  Server::ExceptionHandler exception_handler;
  std::unique_ptr<WorkerPool> pool;

  std::atomic<int> connections{0};
  std::atomic<long long> accepted{0}, refused{0}, requests{0}, overloaded{0}, timed_out{0},
      bad_requests{0};

  std::mutex mu;
  std::unordered_map<std::string, int> per_ip;  // open connections by address
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> live;  // for stop()

  // Counts a new connection from `ip`; false (nothing counted) when a limit is reached.
  bool admit(const std::string& ip);
  // Uncounts it.
  void release(const std::string& ip);

  // Runs the pre-routing hook, the route (404 without one), the exception handler; then the
  // error handler for an error answer without a body. Worker thread.
  void handle(Request& req, Response& res) const;
  // The error handler for `res` if it is an error without a body (else a plain-text body).
  void fill_error(const Request& req, Response& res) const;
};

}  // namespace glm::http
