// GLM-4.5 and GLM-4.5-Air's chat template (their chat_template.jinja, rendered by HF with
// trim_blocks and lstrip_blocks; docs/models.md#glm4moe), and GLM-4.7's (GLM-4.7-Flash's
// chat_template.jinja: the same turns without the newlines, the answer's thinking opened by the
// prompt), straight to token ids. Their behaviour is reproduced here, not their text;
// tests/data/glm4moe/templates*.jsonl hold the jinjas' own output.
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "tokenizer/chat_template.h"

namespace glm::tok {
namespace {

using Ids = std::vector<int32_t>;
using ordered_json = nlohmann::ordered_json;

constexpr const char* kWhitespace = " \t\n\r\v\f";

// The tags of GLM-4.5's vocabulary that are tokens of their own (added tokens, split out of the
// text before BPE as HF's tokenizer does); a vocabulary without them spells them as text.
constexpr const char* kTags[] = {
    "<think>",   "</think>",   "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
    "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "/nothink"};

// What enable_thinking: false appends to a user turn (unless the turn ends with it).
constexpr std::string_view kNoThink = "/nothink";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view strip(std::string_view s) {
  const size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kWhitespace) - b + 1);
}

std::string_view strip_newlines_left(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view strip_newlines_right(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// The prompt's ids, built in order: role tokens pushed as ids, text gathered and encoded whole
// between them (as HF tokenizes the rendered text), GLM-4.5's tags found in the text as tokens.
class IdsBuilder {
 public:
  IdsBuilder(const Tokenizer& t, const std::vector<std::pair<std::string, int32_t>>& tags)
      : tok_(t), tags_(tags) {}
  void token(int32_t id) {
    flush();
    out_.push_back(id);
  }
  void text(std::string_view s) {
    while (!s.empty()) {
      size_t at = std::string_view::npos;
      const std::pair<std::string, int32_t>* tag = nullptr;
      for (const auto& t : tags_) {
        const size_t p = s.find(t.first);
        if (p < at) {  // no tag is a prefix of another
          at = p;
          tag = &t;
        }
      }
      if (tag == nullptr) {
        pending_ += s;
        return;
      }
      pending_ += s.substr(0, at);
      token(tag->second);
      s.remove_prefix(at + tag->first.size());
    }
  }
  Ids finish() {
    flush();
    return std::move(out_);
  }

 private:
  void flush() {
    if (pending_.empty()) return;
    const Ids ids = tok_.encode(pending_);
    out_.insert(out_.end(), ids.begin(), ids.end());
    pending_.clear();
  }
  const Tokenizer& tok_;
  const std::vector<std::pair<std::string, int32_t>>& tags_;
  std::string pending_;
  Ids out_;
};

void python_json_to(const ordered_json& v, std::string* out) {
  if (v.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) *out += ", ";
      first = false;
      *out += dump_json(ordered_json(k));
      *out += ": ";
      python_json_to(x, out);
    }
    out->push_back('}');
  } else if (v.is_array()) {
    out->push_back('[');
    bool first = true;
    for (const auto& x : v) {
      if (!first) *out += ", ";
      first = false;
      python_json_to(x, out);
    }
    out->push_back(']');
  } else {
    *out += dump_json(v);
  }
}

// Messages as the template sees them: the engine's tool-only system message is not one.
bool is_message(const Message& m) {
  return !(m.role == "system" && !m.tools.empty() && m.content.empty());
}

// An assistant message that carries a call (metadata = the function, arguments = JSON text).
bool is_call(const Message& m) { return m.role == "assistant" && !m.metadata.empty(); }

// GLM-4.5 (chat_template.jinja of zai-org/GLM-4.5 and GLM-4.5-Air): [gMASK] <sop>; the tools,
// if any, as <|system|> + glm45_tools_prompt; then each message in order: <|system|>\n content,
// <|user|>\n content (neither stripped), <|assistant|>\n<think></think> (the reasoning of an
// answer after the last user turn is kept: \n<think>reasoning</think>) + \n content stripped,
// and its calls as \n<tool_call>name\n(<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n)*
// </tool_call>; a tool result as <|observation|> (once for consecutive results) +
// \n<tool_response>\n content \n</tool_response>; then <|assistant|>. The engine's messages split
// an assistant turn into its text and one message per call (api/openai.cc): a call message
// after an assistant message continues its turn, as the template's one message with
// tool_calls renders.
// GLM-4.7 (`glm47_`: GLM-4.7-Flash's chat_template.jinja, whose `clear_thinking` marks the
// family) renders the same turns without a newline after any role token or tag: <|user|>content,
// <|assistant|> + (<think>reasoning</think> | </think>) + content stripped, calls as
// <tool_call>name(<arg_key>k</arg_key><arg_value>v</arg_value>)*</tool_call>, a result as
// <tool_response>content</tool_response>; no /nothink; and the prompt ends <|assistant|><think>
// (the answer starts inside the thinking), or <|assistant|></think> without thinking.
class Glm45Template final : public ChatTemplate {
 public:
  Glm45Template(const Tokenizer& t, bool glm47)
      : tok_(t),
        glm47_(glm47),
        gmask_(t.find("[gMASK]")),
        sop_(t.find("<sop>")),
        system_(t.find("<|system|>")),
        user_(t.find("<|user|>")),
        assistant_(t.find("<|assistant|>")),
        observation_(t.find("<|observation|>")) {
    for (const char* tag : kTags) {
      if (const int32_t id = t.find(tag); id >= 0) tags_.emplace_back(tag, id);
    }
  }
  const char* name() const override { return glm47_ ? "glm47" : "glm45"; }
  StatusOr<Ids> render(const std::vector<Message>& all) const override {
    return render_with(all, TemplateOptions{});
  }
  StatusOr<Ids> render_with(const std::vector<Message>& all,
                            const TemplateOptions& options) const override {
    IdsBuilder b(tok_, tags_);
    b.token(gmask_);
    b.token(sop_);
    std::vector<const Message*> msgs;
    for (const Message& m : all) {
      if (!m.tools.empty()) {
        if (m.role != "system")
          return invalid_argument("tools are only allowed on a system message");
        auto tools = glm45_tools_prompt(*m.tools, glm47_);
        if (!tools.ok()) return tools.status();
        b.token(system_);
        b.text(*tools);
      }
      if (is_message(m)) msgs.push_back(&m);
    }
    size_t last_user = std::string::npos;
    for (size_t i = 0; i < msgs.size(); ++i) {
      if (msgs[i]->role == "user") last_user = i;
    }
    for (size_t i = 0; i < msgs.size(); ++i) {
      const Message& m = *msgs[i];
      const Message* prev = i > 0 ? msgs[i - 1] : nullptr;
      if (m.role == "user" || m.role == "system") {
        b.token(m.role == "user" ? user_ : system_);
        b.text(newline() + m.content);
        if (m.role == "user" && !glm47_ && !options.enable_thinking &&
            !ends_with(m.content, kNoThink)) {
          b.text(kNoThink);
        }
      } else if (m.role == "assistant") {
        if (!m.arguments.empty() && m.metadata.empty())
          return invalid_argument("tool call arguments need an assistant message naming the tool");
        if (!is_call(m) || prev == nullptr || prev->role != "assistant") {
          b.token(assistant_);
          const bool after_last_user = last_user == std::string::npos || i > last_user;
          render_answer(is_call(m) ? "" : m.content, after_last_user, &b);
        }
        if (is_call(m)) GLM_RETURN_IF_ERROR(render_call(m, &b));
      } else if (m.role == "observation") {
        if (prev == nullptr || prev->role != "observation") b.token(observation_);
        const std::string nl = newline();
        b.text(nl + "<tool_response>" + nl + m.content + nl + "</tool_response>");
      } else {
        return invalid_argument("message role '" + m.role + "' is not supported by the " + name() +
                                " chat template (use system, user, assistant, observation)");
      }
    }
    b.token(assistant_);
    if (glm47_) {
      b.text(options.enable_thinking ? "<think>" : "</think>");
    } else if (!options.enable_thinking) {
      b.text("\n<think></think>");
    }
    return b.finish();
  }
  Ids stop_ids() const override { return {tok_.eos_id(), user_, observation_}; }
  bool strips_answer_whitespace() const override { return true; }
  // GLM-4.5 thinks first, writing "<think>" itself: the prompt ends at <|assistant|>. GLM-4.7's
  // prompt writes it: the answer starts inside the thinking, unless thinking is off.
  bool reasoning() const override { return true; }
  bool opens_reasoning(const TemplateOptions& options) const override {
    return glm47_ && options.enable_thinking;
  }

