// The models served: GET /v1/models, GET /v1/models/{id}, and /health with several models.
// One engine: the one model, named by its health reply. Several (serve --model A --model B):
// serve's list, each with its state (loaded, loading with its progress, unloaded) in OpenAI's
// model objects as extra fields (clients ignore what they do not know).
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "gateway/gateway.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;

json model_object(const std::string& id) {
  return json{{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "glmserve"}};
}

// An OpenAI model object with serve's fields: state, size_bytes, load (while loading).
json served_model_object(const json& m) {
  json j = model_object(m.value("name", ""));
  j["state"] = m.value("state", "unloaded");
  j["size_bytes"] = m.value("size_bytes", 0);
  if (m.contains("load")) j["load"] = m["load"];
  return j;
}

}  // namespace

void Gateway::install_models_routes() {
  server_->get("/v1/models", [this](const http::Request&, http::Response& res) {
    json data = json::array();
    if (router_.several()) {
      auto list = router_.list();
      if (!list.ok()) return set_json_error(res, list.status());
      for (const json& m : (*list)["models"]) data.push_back(served_model_object(m));
    } else {
      data.push_back(model_object(model_name()));
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(dump_json(json{{"object", "list"}, {"data", std::move(data)}}),
                    "application/json");
  });
  server_->get(R"(/v1/models/([^/]+))", [this](const http::Request& req, http::Response& res) {
    const std::string id = req.matches[1];
    if (router_.several()) {
      auto list = router_.list();
      if (!list.ok()) return set_json_error(res, list.status());
      std::string names;
      for (const json& m : (*list)["models"]) {
        if (m.value("name", "") == id) {
          return res.set_content(dump_json(served_model_object(m)), "application/json");
        }
        names += (names.empty() ? "'" : ", '") + m.value("name", "") + "'";
      }
      return set_json_error(res, not_found("model '" + id + "' is not served here; this server " +
                                           "serves " + names + " (GET /v1/models)"));
    }
    const std::string name = model_name();
    if (id != name) {
      return set_json_error(res, not_found("model '" + id + "' is not served here; this server " +
                                           "serves '" + name + "' (GET /v1/models)"));
    }
    res.set_content(dump_json(model_object(name)), "application/json");
  });
}

// Several models: the gateway is ready when serve answers (a model loads on its first request);
// each model's state and load progress come with it.
void Gateway::several_models_health(http::Response& res) {
  json j = {{"gateway", "ok"}, {"inflight", inflight()}};
  auto list = router_.list();
  if (list.ok()) {
    j["status"] = "ready";
    j["model"] = list->value("default", "");
    j["models"] = (*list)["models"];
    for (json& m : j["models"]) m.erase("socket");
  } else {
    j["status"] = "down";
    j["error"] = list.status().message();
  }
  res.status = list.ok() ? 200 : 503;
  res.set_header("Cache-Control", "no-store");
  res.set_content(dump_json(j), "application/json");
}

}  // namespace glm::gateway
