// Request lines: parse + validate, and serialize (protocol.h).
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/utf8.h"
#include "protocol/protocol.h"
#include "protocol/sampling_json.h"

namespace glm::protocol {
namespace {

// Request lines are parsed once, keeping the keys in the client's order (tool and schema
// properties are written into prompts and grammars in that order).
using json = nlohmann::ordered_json;

constexpr const char* kRoles[] = {"system", "user", "assistant", "observation"};

Status field_error(const std::string& field, const std::string& what) {
  return invalid_argument("field '" + field + "': " + what);
}

StatusOr<std::string> get_string(const json& j, const std::string& field, size_t max_bytes) {
  if (!j.is_string()) return field_error(field, "expected a string");
  const auto& s = j.get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return field_error(field, "is " + std::to_string(s.size()) + " bytes; the limit is " +
                                  std::to_string(max_bytes));
  }
  return s;
}

StatusOr<std::string> get_id(const json& j, const std::string& field, const Limits& limits) {
  if (!j.is_string()) return field_error(field, "expected a string");
  const auto& s = j.get_ref<const std::string&>();
  GLM_RETURN_IF_ERROR(check_id(s, field, limits));
  return s;
}

StatusOr<int> get_int(const json& j, const std::string& field, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) return field_error(field, "expected an integer");
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return field_error(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "], got " + j.dump());
  }
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) {
    return field_error(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "], got " + std::to_string(v));
  }
  return static_cast<int>(v);
}

// Sampling fields of `p`; in the "params" object (prefix "params.") every key must be one.
Status parse_params(const json& p, const std::string& prefix, SamplingParams* out) {
  for (const auto& [key, value] : p.items()) {
    bool known = false;
    GLM_RETURN_IF_ERROR(read_sampling_field(key, value, prefix, out, &known));
    if (!known && !prefix.empty()) {
      return field_error(prefix + key, "unknown parameter (known: " + sampling_field_names() + ")");
    }
  }
  return Status::Ok();
}

Status parse_message(const json& m, size_t index, Message* out) {
  const std::string field = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return field_error(field, "expected an object {\"role\",\"content\"}");
  for (const auto& [key, value] : m.items()) {
    if (key == "role") {
      if (!value.is_string()) return field_error(field + ".role", "expected a string");
      out->role = value.get<std::string>();
      bool known = false;
      for (const char* r : kRoles) known = known || out->role == r;
      if (!known) {
        return field_error(field + ".role", "'" + out->role +
                                                "' is not one of system, user, assistant, "
                                                "observation");
      }
    } else if (key == "content") {
      if (!value.is_string()) return field_error(field + ".content", "expected a string");
      out->content = value.get<std::string>();
    } else if (key == "metadata") {
      if (!value.is_string()) return field_error(field + ".metadata", "expected a string");
      out->metadata = value.get<std::string>();
    } else if (key == "arguments") {
      if (!value.is_string()) {
        return field_error(field + ".arguments", "expected a string (JSON object text)");
      }
      out->arguments = value.get<std::string>();
    } else {
      return field_error(field + "." + key,
                         "unknown key (known: role, content, metadata, arguments)");
    }
  }
  if (out->role.empty()) return field_error(field + ".role", "is required");
  if (!out->arguments.empty() && (out->role != "assistant" || out->metadata.empty())) {
    return field_error(field + ".arguments",
                       "belongs to an assistant message whose metadata names the tool");
  }
  if (!m.contains("content")) return field_error(field + ".content", "is required");
  return Status::Ok();
}

// Legacy ChatGLM service shape: {"prompt": q, "history": [[q1, a1], ...]}.
Status parse_history(const json& h, std::vector<Message>* out) {
  if (!h.is_array()) return field_error("history", "expected an array of [question, answer]");
  for (size_t i = 0; i < h.size(); ++i) {
    const json& pair = h[i];
    const std::string field = "history[" + std::to_string(i) + "]";
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
      return field_error(field, "expected [question, answer], two strings");
    }
    out->push_back({"user", pair[0].get<std::string>(), ""});
    out->push_back({"assistant", pair[1].get<std::string>(), ""});
  }
  return Status::Ok();
}

