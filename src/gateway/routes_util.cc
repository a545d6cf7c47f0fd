// Utility routes, as llama-server offers them: POST /tokenize, POST /detokenize and
// POST /apply-template (the prompt text and ids the engine would prefill for a chat completions
// body), and Anthropic's POST /v1/messages/count_tokens. Each is one engine query (the engine
// owns the tokenizer and the chat template), behind the same key and JSON checks as /v1.
#include <nlohmann/json.hpp>

#include "api/anthropic.h"
#include "api/body.h"
#include "api/openai.h"
#include "core/json.h"
#include "gateway/gateway.h"

namespace glm::gateway {
namespace {

using json = nlohmann::json;

constexpr int kQueryTimeoutMs = 10000;
constexpr size_t kMaxDetokenize = 1 << 20;  // ids per /detokenize request

}  // namespace

StatusOr<protocol::Event> Gateway::query_tokens(const protocol::Request& request,
                                                const std::string& model) {
  auto engine = router_.engine_for(model);
  if (!engine.ok()) return engine.status();
  auto ev = engine->query(request, kQueryTimeoutMs);
  if (!ev.ok()) return ev.status();
  if (ev->type == protocol::EventType::kError) {
    return Status(ev->code == ErrorCode::kOk ? ErrorCode::kInternal : ev->code, ev->message);
  }
  if (ev->type != protocol::EventType::kTokens) {
    return Status(ErrorCode::kInternal, "the engine answered a tokens query with another event");
  }
  return ev;
}

void Gateway::install_util_routes() {
  // {"content":"text"} -> {"tokens":[ids]} (no special tokens added).
  routes_->post("/tokenize", [this](const http::Request& req, http::Response& res) -> RouteStatus {
    api::BodyReader body(req.body);
    const auto content = body.string("content");
    if (!body.status().ok()) return body.status();
    if (!content) return invalid_argument("content is required (a string)");
    protocol::Request q;
    q.type = protocol::RequestType::kTokenize;
    q.id = protocol::make_request_id();
    q.text = *content;
    auto ev = query_tokens(q);
    if (!ev.ok()) return ev.status();
    res.set_content(dump_json(json{{"tokens", ev->tokens}}), "application/json");
    return {};
  });

  // {"tokens":[ids]} -> {"content":"text"} (special tokens as their text).
  routes_->post(
      "/detokenize", [this](const http::Request& req, http::Response& res) -> RouteStatus {
        api::BodyReader body(req.body);
        if (!body.status().ok()) return body.status();
        const json& j = body.json();
        auto it = j.find("tokens");
        if (it == j.end() || !it->is_array()) {
          return invalid_argument("tokens is required (an array of token ids)");
        }
        if (it->size() > kMaxDetokenize) {
          return invalid_argument("tokens: at most " + std::to_string(kMaxDetokenize) + " ids");
        }
        protocol::Request q;
        q.type = protocol::RequestType::kDetokenize;
        q.id = protocol::make_request_id();
        for (const json& t : *it) {
          if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
            return invalid_argument("tokens: expected non-negative integer ids");
          }
          q.tokens.push_back(t.get<int32_t>());
        }
        auto ev = query_tokens(q);
        if (!ev.ok()) return ev.status();
        res.set_content(dump_json(json{{"content", ev->text}}), "application/json");
        return {};
      });

  // A chat completions body -> {"prompt":"text","tokens":[ids]}: what the engine would prefill.
  routes_->post("/apply-template",
                [this](const http::Request& req, http::Response& res) -> RouteStatus {
                  auto parsed = api::parse_chat_completion(req.body);
                  if (!parsed.ok()) return parsed.status();
                  protocol::Request q = std::move(parsed->request);
                  q.type = protocol::RequestType::kPrompt;
                  q.id = protocol::make_request_id();
                  auto ev = query_tokens(q, parsed->model);
                  if (!ev.ok()) return ev.status();
                  res.set_content(dump_json(json{{"prompt", ev->text}, {"tokens", ev->tokens}}),
                                  "application/json");
                  return {};
                });

  // Anthropic: a Messages body (max_tokens optional here) -> {"input_tokens":N}.
  routes_->post(
      "/v1/messages/count_tokens",
      [this](const http::Request& req, http::Response& res) -> RouteStatus {
        api::BodyReader body(req.body);
        if (!body.status().ok()) return body.status();
        json j = body.json();
        if (!j.contains("max_tokens")) j["max_tokens"] = 1;  // not part of this route's body
        auto parsed = api::parse_messages_request(dump_json(j));
        if (!parsed.ok()) return parsed.status();
        protocol::Request q = std::move(parsed->request);
        q.type = protocol::RequestType::kPrompt;
        q.id = protocol::make_request_id();
        auto ev = query_tokens(q, parsed->model);
        if (!ev.ok()) return ev.status();
        res.set_content(dump_json(json{{"input_tokens", ev->tokens.size()}}), "application/json");
        return {};
      },
      ErrorFormat::kAnthropic);
}

}  // namespace glm::gateway