 private:
  std::string newline() const { return glm47_ ? "" : "\n"; }

  // The template's assistant branch: the reasoning before the first </think> (after its last
  // <think>), kept only after the last user turn; the text after the last </think>.
  void render_answer(std::string_view content, bool after_last_user, IdsBuilder* b) const {
    std::string_view reasoning;
    if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
      reasoning = strip_newlines_right(content.substr(0, close));
      if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos)
        reasoning.remove_prefix(open + 7);
      reasoning = strip_newlines_left(reasoning);
      content = strip_newlines_left(content.substr(content.rfind("</think>") + 8));
    }
    const std::string nl = newline();
    if (after_last_user && !reasoning.empty()) {
      b->text(nl + "<think>" + std::string(strip(reasoning)) + "</think>");
    } else {
      b->text(glm47_ ? "</think>" : "\n<think></think>");
    }
    if (!strip(content).empty()) b->text(nl + std::string(strip(content)));
  }

  Status render_call(const Message& m, IdsBuilder* b) const {
    // The arguments as JSON object text; GLM-4's messages carry them as the content.
    const std::string& text = m.arguments.empty() ? m.content : m.arguments;
    auto args = parse_ordered_json(text.empty() ? "{}" : text, "tool call arguments");
    if (!args.ok() || !args->is_object())
      return invalid_argument("tool call arguments must be a JSON object as text, e.g. \"{}\"");
    const std::string nl = newline();
    std::string call = nl + "<tool_call>" + m.metadata + nl;
    for (const auto& [k, v] : args->items()) {
      call += "<arg_key>" + k + "</arg_key>" + nl + "<arg_value>";
      call += v.is_string() ? v.get<std::string>() : python_json(v);
      call += "</arg_value>" + nl;
    }
    b->text(call + "</tool_call>");
    return Status::Ok();
  }

  const Tokenizer& tok_;
  bool glm47_;
  int32_t gmask_, sop_, system_, user_, assistant_, observation_;
  std::vector<std::pair<std::string, int32_t>> tags_;  // the tags this vocabulary has as tokens
};

}  // namespace