bool is_top_level_key(const std::string& key) {
  static const char* kKeys[] = {
      "v",          "type",    "id",     "conversation",    "messages",
      "prompt",     "history", "raw",    "params",          "text",
      "constraint", "tools",   "tokens", "resume",          "n",
      "adapter",    "path",    "scale",  "enable_thinking", "parallel_tool_calls",
      "model"};
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  // The legacy ChatGLM service shape has the sampling keys at the top level.
  if (is_sampling_field(key)) return true;
  return false;
}

// An array of function objects, each with a string "name" (`field` names it in errors).
Status check_functions(const json& tools, const std::string& field) {
  if (!tools.is_array() || tools.empty()) {
    return field_error(field, "expected a non-empty array of {\"name\",\"parameters\"} objects");
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& f = tools[i];
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() ||
        f["name"].get_ref<const std::string&>().empty()) {
      return field_error(field + "[" + std::to_string(i) + "]",
                         "expected a function object with a non-empty string name");
    }
  }
  return Status::Ok();
}

// "constraint": {"type":"gbnf","grammar":"..."} | {"type":"json_schema","schema":{...}} |
// {"type":"json_object"} | {"type":"tool_call","tools":[...]} | {"type":"none"}. Schemas keep
// the client's key order (their properties come out in that order). Whether the grammar
// compiles is the engine's check.
Status parse_constraint(const json& c, const Limits& limits, Constraint* out) {
  if (!c.is_object()) {
    return field_error("constraint",
                       "expected an object {\"type\":\"gbnf\"|\"json_schema\"|"
                       "\"json_object\", ...}");
  }
  auto type = c.find("type");
  if (type == c.end() || !type->is_string()) {
    return field_error("constraint.type", "is required: gbnf, json_schema or json_object");
  }
  if (!generation::parse_constraint_kind(type->get<std::string>(), &out->kind)) {
    return field_error("constraint.type",
                       "'" + type->get<std::string>() +
                           "' is not one of gbnf, json_schema, json_object, tool_call, "
                           "none");
  }
  for (const auto& [key, value] : c.items()) {
    const bool known = key == "type" ||
                       (key == "grammar" && out->kind == Constraint::Kind::kGbnf) ||
                       (key == "schema" && out->kind == Constraint::Kind::kJsonSchema) ||
                       (key == "tools" && out->kind == Constraint::Kind::kToolCall);
    if (!known) {
      return field_error("constraint." + key,
                         std::string("unknown key for type ") +
                             generation::constraint_kind_name(out->kind) +
                             " (gbnf takes grammar, json_schema schema, tool_call tools)");
    }
  }
  if (out->kind == Constraint::Kind::kGbnf) {
    if (!c.contains("grammar")) return field_error("constraint.grammar", "is required for gbnf");
    auto g = get_string(c["grammar"], "constraint.grammar", limits.max_line_bytes);
    if (!g.ok()) return g.status();
    if (g->empty()) return field_error("constraint.grammar", "must not be empty");
    out->text = *g;
  } else if (out->kind == Constraint::Kind::kJsonSchema) {
    if (!c.contains("schema")) {
      return field_error("constraint.schema", "is required for json_schema");
    }
    if (!c["schema"].is_object() && !c["schema"].is_boolean()) {
      return field_error("constraint.schema", "expected a JSON Schema object");
    }
    out->text = c["schema"].dump();
  } else if (out->kind == Constraint::Kind::kToolCall) {
    if (!c.contains("tools")) return field_error("constraint.tools", "is required for tool_call");
    GLM_RETURN_IF_ERROR(check_functions(c["tools"], "constraint.tools"));
    out->text = c["tools"].dump();
  }
  return Status::Ok();
}

