#include "api/responses.h"

#include "core/json.h"
#include "protocol/sampling_json.h"

namespace glm::api {
namespace {

using json = nlohmann::json;

Status bad(const std::string& message) { return invalid_argument(message); }

// An item's content: a string, or parts of type input_text / output_text (text only).
StatusOr<std::string> read_item_content(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return bad(where + " must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    const bool text_part =
        part.is_object() && part.contains("type") &&
        (part["type"] == "input_text" || part["type"] == "output_text" || part["type"] == "text") &&
        part.contains("text") && part["text"].is_string();
    if (!text_part) {
      return bad(where +
                 ": only text parts ({\"type\":\"input_text\",\"text\":...}) are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

Status read_input(const json& input, std::vector<protocol::Message>* out) {
  if (input.is_string()) {
    out->push_back({"user", input.get<std::string>(), ""});
    return Status::Ok();
  }
  if (!input.is_array() || input.empty()) {
    return bad("input must be a string or a non-empty array of message items");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return bad(where + " must be an object");
    if (auto t = item.find("type"); t != item.end() && *t != "message") {
      return bad(where + ".type: only message items are supported, got " + t->dump());
    }
    auto role = item.find("role");
    if (role == item.end() || !role->is_string()) return bad(where + ".role must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant") {
      return bad(where + ".role must be user, assistant, system or developer, got '" + r + "'");
    }
    auto content = item.find("content");
    if (content == item.end()) return bad(where + ".content is required");
    auto text = read_item_content(*content, where + ".content");
    if (!text.ok()) return text.status();
    out->push_back({r, std::move(text).value(), ""});
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ResponsesRequest> parse_responses_request(const std::string& body_text) {
  auto parsed = parse_json(body_text, "the request body");
  if (!parsed.ok()) return parsed.status();
  const json& body = *parsed;
  if (!body.is_object()) return bad("the request body must be a JSON object (the Responses API)");
  ResponsesRequest out;
  out.request.type = protocol::RequestType::kGenerate;
  auto str = [&](const char* key, std::string* dst) -> Status {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return Status::Ok();
    if (!it->is_string()) return bad(std::string(key) + " must be a string");
    *dst = it->get<std::string>();
    return Status::Ok();
  };
  auto boolean = [&](const char* key, bool* dst) -> Status {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return Status::Ok();
    if (!it->is_boolean()) return bad(std::string(key) + " must be true or false");
    *dst = it->get<bool>();
    return Status::Ok();
  };
  GLM_RETURN_IF_ERROR(str("model", &out.model));
  GLM_RETURN_IF_ERROR(str("instructions", &out.instructions));
  GLM_RETURN_IF_ERROR(str("previous_response_id", &out.previous_response_id));
  GLM_RETURN_IF_ERROR(boolean("stream", &out.stream));
  GLM_RETURN_IF_ERROR(boolean("store", &out.store));
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) return bad("input is required");
  GLM_RETURN_IF_ERROR(read_input(*input, &out.request.messages));
  if (auto it = body.find("tools"); it != body.end() && !it->is_null() && !it->empty()) {
    return bad("tools are not supported on /v1/responses yet: use /v1/chat/completions");
  }
  bool background = false;
  GLM_RETURN_IF_ERROR(boolean("background", &background));
  if (background) return bad("background is not supported: responses are generated at once");
  if (auto it = body.find("truncation"); it != body.end() && !it->is_null() && *it != "disabled") {
    return bad("truncation must be \"disabled\" (a conversation that does not fit is an error)");
  }
  // Sampling: temperature, top_p, ... and max_output_tokens (the one mapping's alias).
  GLM_RETURN_IF_ERROR(protocol::read_sampling(body, "", &out.request.params));
  return out;
}

std::string messages_to_json(const std::vector<protocol::Message>& messages) {
  json out = json::array();
  for (const protocol::Message& m : messages) {
    out.push_back({{"role", m.role}, {"content", m.content}});
  }
  return dump_json(out);
}

StatusOr<std::vector<protocol::Message>> messages_from_json(const std::string& text) {
  auto parsed = parse_json(text, "a stored response's messages");
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_array()) return Status(ErrorCode::kInternal, "a stored response is damaged");
  std::vector<protocol::Message> out;
  for (const json& m : *parsed) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return Status(ErrorCode::kInternal, "a stored response is damaged");
    }
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>(), ""});
  }
  return out;
}

json reasoning_item_json(const ResponseInfo& info, const std::string& reasoning, bool done) {
  const std::string& m = info.message_id;
  json item = {{"type", "reasoning"},
               {"id", "rs_" + (m.rfind("msg_", 0) == 0 ? m.substr(4) : m)},
               {"summary", json::array()},
               {"content", json::array()}};
  if (done) {
    item["content"].push_back({{"type", "reasoning_text"}, {"text", reasoning}});
    item["status"] = "completed";
  } else {
    item["status"] = "in_progress";
  }
  return item;
}

json response_json(const ResponseInfo& info, const std::string& text, const Outcome* outcome,
                   const protocol::Usage& usage, const std::string& reasoning) {
  const bool done = outcome != nullptr;
  const bool incomplete = done && *outcome == Outcome::kLength;
  json output = json::array();
  if (done && !reasoning.empty()) output.push_back(reasoning_item_json(info, reasoning, true));
  if (done) {
    output.push_back({{"type", "message"},
                      {"id", info.message_id},
                      {"status", incomplete ? "incomplete" : "completed"},
                      {"role", "assistant"},
                      {"content", json::array({{{"type", "output_text"},
                                                {"text", text},
                                                {"annotations", json::array()}}})}});
  }
  json j = {
      {"id", info.id},
      {"object", "response"},
      {"created_at", info.created_at},
      {"status", !done        ? "in_progress"
                 : incomplete ? "incomplete"
                              : "completed"},
      {"error", nullptr},
      {"incomplete_details", incomplete ? json{{"reason", "max_output_tokens"}} : json()},
      {"instructions", info.instructions.empty() ? json() : json(info.instructions)},
      {"max_output_tokens", info.params != nullptr ? json(info.params->max_tokens) : json()},
      {"model", info.model},
      {"output", std::move(output)},
      {"parallel_tool_calls", false},
      {"previous_response_id",
       info.previous_response_id.empty() ? json() : json(info.previous_response_id)},
      {"store", info.store},
      {"temperature", info.params != nullptr ? json(info.params->temperature) : json()},
      {"top_p", info.params != nullptr ? json(info.params->top_p) : json()},
      {"text", {{"format", {{"type", "text"}}}}},
      {"tool_choice", "auto"},
      {"tools", json::array()},
      {"truncation", "disabled"},
      {"metadata", json::object()},
  };
  j["usage"] = done ? json{{"input_tokens", usage.prompt_tokens},
                           {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
                           {"output_tokens", usage.completion_tokens},
                           {"output_tokens_details", {{"reasoning_tokens", 0}}},
                           {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}
                    : json();
  return j;
}

std::string response_event(const char* type, json data, int* sequence_number) {
  data["type"] = type;
  data["sequence_number"] = (*sequence_number)++;
  return std::string("event: ") + type + "\ndata: " + dump_json(data) + "\n\n";
}

}  // namespace glm::api
