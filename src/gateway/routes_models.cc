// The models served: GET /v1/models, GET /v1/models/{id}, and /health with several models.
// One engine: the one model, named by its health reply. Several (serve --model A --model B):
// serve's list, each with its state (loaded, loading with its progress, unloaded) in OpenAI's
// model objects as extra fields (clients ignore what they do not know).
#include <nlohmann/json.hpp>

#include "api/body.h"
#include "core/json.h"
#include "gateway/gateway.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;

json model_object(const std::string& id) {
  return json{{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "glmserve"}};
}

// An adapter served on `base` (docs/adapters.md), with vLLM's fields for one: parent and root
// name the base model. Selected by `model: "NAME"` or `"BASE:NAME"`.
json adapter_object(const std::string& name, const std::string& base) {
  json j = model_object(name);
  j["parent"] = base;
  j["root"] = base;
  return j;
}

// An OpenAI model object with serve's fields: state, size_bytes, load (while loading).
json served_model_object(const json& m) {
  json j = model_object(m.value("name", ""));
  j["state"] = m.value("state", "unloaded");
  j["size_bytes"] = m.value("size_bytes", 0);
  if (m.contains("load")) j["load"] = m["load"];
  return j;
}

// Several models: serve's list as model objects, each model followed by its adapters (listed by
// the name that selects them, with their model's state).
json served_objects(const json& list) {
  json data = json::array();
  for (const json& m : list["models"]) {
    data.push_back(served_model_object(m));
    for (const json& a : m.value("adapters", json::array())) {
      json o = adapter_object(a.value("name", ""), m.value("name", ""));
      o["state"] = m.value("state", "unloaded");
      data.push_back(std::move(o));
    }
  }
  return data;
}

}  // namespace

void Gateway::install_models_routes() {
  routes_->get("/v1/models", [this](const http::Request&, http::Response& res) -> RouteStatus {
    json data = json::array();
    if (router_.several()) {
      auto list = router_.list();
      if (!list.ok()) return list.status();
      data = served_objects(*list);
    } else {
      const std::string base = model_name();
      data.push_back(model_object(base));
      for (const std::string& a : served_adapters()) data.push_back(adapter_object(a, base));
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(dump_json(json{{"object", "list"}, {"data", std::move(data)}}),
                    "application/json");
    return {};
  });
  // Adapters loaded and unloaded at run time (docs/adapters.md), in vLLM's shapes:
  // {"lora_name", "lora_path", "scale"?} and {"lora_name"}. A path on this machine is read by
  // the engine: only with an API key configured (and sent, as every /v1 route checks).
  auto adapter_route = [this](bool load) {
    return [this, load](const http::Request& req, http::Response& res) -> RouteStatus {
      if (options_.api_key.empty()) {
        return Status(ErrorCode::kUnauthorized,
                      "loading adapters at run time needs the gateway's API "
                      "key (start it with --api-key-file)");
      }
      if (router_.several()) {
        return unsupported(
            "adapters are loaded at run time with one model only; with several, give them to "
            "serve with --adapter NAME=PATH");
      }
      api::BodyReader body(req.body);
      const auto name = body.string("lora_name");
      const auto path = load ? body.string("lora_path") : std::nullopt;
      double scale = 1.0;
      if (const nlohmann::json* s = body.json().contains("scale") ? &body.json()["scale"] : nullptr;
          s != nullptr && !s->is_null()) {
        if (!s->is_number()) return invalid_argument("scale: expected a number");
        scale = s->get<double>();
      }
      if (!body.status().ok()) return body.status();
      if (!name) return invalid_argument("lora_name is required (a string)");
      if (load && !path) {
        return invalid_argument("lora_path is required (a string)");
      }
      protocol::Request q;
      q.type = load ? protocol::RequestType::kLoadAdapter : protocol::RequestType::kUnloadAdapter;
      q.id = protocol::make_request_id();
      q.adapter = *name;
      if (load) {
        q.path = *path;
        q.scale = static_cast<float>(scale);
      }
      auto ev = engine_.query(q, 120000);
      if (!ev.ok()) return ev.status();
      if (ev->type == protocol::EventType::kError) {
        return Status(ev->code == ErrorCode::kOk ? ErrorCode::kInternal : ev->code, ev->message);
      }
      res.set_content(dump_json(json{{"object", "adapters"},
                                     {"adapter", *name},
                                     {"loaded", load},
                                     {"adapters", ev->adapters}}),
                      "application/json");
      return {};
    };
  };
  routes_->post("/v1/load_lora_adapter", adapter_route(true));
  routes_->post("/v1/unload_lora_adapter", adapter_route(false));
  routes_->get(R"(/v1/models/([^/]+))",
               [this](const http::Request& req, http::Response& res) -> RouteStatus {
                 const std::string id = req.matches[1];
                 if (router_.several()) {
                   auto list = router_.list();
                   if (!list.ok()) return list.status();
                   std::string names;
                   for (const json& m : served_objects(*list)) {
                     if (m.value("id", "") == id) {
                       res.set_content(dump_json(m), "application/json");
                       return {};
                     }
                     names += (names.empty() ? "'" : ", '") + m.value("id", "") + "'";
                   }
                   return not_found("model '" + id + "' is not served here; this server " +
                                    "serves " + names + " (GET /v1/models)");
                 }
                 const std::string name = model_name();
                 for (const std::string& a : served_adapters()) {
                   if (id == a || id == name + ":" + a) {
                     res.set_content(dump_json(adapter_object(a, name)), "application/json");
                     return {};
                   }
                 }
                 if (id != name) {
                   return not_found("model '" + id + "' is not served here; this server " +
                                    "serves '" + name + "' (GET /v1/models)");
                 }
                 res.set_content(dump_json(model_object(name)), "application/json");
                 return {};
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
    // The page's picker: each model, then its adapters with their parent (docs/adapters.md).
    json models = json::array();
    for (const json& m : (*list)["models"]) {
      json entry = m;
      entry.erase("socket");
      entry.erase("adapters");
      models.push_back(std::move(entry));
      for (const json& a : m.value("adapters", json::array())) {
        models.push_back({{"name", a.value("name", "")},
                          {"state", m.value("state", "unloaded")},
                          {"parent", m.value("name", "")}});
      }
    }
    j["models"] = std::move(models);
  } else {
    j["status"] = "down";
    j["error"] = list.status().message();
  }
  res.status = list.ok() ? 200 : 503;
  res.set_header("Cache-Control", "no-store");
  res.set_content(dump_json(j), "application/json");
}

}  // namespace glm::gateway