// The fields of a generate request: conversation, raw, messages or prompt (+ history),
// sampling parameters (top level and "params"), constraint.
Status parse_generate(const json& j, const Limits& limits, Request* r) {
  if (j.contains("conversation")) {
    auto c = get_id(j["conversation"], "conversation", limits);
    if (!c.ok()) return c.status();
    r->conversation = *c;
  }
  if (j.contains("adapter")) {
    auto a = get_id(j["adapter"], "adapter", limits);
    if (!a.ok()) return a.status();
    r->adapter = *a;
  }
  if (j.contains("model")) {
    auto m = get_id(j["model"], "model", limits);
    if (!m.ok()) return m.status();
    r->model = *m;
  }
  if (j.contains("raw")) {
    if (!j["raw"].is_boolean()) return field_error("raw", "expected true or false");
    r->raw = j["raw"].get<bool>();
  }
  if (j.contains("enable_thinking")) {
    if (!j["enable_thinking"].is_boolean()) {
      return field_error("enable_thinking", "expected true or false");
    }
    r->enable_thinking = j["enable_thinking"].get<bool>();
  }
  const bool has_messages = j.contains("messages");
  const bool has_prompt = j.contains("prompt");
  if (has_messages && (has_prompt || j.contains("history"))) {
    return field_error("messages", "give either messages or prompt (+ history), not both");
  }
  if (has_messages) {
    if (r->raw) return field_error("raw", "raw needs a prompt, not messages");
    const json& m = j["messages"];
    if (!m.is_array()) return field_error("messages", "expected an array");
    if (m.empty()) return field_error("messages", "must not be empty");
    if (static_cast<int>(m.size()) > limits.max_messages) {
      return field_error("messages", "has " + std::to_string(m.size()) + " entries; the limit is " +
                                         std::to_string(limits.max_messages));
    }
    r->messages.resize(m.size());
    for (size_t i = 0; i < m.size(); ++i)
      GLM_RETURN_IF_ERROR(parse_message(m[i], i, &r->messages[i]));
  } else if (has_prompt) {
    if (!j["prompt"].is_string()) return field_error("prompt", "expected a string");
    const std::string prompt = j["prompt"].get<std::string>();
    if (r->raw) {
      if (j.contains("history")) return field_error("history", "raw prompts take no history");
      r->prompt = prompt;
    } else {
      if (j.contains("history")) GLM_RETURN_IF_ERROR(parse_history(j["history"], &r->messages));
      r->messages.push_back({"user", prompt, ""});
      if (static_cast<int>(r->messages.size()) > limits.max_messages) {
        return field_error("history", "too many turns; the limit is " +
                                          std::to_string(limits.max_messages) + " messages");
      }
    }
  } else {
    return field_error("messages",
                       "is required (or \"prompt\"); e.g. "
                       "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
  }
  if (!r->raw) {
    const std::string& last = r->messages.back().role;
    if (last != "user" && last != "observation") {
      return field_error("messages",
                         "the last message must have role user or observation, "
                         "got " +
                             last);
    }
  }
  GLM_RETURN_IF_ERROR(parse_params(j, "", &r->params));
  if (j.contains("params")) {
    if (!j["params"].is_object()) return field_error("params", "expected an object");
    GLM_RETURN_IF_ERROR(parse_params(j["params"], "params.", &r->params));
  }
  if (j.contains("constraint") && !j["constraint"].is_null()) {
    GLM_RETURN_IF_ERROR(parse_constraint(j["constraint"], limits, &r->constraint));
  }
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (r->raw) return field_error("tools", "raw prompts take no tools");
    GLM_RETURN_IF_ERROR(check_functions(j["tools"], "tools"));
    r->tools = j["tools"];
  }
  if (j.contains("parallel_tool_calls") && !j["parallel_tool_calls"].is_null()) {
    if (!j["parallel_tool_calls"].is_boolean()) {
      return field_error("parallel_tool_calls", "expected true or false");
    }
    r->parallel_tool_calls = j["parallel_tool_calls"].get<bool>();
  }
  if (j.contains("n") && !j["n"].is_null()) {
    const json& n = j["n"];
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxChoices) {
      return field_error("n", "expected the number of choices, an integer from 1 to " +
                                  std::to_string(kMaxChoices));
    }
    r->n = n.get<int>();
  }
  if (j.contains("resume") && !j["resume"].is_null()) {
    const json& ids = j["resume"];
    if (!ids.is_array()) return field_error("resume", "expected an array of token ids");
    r->resume.reserve(ids.size());
    for (const json& t : ids) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
        return field_error("resume", "expected token ids (integers >= 0)");
      }
      r->resume.push_back(t.get<int32_t>());
    }
  }
  return Status::Ok();
}

