// GLM-4.5's XML tool calls (<tool_call>NAME <arg_key>K</arg_key><arg_value>V</arg_value>...
// </tool_call>) read into ToolCall, following vLLM's Glm4MoeModelToolParser (chat_template.h).
// A small scanner over the text; never throws, never crashes. tool_reading reads the types.
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "tokenizer/chat_template.h"

namespace glm::tok {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kKey = "<arg_key>";
constexpr std::string_view kKeyEnd = "</arg_key>";
constexpr std::string_view kValue = "<arg_value>";
constexpr std::string_view kValueEnd = "</arg_value>";
constexpr int kMaxDepth = 64;  // deeper JSON values stay text (the parser recurses per level)

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

bool eat(std::string_view* s, std::string_view tag) {
  if (s->substr(0, tag.size()) != tag) return false;
  s->remove_prefix(tag.size());
  return true;
}

// The text up to `end` (removed with it from *s); false if `end` never comes.
bool until(std::string_view* s, std::string_view end, std::string_view* out) {
  const size_t p = s->find(end);
  if (p == std::string_view::npos) return false;
  *out = s->substr(0, p);
  s->remove_prefix(p + end.size());
  return true;
}

// vLLM's _deserialize: json.loads first; a text that is not JSON stays a string. (vLLM then
// tries Python literals; a parameter its schema types "string" stays text: `as_text`.)
nlohmann::ordered_json value_of(std::string_view text, bool as_text) {
  if (as_text) return std::string(text);
  if (json_nesting_depth(text, kMaxDepth) >= kMaxDepth) return std::string(text);
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::string(text);
  return j;
}

bool typed_string(const nlohmann::ordered_json& schema) {
  if (!schema.is_object()) return false;
  auto t = schema.find("type");
  if (t == schema.end()) return false;
  if (t->is_string()) return *t == "string";
  if (!t->is_array()) return false;
  for (const auto& x : *t) {
    if (x == "string") return true;
  }
  return false;
}

}  // namespace

ToolReading tool_reading(const nlohmann::ordered_json& functions, bool several) {
  ToolReading r;
  r.several = several;
  if (!functions.is_array()) return r;
  for (const auto& f : functions) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
    std::set<std::string>& text = r.text_params[f["name"].get<std::string>()];
    auto p = f.find("parameters");
    if (p == f.end() || !p->is_object()) continue;
    auto props = p->find("properties");
    if (props == p->end() || !props->is_object()) continue;
    for (auto it = props->begin(); it != props->end(); ++it) {
      if (typed_string(it.value())) text.insert(it.key());
    }
  }
  return r;
}

std::optional<ToolCall> parse_glm45_call(std::string_view body, const ToolReading* reading) {
  size_t name_end = std::min(body.find('\n'), body.find(kKey));
  if (name_end == std::string_view::npos) name_end = body.size();
  ToolCall call;
  call.name = std::string(trim(body.substr(0, name_end)));
  if (call.name.empty()) return std::nullopt;
  std::string_view rest = body.substr(name_end);
  const std::set<std::string>* text_params = nullptr;
  if (reading != nullptr) {
    auto it = reading->text_params.find(call.name);
    if (it != reading->text_params.end()) text_params = &it->second;
  }
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  for (rest = trim(rest); !rest.empty(); rest = trim(rest)) {
    std::string_view key, value;
    if (!eat(&rest, kKey) || !until(&rest, kKeyEnd, &key)) return std::nullopt;
    rest = trim(rest);
    if (!eat(&rest, kValue) || !until(&rest, kValueEnd, &value)) return std::nullopt;
    if (trim(key).empty()) return std::nullopt;
    const std::string k(trim(key));
    args[k] = value_of(trim(value), text_params != nullptr && text_params->count(k) > 0);
  }
  call.arguments = dump_json(args);
  return call;
}

Glm45Calls parse_glm45_tool_calls(std::string_view text, const ToolReading* reading) {
  Glm45Calls out;
  const size_t first = text.find(kOpen);
  out.content = std::string(text.substr(0, first));
  for (size_t at = first; at != std::string_view::npos; at = text.find(kOpen, at)) {
    std::string_view rest = text.substr(at + kOpen.size());
    std::string_view body;
    if (!until(&rest, kClose, &body)) break;  // cut: no more calls
    std::optional<ToolCall> call = parse_glm45_call(body, reading);
    if (!call) {  // malformed: the whole answer is text
      out.calls.clear();
      out.content = std::string(text);
      return out;
    }
    out.calls.push_back(std::move(*call));
    at = static_cast<size_t>(rest.data() - text.data());
  }
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

}  // namespace glm::tok
