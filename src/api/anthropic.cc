#include "api/anthropic.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "protocol/sampling_json.h"

namespace glm::api {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

Status bad(const std::string& message) { return invalid_argument(message); }

// Content: a string, or blocks. Text blocks join into one message; tool_use blocks (assistant)
// become calls, tool_result blocks (user) observations, each in the order written.
Status read_content(const ojson& content, const std::string& role, const std::string& where,
                    std::vector<protocol::Message>* out) {
  if (content.is_string()) {
    out->push_back({role, content.get<std::string>(), ""});
    return Status::Ok();
  }
  if (!content.is_array()) return bad(where + " must be a string or an array of content blocks");
  std::string text;
  auto flush_text = [&] {
    if (!text.empty()) out->push_back({role, std::move(text), ""});
    text.clear();
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& b = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) {
      return bad(at + " must be a content block {\"type\", ...}");
    }
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string()) return bad(at + ".text must be a string");
      text += b["text"].get<std::string>();
    } else if (type == "tool_use" && role == "assistant") {
      if (!b.contains("name") || !b["name"].is_string()) return bad(at + ".name must be a string");
      const ojson input = b.contains("input") ? b["input"] : ojson::object();
      if (!input.is_object()) return bad(at + ".input must be an object");
      flush_text();
      protocol::Message m{"assistant", "", b["name"].get<std::string>()};
      m.arguments = dump_json(input);
      out->push_back(std::move(m));
    } else if (type == "tool_result" && role == "user") {
      flush_text();
      std::string result;
      if (auto c = b.find("content"); c != b.end() && !c->is_null()) {
        if (c->is_string()) {
          result = c->get<std::string>();
        } else if (c->is_array()) {
          for (const ojson& part : *c) {
            if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
                !part["text"].is_string()) {
              return bad(at + ".content: only text blocks are supported");
            }
            result += part["text"].get<std::string>();
          }
        } else {
          return bad(at + ".content must be a string or text blocks");
        }
      }
      out->push_back({"observation", std::move(result), ""});
    } else {
      return bad(at + ".type '" + type + "' is not supported here (text" +
                 (role == "assistant" ? ", tool_use" : ", tool_result") + ")");
    }
  }
  flush_text();
  return Status::Ok();
}

// tools [{name, description, input_schema}] and tool_choice {type: auto|any|tool|none}.
Status read_tools(const ojson& body, MessagesRequest* out) {
  auto tools_it = body.find("tools");
  if (tools_it == body.end() || tools_it->is_null()) {
    if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
      return bad("tool_choice needs tools");
    }
    return Status::Ok();
  }
  if (!tools_it->is_array()) return bad("tools must be an array of {name, input_schema}");
  if (tools_it->empty()) return Status::Ok();
  ojson functions = ojson::array();
  std::vector<std::string> names;
  for (size_t i = 0; i < (*tools_it).size(); ++i) {
    const ojson& t = (*tools_it)[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return bad(at + " must be an object {name, description, input_schema}");
    if (t.contains("type") && t["type"] != "custom") {
      return bad(at + ".type: only client tools (custom) are supported");
    }
    // As a function object, in the client's key order (input_schema -> parameters).
    ojson f = ojson::object();
    for (const auto& [k, v] : t.items()) {
      if (k == "input_schema") {
        f["parameters"] = v;
      } else if (k == "name" || k == "description") {
        f[k] = v;
      }
    }
    GLM_RETURN_IF_ERROR(check_function(f, at, "input_schema"));
    const std::string name = f["name"].get<std::string>();
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return bad(at + ".name '" + name + "' is given twice");
    }
    names.push_back(name);
    functions.push_back(std::move(f));
  }
  std::string forced;
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    if (!c->is_object() || !c->contains("type") || !(*c)["type"].is_string()) {
      return bad("tool_choice must be {\"type\":\"auto\"|\"any\"|\"tool\"|\"none\"}");
    }
    const std::string type = (*c)["type"].get<std::string>();
    if (type == "none") return Status::Ok();
    if (auto d = c->find("disable_parallel_tool_use"); d != c->end() && !d->is_null()) {
      if (!d->is_boolean())
        return bad("tool_choice.disable_parallel_tool_use must be true or false");
      out->request.parallel_tool_calls = !d->get<bool>();
    }
    if (type == "any") {
      forced = "*";
    } else if (type == "tool") {
      if (!c->contains("name") || !(*c)["name"].is_string()) {
        return bad("tool_choice.name must name one of the tools");
      }
      forced = (*c)["name"].get<std::string>();
      if (std::find(names.begin(), names.end(), forced) == names.end()) {
        return bad("tool_choice.name '" + forced + "' is not one of the tools");
      }
    } else if (type != "auto") {
      return bad("tool_choice.type must be auto, any, tool or none, got '" + type + "'");
    }
  }
  return set_tools(functions, forced, &out->request, &out->tool_names);
}