std::string python_json(const nlohmann::ordered_json& v) {
  std::string out;
  python_json_to(v, &out);
  return out;
}

StatusOr<std::string> glm45_tools_prompt(const nlohmann::ordered_json& tools, bool glm47) {
  if (!tools.is_array()) return invalid_argument("tools must be a JSON array of functions");
  std::string out =
      "\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
  for (const auto& t : tools) {
    if (!t.is_object()) return invalid_argument("every tool must be a function object");
    // The template dumps the client's tool object: OpenAI's {"type":"function","function":{..}}.
    if (t.contains("function") && t["function"].is_object()) {
      out += python_json(t);
    } else {
      out += python_json(ordered_json{{"type", "function"}, {"function", t}});
    }
    out += "\n";
  }
  const std::string nl = glm47 ? "" : "\n";
  out +=
      "</tools>\n\nFor each function call, output the function name and arguments within the "
      "following XML format:\n<tool_call>{function-name}" +
      nl + "<arg_key>{arg-key-1}</arg_key>" + nl + "<arg_value>{arg-value-1}</arg_value>" + nl +
      "<arg_key>{arg-key-2}</arg_key>" + nl + "<arg_value>{arg-value-2}</arg_value>" + nl + "..." +
      nl + "</tool_call>";
  return out;
}

namespace detail {

std::unique_ptr<ChatTemplate> make_glm45_template(const Tokenizer& t, bool glm47) {
  return std::make_unique<Glm45Template>(t, glm47);
}

}  // namespace detail

}  // namespace glm::tok