StatusOr<Request> parse_object(const json& j, const Limits& limits, std::string* id_out) {
  Request r;
  if (j.contains("id")) {
    auto id = get_id(j["id"], "id", limits);
    if (!id.ok()) return id.status();
    r.id = *id;
    if (id_out != nullptr) *id_out = r.id;
  }
  for (const auto& [key, value] : j.items()) {
    if (!is_top_level_key(key)) {
      return field_error(key,
                         "unknown key (see docs/protocol.md; sampling settings go in "
                         "\"params\")");
    }
  }
  if (j.contains("v")) {
    auto v = get_int(j["v"], "v", 1, 1 << 30);
    if (!v.ok()) return v.status();
    if (*v > kProtocolVersion) {
      return Status(ErrorCode::kUnsupported,
                    "protocol version " + std::to_string(*v) + " is newer than this engine's (" +
                        std::to_string(kProtocolVersion) + "); upgrade glmserve");
    }
  }
  if (j.contains("type")) {
    if (!j["type"].is_string()) return field_error("type", "expected a string");
    const std::string t = j["type"].get<std::string>();
    if (t == "generate")
      r.type = RequestType::kGenerate;
    else if (t == "cancel")
      r.type = RequestType::kCancel;
    else if (t == "health")
      r.type = RequestType::kHealth;
    else if (t == "stats")
      r.type = RequestType::kStats;
    else if (t == "tokenize")
      r.type = RequestType::kTokenize;
    else if (t == "detokenize")
      r.type = RequestType::kDetokenize;
    else if (t == "prompt")
      r.type = RequestType::kPrompt;
    else if (t == "load_adapter")
      r.type = RequestType::kLoadAdapter;
    else if (t == "unload_adapter")
      r.type = RequestType::kUnloadAdapter;
    else {
      return field_error("type", "'" + t +
                                     "' is not one of generate, cancel, health, stats, "
                                     "tokenize, detokenize, prompt, load_adapter, "
                                     "unload_adapter");
    }
  }
  if (r.type == RequestType::kCancel && r.id.empty()) {
    return field_error("id", "cancel needs the id of the request to cancel");
  }
  if (r.type == RequestType::kTokenize) {
    if (!j.contains("text")) return field_error("text", "tokenize needs the text");
    auto text = get_string(j["text"], "text", limits.max_line_bytes);
    if (!text.ok()) return text.status();
    r.text = *text;
  }
  if (r.type == RequestType::kDetokenize) {
    auto it = j.find("tokens");
    if (it == j.end() || !it->is_array()) {
      return field_error("tokens", "detokenize needs an array of token ids");
    }
    for (const json& t : *it) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return field_error("tokens", "expected non-negative integer token ids");
      }
      r.tokens.push_back(t.get<int32_t>());
    }
  }
  if (r.type == RequestType::kGenerate || r.type == RequestType::kPrompt) {
    GLM_RETURN_IF_ERROR(parse_generate(j, limits, &r));
  }
  if (r.type == RequestType::kLoadAdapter || r.type == RequestType::kUnloadAdapter) {
    if (!j.contains("adapter")) return field_error("adapter", "the adapter's name is needed");
    auto a = get_id(j["adapter"], "adapter", limits);
    if (!a.ok()) return a.status();
    r.adapter = *a;
  }
  if (r.type == RequestType::kLoadAdapter) {
    if (!j.contains("path")) return field_error("path", "load_adapter needs the file's path");
    auto p = get_string(j["path"], "path", 4096);
    if (!p.ok()) return p.status();
    r.path = *p;
    if (j.contains("scale")) {
      if (!j["scale"].is_number() || !std::isfinite(j["scale"].get<double>())) {
        return field_error("scale", "expected a finite number");
      }
      r.scale = j["scale"].get<float>();
    }
  }
  if (r.id.empty()) {
    r.id = make_request_id();
    r.id_assigned = true;
    if (id_out != nullptr) *id_out = r.id;
  }
  return r;
}

}  // namespace

const char* request_type_name(RequestType t) {
  switch (t) {
    case RequestType::kGenerate:
      return "generate";
    case RequestType::kCancel:
      return "cancel";
    case RequestType::kHealth:
      return "health";
    case RequestType::kStats:
      return "stats";
    case RequestType::kTokenize:
      return "tokenize";
    case RequestType::kDetokenize:
      return "detokenize";
    case RequestType::kPrompt:
      return "prompt";
    case RequestType::kLoadAdapter:
      return "load_adapter";
    case RequestType::kUnloadAdapter:
      return "unload_adapter";
  }
  return "generate";
}

