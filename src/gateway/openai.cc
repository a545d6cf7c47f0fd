#include "gateway/openai.h"

#include <nlohmann/json.hpp>

namespace glm::gateway {
namespace {

using json = nlohmann::json;

Status bad(const std::string& message) { return invalid_argument(message); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Reads an optional number field in [lo, hi].
Status read_number(const json& body, const char* name, double lo, double hi,
                   std::optional<double>* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return bad(std::string(name) + " must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    return bad(std::string(name) + " must be between " + json(lo).dump() + " and " +
               json(hi).dump() + ", got " + it->dump());
  }
  *out = v;
  return Status::Ok();
}

// OpenAI content is a string or an array of parts; only text parts are supported.
StatusOr<std::string> read_content(const json& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return bad(where + " must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.find("type") == part.end() || part["type"] != "text" ||
        !part.contains("text") ||
        !part["text"].is_string()) {
      return bad(where + ": only {\"type\":\"text\",\"text\":...} parts are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

StatusOr<ChatCompletionRequest> parse_chat_completion(const std::string& body_text) {
  json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return bad("the request body must be a JSON object (see the OpenAI chat completions API)");
  }
  ChatCompletionRequest out;
  out.request.type = protocol::RequestType::kGenerate;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad("model must be a string");
    out.model = it->get<std::string>();
  }
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return bad("messages must be a non-empty array of {\"role\",\"content\"} objects");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(where + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return bad(where + ".role must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role == "tool") role = "observation";
    if (role != "system" && role != "user" && role != "assistant" && role != "observation") {
      return bad(where + ".role must be system, user, assistant or tool, got '" + role + "'");
    }
    auto content = read_content(m.contains("content") ? m["content"] : json(), i);
    if (!content.ok()) return content.status();
    out.request.messages.push_back({role, std::move(content).value(), ""});
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("stream must be true or false");
    out.stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
    auto usage = it->find("include_usage");
    if (usage != it->end() && !usage->is_null()) {
      if (!usage->is_boolean()) return bad("stream_options.include_usage must be true or false");
      out.include_usage = usage->get<bool>();
    }
  }
  if (auto it = body.find("n"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != 1) {
      return bad("n must be 1 (one answer per request)");
    }
  }
  protocol::Params& p = out.request.params;
  GLM_RETURN_IF_ERROR(read_number(body, "temperature", 0, 2, &p.temperature));
  std::optional<double> top_p;
  GLM_RETURN_IF_ERROR(read_number(body, "top_p", 0, 1, &top_p));
  if (top_p) {
    if (*top_p <= 0) return bad("top_p must be greater than 0");
    p.top_p = top_p;
  }
  std::optional<double> rep;
  GLM_RETURN_IF_ERROR(read_number(body, "repetition_penalty", 0.01, 10, &rep));
  p.repetition_penalty = rep;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1048576) {
      return bad(std::string(name) + " must be an integer between 1 and 1048576");
    }
    p.max_tokens = static_cast<int>(it->get<int64_t>());
  }
  if (auto it = body.find("top_k"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1000) {
      return bad("top_k must be an integer between 0 and 1000");
    }
    p.top_k = static_cast<int>(it->get<int64_t>());
  }
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      return bad("seed must be a non-negative integer");
    }
    p.seed = it->get<uint64_t>();
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      p.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const json& s : *it) {
        if (!s.is_string()) return bad("stop must be a string or an array of strings");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad("stop must be a string or an array of strings");
    }
  }
  // glmserve extension: KV reuse across the turns of one conversation.
  if (auto it = body.find("conversation"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad("conversation must be a string");
    out.request.conversation = it->get<std::string>();
  }
  return out;
}

const char* openai_error_type(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kContextOverflow:
    case ErrorCode::kNotFound:
    case ErrorCode::kUnsupported:
      return "invalid_request_error";
    case ErrorCode::kUnauthorized:
      return "authentication_error";
    case ErrorCode::kQueueFull:
      return "rate_limit_error";
    case ErrorCode::kUnavailable:
    case ErrorCode::kOutOfMemory:
      return "service_unavailable";
    default:
      return "server_error";
  }
}

std::string openai_error_json(const Status& status) {
  json j = {{"error",
             {{"message", status.message()},
              {"type", openai_error_type(status.code())},
              {"param", nullptr},
              {"code", error_code_name(status.code())}}}};
  return dump(j);
}

std::string openai_finish_reason(const std::string& engine_reason) {
  return engine_reason == "length" ? "length" : "stop";
}

std::string completion_chunk_json(const std::string& id, int64_t created,
                                  const std::string& model, const std::string* content,
                                  bool role, const std::string& finish_reason) {
  json delta = json::object();
  if (role) delta["role"] = "assistant";
  if (content) delta["content"] = *content;
  json choice = {{"index", 0}, {"delta", delta}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish_reason.empty() ? json() : json(finish_reason);
  json j = {{"id", id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model},
            {"system_fingerprint", nullptr},
            {"choices", json::array({choice})}};
  return dump(j);
}

std::string usage_chunk_json(const std::string& id, int64_t created, const std::string& model,
                             const protocol::Usage& usage) {
  json j = {{"id", id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model},
            {"choices", json::array()},
            {"usage",
             {{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}}}};
  return dump(j);
}

std::string completion_json(const std::string& id, int64_t created, const std::string& model,
                            const std::string& content, const std::string& finish_reason,
                            const protocol::Usage& usage) {
  json j = {
      {"id", id},
      {"object", "chat.completion"},
      {"created", created},
      {"model", model},
      {"system_fingerprint", nullptr},
      {"choices",
       json::array({{{"index", 0},
                     {"message", {{"role", "assistant"}, {"content", content}}},
                     {"logprobs", nullptr},
                     {"finish_reason", finish_reason}}})},
      {"usage",
       {{"prompt_tokens", usage.prompt_tokens},
        {"completion_tokens", usage.completion_tokens},
        {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
        {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}}}};
  return dump(j);
}

}  // namespace glm::gateway