std::string event(const char* name, const json& data) {
  return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
}

// Anthropic's split of the input: input_tokens are those not read from a cache,
// cache_read_input_tokens those read (the prompt is their sum; OpenAI's prompt_tokens counts both).
json usage_json(const protocol::Usage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"output_tokens", u.completion_tokens},
          {"cache_read_input_tokens", u.cached_tokens}};
}

std::string unique_part(const std::string& request_id) {
  const size_t p = request_id.find("req-");
  return p == std::string::npos ? request_id : request_id.substr(p + 4);
}

}  // namespace

StatusOr<MessagesRequest> parse_messages_request(const std::string& body_text) {
  auto parsed = parse_ordered_json(body_text, "the request body");
  if (!parsed.ok()) return parsed.status();
  const ojson& body = *parsed;
  if (!body.is_object()) return bad("the request body must be a JSON object (the Messages API)");
  MessagesRequest out;
  out.request.type = protocol::RequestType::kGenerate;
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return bad("model must be a string");
    out.model = it->get<std::string>();
  }
  auto max_tokens = body.find("max_tokens");
  if (max_tokens == body.end() || !max_tokens->is_number_integer()) {
    return bad("max_tokens is required: the most tokens to generate (an integer)");
  }
  if (auto sys = body.find("system"); sys != body.end() && !sys->is_null()) {
    std::vector<protocol::Message> system;
    GLM_RETURN_IF_ERROR(read_content(*sys, "system", "system", &system));
    for (auto& m : system) out.request.messages.push_back(std::move(m));
  }
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return bad("messages must be a non-empty array of {\"role\",\"content\"}");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return bad(where + " must be {\"role\":\"user\"|\"assistant\",\"content\"}");
    }
    const std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant") {
      return bad(where + ".role must be user or assistant, got '" + role + "'");
    }
    if (!m.contains("content")) return bad(where + ".content is required");
    GLM_RETURN_IF_ERROR(
        read_content(m["content"], role, where + ".content", &out.request.messages));
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("stream must be true or false");
    out.stream = it->get<bool>();
  }
  // Sampling through the one mapping (Anthropic's temperature range is [0, 1]).
  if (auto t = body.find("temperature");
      t != body.end() && t->is_number() && (t->get<double>() < 0 || t->get<double>() > 1)) {
    return bad("temperature must be between 0 and 1");
  }
  ojson sampling = ojson::object();
  for (const char* k : {"temperature", "top_p", "top_k", "max_tokens"}) {
    if (body.contains(k)) sampling[k] = body[k];
  }
  if (body.contains("stop_sequences")) sampling["stop"] = body["stop_sequences"];
  GLM_RETURN_IF_ERROR(protocol::read_sampling(sampling, "", &out.request.params));
  // thinking: {"type":"disabled"} -> the template's enable_thinking false (a hybrid reasoning
  // model answers without thinking); {"type":"enabled","budget_tokens":N} -> the model's own
  // thinking (the budget is not enforced: max_tokens bounds the whole answer).
  if (auto t = body.find("thinking"); t != body.end() && !t->is_null()) {
    std::string type;  // a "type" that is not a string is no type
    if (t->is_object()) {
      if (auto ty = t->find("type"); ty != t->end() && ty->is_string())
        type = ty->get<std::string>();
    }
    if (type != "enabled" && type != "disabled") {
      return bad(
          "thinking must be {\"type\":\"enabled\",\"budget_tokens\":N} or "
          "{\"type\":\"disabled\"}");
    }
    out.request.enable_thinking = type == "enabled";
  }
  GLM_RETURN_IF_ERROR(read_tools(body, &out));
  return out;
}

std::string anthropic_error_json(const Status& status) {
  const char* type = "api_error";
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kContextOverflow:
    case ErrorCode::kUnsupported:
      type = "invalid_request_error";
      break;
    case ErrorCode::kUnauthorized:
      type = "authentication_error";
      break;
    case ErrorCode::kNotFound:
      type = "not_found_error";
      break;
    case ErrorCode::kQueueFull:
      type = "rate_limit_error";
      break;
    case ErrorCode::kUnavailable:
    case ErrorCode::kOutOfMemory:
      type = "overloaded_error";
      break;
    default:
      break;
  }
  return dump_json(
      json{{"type", "error"}, {"error", {{"type", type}, {"message", status.message()}}}});
}

