// ModelRouter: which engine answers a request's `model` (docs/gateway.md, "Several models").
// One engine (glmserve web --engine PATH, or serve with one --model): every request goes to it,
// whatever model it names, as always. Several (serve --model A --model B, which passes
// --models-control): the gateway asks serve's control socket (serve/control_server.h) for the
// model's engine; serve starts it if needed and answers once it is ready, so the calling request
// waits while the model loads (serve bounds the wait). An unknown model is not_found naming the
// models served.
//
// Thread-safety: immutable after construction; any thread. Cost: one-engine mode nothing; several
// models, a Unix-socket round trip to serve per call (~0.1 ms when the model is loaded), the load
// time when it is not.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "gateway/engine_client.h"

namespace glm::gateway {

class ModelRouter {
 public:
  ModelRouter(std::string default_socket, std::string control_socket)
      : default_socket_(std::move(default_socket)), control_socket_(std::move(control_socket)) {}

  bool several() const { return !control_socket_.empty(); }

  // The engine for `model` ("" = the default model).
  StatusOr<EngineClient> engine_for(const std::string& model) const;

  // The engine and, where `model` names an adapter served on one of several models ("NAME" or
  // "MODEL:NAME", serve --adapter), that adapter; one engine: the engine and "" (the gateway
  // resolves adapter names against its engine itself).
  struct Route {
    EngineClient engine;
    std::string adapter;
  };
  StatusOr<Route> route_for(const std::string& model) const;

  // Several models: serve's list, {"default":..,"models":[{"name","state",...}]}.
  StatusOr<nlohmann::json> list() const;

 private:
  // One control request line, its reply (an {"ok":false} reply as its status).
  StatusOr<nlohmann::json> ask(const nlohmann::json& request, int timeout_ms) const;

  std::string default_socket_;
  std::string control_socket_;
};

}  // namespace glm::gateway
