// The tool parts of the GLM prompts: ChatGLM3's tool-call code block written back from JSON
// arguments (Python keyword arguments, as the model writes them), and GLM-4's tool system
// prompt as its official chat template writes it.
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "tokenizer/chat_template.h"

namespace glm::tok {
namespace {

using ordered_json = nlohmann::ordered_json;

// Python's repr() of a str: single quotes unless the text has ' and no ", escapes for the
// quote, backslash and control characters; other characters (UTF-8 included) as they are.
void py_string(const std::string& s, std::string* out) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out->push_back(q);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      const char* hex = "0123456789abcdef";
      *out += "\\x";
      out->push_back(hex[u >> 4]);
      out->push_back(hex[u & 15]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back(q);
}

// Python's repr() of the value JSON `v` decodes to (json.loads: objects are dicts, null None).
void py_repr(const ordered_json& v, std::string* out) {
  switch (v.type()) {
    case ordered_json::value_t::null:
      *out += "None";
      return;
    case ordered_json::value_t::boolean:
      *out += v.get<bool>() ? "True" : "False";
      return;
    case ordered_json::value_t::string:
      py_string(v.get_ref<const std::string&>(), out);
      return;
    case ordered_json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& x : v) {
        if (!first) *out += ", ";
        first = false;
        py_repr(x, out);
      }
      out->push_back(']');
      return;
    }
    case ordered_json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) *out += ", ";
        first = false;
        py_string(k, out);
        *out += ": ";
        py_repr(x, out);
      }
      out->push_back('}');
      return;
    }
    default:
      *out += v.dump();  // numbers: JSON and Python spell them alike
      return;
  }
}

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace

StatusOr<std::string> python_tool_call(std::string_view arguments_json) {
  auto args = parse_ordered_json(arguments_json, "the tool call's arguments");
  if (!args.ok()) return args.status();
  if (!args->is_object()) return invalid_argument("a tool call's arguments must be a JSON object");
  std::string out = "```python\ntool_call(";
  bool first = true;
  for (const auto& [k, v] : args->items()) {
    if (!is_identifier(k)) {
      return invalid_argument("argument name '" + k +
                              "' is not a Python identifier (ChatGLM3 calls tools with keyword "
                              "arguments)");
    }
    if (!first) out += ", ";
    first = false;
    out += k;
    out += '=';
    py_repr(v, &out);
  }
  out += ")\n```";
  return out;
}

StatusOr<std::string> glm4_tools_prompt(const nlohmann::ordered_json& tools) {
  if (!tools.is_array()) return invalid_argument("tools must be a JSON array of functions");
  std::string out =
      "\n你是一个名为 ChatGLM 的人工智能助手。你是基于智谱AI训练的语言模型 GLM-4 "
      "模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具";
  for (const auto& f : tools) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) {
      return invalid_argument("every tool must be a function object with a string name");
    }
    out += "\n\n## " + f["name"].get<std::string>() + "\n\n" + dump_json(f, 4) +
           "\n在调用上述函数时，请使用 Json 格式表示调用的参数。";
  }
  return out;
}

StatusOr<std::string> glm4_0414_tools_prompt(const nlohmann::ordered_json& tools) {
  if (!tools.is_array()) return invalid_argument("tools must be a JSON array of functions");
  std::string out =
      "\n你是一个名为 ChatGLM 的人工智能助手。你是基于智谱 AI 公司训练的语言模型 GLM-4 "
      "模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具";
  for (const auto& t : tools) {
    // {% set function = tool.function if tool.get("function") else tool %}
    const auto& f =
        t.is_object() && t.contains("function") && t["function"].is_object() ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) {
      return invalid_argument("every tool must be a function object with a string name");
    }
    out += "\n## " + f["name"].get<std::string>() + "\n\n" + dump_json(f, 4) +
           "\n在调用上述函数时，请使用 Json 格式表示调用的参数。";
  }
  return out;
}

std::string glm4_0414_visible(std::string_view content) {
  const size_t end_think = content.rfind("</think>");
  if (end_think != std::string_view::npos) content.remove_prefix(end_think + 8);
  const char* ws = " \t\n\r\v\f";
  const size_t b = content.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  return std::string(content.substr(b, content.find_last_not_of(ws) - b + 1));
}

}  // namespace glm::tok