std::string anthropic_stop_reason(Outcome outcome, bool tool_call) {
  if (outcome == Outcome::kLength) return "max_tokens";
  return tool_call ? "tool_use" : "end_turn";
}

std::string anthropic_message_json(const MessageOut& m) {
  json content = json::array();
  if (!m.thinking.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", m.thinking}, {"signature", ""}});
  }
  if (!m.text.empty() || m.calls.empty()) content.push_back({{"type", "text"}, {"text", m.text}});
  for (const MessageOut::ToolUse& call : m.calls) {
    json input = json::parse(call.arguments, nullptr, false);
    if (!input.is_object()) input = json::object();  // arguments that did not parse
    content.push_back(
        {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", input}});
  }
  return dump_json(json{{"id", m.id},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", m.model},
                        {"content", content},
                        {"stop_reason", m.stop_reason},
                        {"stop_sequence", nullptr},
                        {"usage", usage_json(m.usage)}});
}

std::string MessagesStream::start(const protocol::Usage& usage) const {
  protocol::Usage u = usage;
  u.completion_tokens = 0;
  return event("message_start", {{"type", "message_start"},
                                 {"message",
                                  {{"id", id_},
                                   {"type", "message"},
                                   {"role", "assistant"},
                                   {"model", model_},
                                   {"content", json::array()},
                                   {"stop_reason", nullptr},
                                   {"stop_sequence", nullptr},
                                   {"usage", usage_json(u)}}}});
}

std::string MessagesStream::open_block(Block kind, json block) {
  std::string out = close_block();
  ++index_;
  open_ = kind;
  out += event(
      "content_block_start",
      {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
  return out;
}

std::string MessagesStream::close_block() {
  if (open_ == Block::kNone) return "";
  open_ = Block::kNone;
  return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string MessagesStream::thinking(const std::string& text) {
  std::string out;
  if (open_ != Block::kThinking) {
    out +=
        open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
  }
  out +=
      event("content_block_delta", {{"type", "content_block_delta"},
                                    {"index", index_},
                                    {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}});
  return out;
}

std::string MessagesStream::delta(const ToolDelta& d) {
  std::string out;
  switch (d.kind) {
    case ToolDelta::Kind::kContent:
    case ToolDelta::Kind::kCutCall:  // text (ToolAnswerStream sends one only as text)
      if (open_ != Block::kText) out += open_block(Block::kText, {{"type", "text"}, {"text", ""}});
      out += event("content_block_delta", {{"type", "content_block_delta"},
                                           {"index", index_},
                                           {"delta", {{"type", "text_delta"}, {"text", d.text}}}});
      break;
    case ToolDelta::Kind::kCallStart: {
      // The message id's unique part ("msg_" + it: message_id) names its tool_use blocks.
      const std::string id = tool_use_id(id_.rfind("msg_", 0) == 0 ? id_.substr(4) : id_, calls_++);
      out += open_block(
          Block::kToolUse,
          {{"type", "tool_use"}, {"id", id}, {"name", d.text}, {"input", json::object()}});
    } break;
    case ToolDelta::Kind::kArguments:
      out += event("content_block_delta",
                   {{"type", "content_block_delta"},
                    {"index", index_},
                    {"delta", {{"type", "input_json_delta"}, {"partial_json", d.text}}}});
      break;
  }
  return out;
}

std::string MessagesStream::finish(const std::string& stop_reason, const protocol::Usage& usage) {
  std::string out;
  // An answer without text (empty, or thinking only) still has its (empty) text block.
  if (index_ < 0 || open_ == Block::kThinking) {
    out += open_block(Block::kText, {{"type", "text"}, {"text", ""}});
  }
  out += close_block();
  out +=
      event("message_delta", {{"type", "message_delta"},
                              {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", nullptr}}},
                              {"usage", {{"output_tokens", usage.completion_tokens}}}});
  out += event("message_stop", {{"type", "message_stop"}});
  return out;
}

std::string MessagesStream::error(const Status& status) {
  return "event: error\ndata: " + anthropic_error_json(status) + "\n\n";
}

std::string message_id(const std::string& request_id) { return "msg_" + unique_part(request_id); }
std::string tool_use_id(const std::string& request_id, int call_index) {
  std::string id = "toolu_" + unique_part(request_id);
  if (call_index > 0) id += "_" + std::to_string(call_index);
  return id;
}

}  // namespace glm::api
