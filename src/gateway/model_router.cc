#include "gateway/model_router.h"

#include "core/json.h"
#include "core/unix_socket.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;

// Serve answers an ensure within its own bound (serve --load-wait); this one only guards against
// a serve that stopped answering without closing the socket.
constexpr int kEnsureTimeoutMs = 60 * 60 * 1000;
constexpr int kListTimeoutMs = 3000;

Status unavailable(std::string message) {
  return Status(ErrorCode::kUnavailable, std::move(message));
}

}  // namespace

StatusOr<json> ModelRouter::ask(const json& request, int timeout_ms) const {
  auto reply = ask_unix(control_socket_, dump_json(request) + "\n", timeout_ms, 16 << 20);
  if (!reply.ok()) {
    return unavailable("glmserve serve does not answer on its control socket " + control_socket_ +
                       " (is it running?); retry in a moment (" + reply.status().message() + ")");
  }
  auto parsed = parse_json(*reply, "serve's control reply");
  if (!parsed.ok() || !parsed->is_object()) {
    return Status(ErrorCode::kInternal, "unreadable reply from serve's control");
  }
  json j = std::move(parsed).value();
  if (!j.value("ok", false)) {
    return Status(error_code_from_name(j.value("code", "internal")), j.value("message", ""));
  }
  return j;
}

StatusOr<EngineClient> ModelRouter::engine_for(const std::string& model) const {
  auto route = route_for(model);
  if (!route.ok()) return route.status();
  return route->engine;
}

StatusOr<ModelRouter::Route> ModelRouter::route_for(const std::string& model) const {
  if (!several()) return Route{EngineClient(default_socket_), ""};
  auto reply = ask(json{{"type", "ensure"}, {"model", model}}, kEnsureTimeoutMs);
  if (!reply.ok()) return reply.status();
  return Route{EngineClient(reply->value("socket", "")), reply->value("adapter", "")};
}

StatusOr<json> ModelRouter::list() const {
  if (!several()) return invalid_argument("one engine: no model list");
  return ask(json{{"type", "models"}}, kListTimeoutMs);
}

}  // namespace glm::gateway