StatusOr<Request> parse_request(std::string_view line, const Limits& limits, std::string* id_out) {
  if (id_out != nullptr) id_out->clear();
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.size() > limits.max_line_bytes) {
    return invalid_argument("request line is " + std::to_string(line.size()) +
                            " bytes; the limit is " + std::to_string(limits.max_line_bytes) +
                            " (shorten the history or raise --max-line)");
  }
  if (!utf8_valid(line)) return invalid_argument("request line is not valid UTF-8");
  auto parsed = parse_ordered_json(line, "request line (one JSON object per line)",
                                   JsonLimits{limits.max_line_bytes, limits.max_depth});
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (!j.is_object()) return invalid_argument("request must be a JSON object");
  return parse_object(j, limits, id_out);
}

std::string serialize_request(const Request& r) {
  using json = nlohmann::ordered_json;
  json j = json::object();
  j["v"] = kProtocolVersion;
  if (r.type != RequestType::kGenerate) j["type"] = request_type_name(r.type);
  if (!r.id.empty() && !r.id_assigned) j["id"] = r.id;
  if (r.type == RequestType::kTokenize) j["text"] = r.text;
  if (r.type == RequestType::kDetokenize) j["tokens"] = r.tokens;
  if (r.type == RequestType::kLoadAdapter || r.type == RequestType::kUnloadAdapter) {
    j["adapter"] = r.adapter;
  }
  if (r.type == RequestType::kLoadAdapter) {
    j["path"] = r.path;
    if (r.scale != 1.0f) j["scale"] = r.scale;
  }
  if (r.type == RequestType::kGenerate || r.type == RequestType::kPrompt) {
    if (!r.conversation.empty()) j["conversation"] = r.conversation;
    if (!r.adapter.empty()) j["adapter"] = r.adapter;
    if (!r.model.empty()) j["model"] = r.model;
    if (r.raw) {
      j["raw"] = true;
      j["prompt"] = r.prompt;
    } else {
      json msgs = json::array();
      for (const Message& m : r.messages) {
        json o = {{"role", m.role}, {"content", m.content}};
        if (!m.metadata.empty()) o["metadata"] = m.metadata;
        if (!m.arguments.empty()) o["arguments"] = m.arguments;
        msgs.push_back(std::move(o));
      }
      j["messages"] = std::move(msgs);
      if (!r.enable_thinking) j["enable_thinking"] = false;
    }
    // JSON texts from a parse (protocol or gateway); one that is not JSON is kept as a string,
    // so that the other side refuses it with a clear message.
    auto embed = [](const std::string& text, const char* what) {
      auto v = parse_ordered_json(text, what);
      return v.ok() ? std::move(v).value() : json(text);
    };
    if (!r.tools.empty()) j["tools"] = *r.tools;
    if (!r.parallel_tool_calls) j["parallel_tool_calls"] = false;
    json p = json::object();
    write_sampling(r.params, &p);
    if (!p.empty()) j["params"] = std::move(p);
    if (r.constraint.active()) {
      json c = {{"type", generation::constraint_kind_name(r.constraint.kind)}};
      if (r.constraint.kind == Constraint::Kind::kGbnf) c["grammar"] = r.constraint.text;
      if (r.constraint.kind == Constraint::Kind::kJsonSchema) {
        c["schema"] = embed(r.constraint.text, "constraint.schema");
      }
      if (r.constraint.kind == Constraint::Kind::kToolCall) {
        c["tools"] = embed(r.constraint.text, "constraint.tools");
      }
      j["constraint"] = std::move(c);
    }
    if (!r.resume.empty()) j["resume"] = r.resume;
    if (r.n != 1) j["n"] = r.n;
  }
  return dump_json(j);
}

std::string make_request_id() {
  static std::atomic<uint64_t> counter{0};
  return "req-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

Status check_id(std::string_view s, const std::string& field, const Limits& limits) {
  if (s.size() > limits.max_id_bytes) {
    return field_error(field, "is " + std::to_string(s.size()) + " bytes; the limit is " +
                                  std::to_string(limits.max_id_bytes));
  }
  if (s.empty()) return field_error(field, "must not be empty");
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return field_error(field, "must not contain control characters");
  }
  return Status::Ok();
}

}  // namespace glm::protocol
