// ChatGLM3 tool calls in the assistant's output (HF process_response): the metadata line names
// the tool, the code block holds "tool_call(k=v, ...)" whose Python literal arguments become a
// JSON object. A small recursive-descent parser of Python literals; never throws, never crashes.
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "tokenizer/chat_template.h"

namespace glm::tok {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

class PyLiteral {
 public:
  explicit PyLiteral(std::string_view s) : s_(s) {}

  // tool_call(a=1, b='x') -> {"a":1,"b":"x"}; false on any syntax error.
  bool kwargs_call(nlohmann::ordered_json* out) {
    *out = nlohmann::ordered_json::object();
    ws();
    if (!ident_is("tool_call")) return false;
    ws();
    if (!eat('(')) return false;
    ws();
    while (!eat(')')) {
      std::string key;
      if (!ident(&key)) return false;
      ws();
      if (!eat('=')) return false;
      nlohmann::ordered_json v;
      if (!value(&v, 0)) return false;
      (*out)[key] = std::move(v);
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      ws();
      if (!eat(')')) return false;
      break;
    }
    ws();
    return i_ == s_.size();
  }

 private:
  static constexpr int kMaxDepth = 64;

  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  static bool ident_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
  }
  bool ident(std::string* out) {
    size_t b = i_;
    while (i_ < s_.size() && ident_char(s_[i_], i_ == b)) ++i_;
    *out = std::string(s_.substr(b, i_ - b));
    return i_ > b;
  }
  bool ident_is(std::string_view name) {
    size_t save = i_;
    std::string id;
    if (ident(&id) && id == name) return true;
    i_ = save;
    return false;
  }
  bool value(nlohmann::ordered_json* out, int depth) {
    if (depth > kMaxDepth) return false;
    ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '\'' || c == '"') {
      std::string str;
      if (!string(&str)) return false;
      *out = std::move(str);
      return true;
    }
    if (c == '(' || c == '[') return sequence(out, c == '(' ? ')' : ']', depth);
    if (c == '{') return dict(out, depth);
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) return number(out);
    std::string id;
    if (!ident(&id)) return false;
    if (id == "True")
      *out = true;
    else if (id == "False")
      *out = false;
    else if (id == "None")
      *out = nullptr;
    else
      return false;
    return true;
  }
  bool sequence(nlohmann::ordered_json* out, char close, int depth) {
    ++i_;
    *out = nlohmann::ordered_json::array();
    ws();
    while (!eat(close)) {
      nlohmann::ordered_json v;
      if (!value(&v, depth + 1)) return false;
      out->push_back(std::move(v));
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      if (!eat(close)) return false;
      break;
    }
    return true;
  }
  bool dict(nlohmann::ordered_json* out, int depth) {
    ++i_;
    *out = nlohmann::ordered_json::object();
    ws();
    while (!eat('}')) {
      nlohmann::ordered_json k, v;
      if (!value(&k, depth + 1)) return false;
      ws();
      if (!eat(':')) return false;
      if (!value(&v, depth + 1)) return false;
      (*out)[k.is_string() ? k.get<std::string>() : k.dump()] = std::move(v);
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      if (!eat('}')) return false;
      break;
    }
    return true;
  }
  bool number(nlohmann::ordered_json* out) {
    size_t b = i_;
    if (s_[i_] == '-' || s_[i_] == '+') ++i_;
    bool is_float = false;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if ((c >= '0' && c <= '9') || c == '_') {  // Python allows 1_000
        ++i_;
      } else if (c == '.' || c == 'e' || c == 'E' ||
                 ((c == '-' || c == '+') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E'))) {
        is_float = true;
        ++i_;
      } else {
        break;
      }
    }
    std::string text;
    for (char c : s_.substr(b, i_ - b)) {
      if (c != '_') text.push_back(c);
    }
    auto j = nlohmann::ordered_json::parse(text[0] == '+' ? text.substr(1) : text, nullptr, false);
    if (j.is_discarded() || !j.is_number()) {
      if (!is_float) return false;
      char* end = nullptr;
      double d = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0') return false;
      *out = d;
      return true;
    }
    *out = std::move(j);
    return true;
  }
  bool string(std::string* out) {
    const char q = s_[i_++];
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == q) return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case 'n':
          out->push_back('\n');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case '0':
          out->push_back('\0');
          break;
        case '\\':
        case '\'':
        case '"':
          out->push_back(e);
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          for (int k = 0; k < 4; ++k) {
            const char h = s_[i_++];
            const bool hex =
                (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F');
            if (!hex) return false;
          }
          nlohmann::json tmp = nlohmann::json::parse(
              "\"\\u" + std::string(s_.substr(i_ - 4, 4)) + "\"", nullptr, false);
          if (tmp.is_discarded()) return false;  // lone surrogate
          out->append(tmp.get<std::string>());
          break;
        }
        default:
          out->push_back('\\');
          out->push_back(e);
          break;
      }
    }
    return false;  // unterminated
  }

  std::string_view s_;
  size_t i_ = 0;
};

// Body of the first ``` fenced block, or the whole text if there is none.
std::string_view code_block(std::string_view s) {
  size_t open = s.find("```");
  if (open == std::string_view::npos) return trim(s);
  size_t body = s.find('\n', open);
  if (body == std::string_view::npos) return {};
  ++body;
  size_t close = s.find("```", body);
  std::string_view b =
      s.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
  return trim(b);
}

}  // namespace

AssistantOutput parse_assistant_output(std::string_view text) {
  if (size_t p = text.rfind("<|assistant|>"); p != std::string_view::npos) {
    text = text.substr(p + std::string_view("<|assistant|>").size());
  }
  std::string_view metadata, content;
  if (size_t nl = text.find('\n'); nl != std::string_view::npos) {
    metadata = text.substr(0, nl);
    content = text.substr(nl + 1);
  } else {
    content = text;
  }
  AssistantOutput out;
  if (trim(metadata).empty()) {
    out.content = std::string(trim(content));
    return out;
  }
  out.content = std::string(content);
  ToolCall call;
  call.name = std::string(trim(metadata));
  call.code = std::string(code_block(content));
  if (call.name != "interpreter") {
    nlohmann::ordered_json args;
    if (PyLiteral(call.code).kwargs_call(&args)) {
      call.arguments = dump_json(args);
    }
  }
  out.tool_call = std::move(call);
  return out;
}

std::optional<ToolCall> parse_tool_call(std::string_view text) {
  return parse_assistant_output(text).tool_call;
}

}  // namespace glm::tok
