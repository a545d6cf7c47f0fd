// The chat templates of the GLM family (ChatGLM-6B, ChatGLM2, ChatGLM3, GLM-4, GLM-4-0414,
// GLM-Z1; GLM-4.5's is in chat_template_glm45.cc), LLaMA-2 and raw
// prompts, rendered straight to token ids, and the choice among them from the vocabulary.
#include "tokenizer/chat_template.h"

#include <nlohmann/json.hpp>

#include "core/json.h"

namespace glm::tok {
namespace {

using Ids = std::vector<int32_t>;

void append(Ids* out, const Ids& more) { out->insert(out->end(), more.begin(), more.end()); }

Status unknown_role(const std::string& tmpl, const std::string& role, const char* allowed) {
  return invalid_argument("message role '" + role + "' is not supported by the " + tmpl +
                          " chat template (use " + allowed + ")");
}

// HF's json.dumps(tools, indent=4, ensure_ascii=False): keys in their original order.
StatusOr<std::string> pretty_tools(const nlohmann::ordered_json& tools) {
  if (!tools.is_array()) return invalid_argument("tools must be a JSON array of functions");
  return dump_json(tools, 4);
}

// Ids of the role tokens, looked up once; -1 if absent.
struct GlmRoles {
  int32_t system, user, assistant, observation;
  explicit GlmRoles(const Tokenizer& t)
      : system(t.find("<|system|>")),
        user(t.find("<|user|>")),
        assistant(t.find("<|assistant|>")),
        observation(t.find("<|observation|>")) {}
  int32_t of(const std::string& role) const {
    if (role == "system") return system;
    if (role == "user") return user;
    if (role == "assistant") return assistant;
    if (role == "observation") return observation;
    return -1;
  }
};

// ChatGLM3 (HF build_chat_input): [gMASK] sop, then per message <|role|> + sp(metadata + "\n")
// + sp(content), then <|assistant|>. Every sp() carries the SentencePiece dummy prefix.
class ChatGlm3Template final : public ChatTemplate {
 public:
  explicit ChatGlm3Template(const Tokenizer& t)
      : tok_(t), roles_(t), gmask_(t.find("[gMASK]")), sop_(t.find("sop")) {}
  const char* name() const override { return "chatglm3"; }
  StatusOr<Ids> render(const std::vector<Message>& messages) const override {
    Ids out{gmask_, sop_};
    for (const Message& m : messages) {
      const int32_t role = roles_.of(m.role);
      if (role < 0) return unknown_role(name(), m.role, "system, user, assistant, observation");
      std::string content = m.content;
      if (!m.tools.empty()) {
        if (m.role != "system")
          return invalid_argument("tools are only allowed on a system message");
        auto tools = pretty_tools(*m.tools);
        if (!tools.ok()) return tools.status();
        if (content.empty()) content = kChatGlm3ToolsSentence;
        content += "\n" + *tools;
      }
      if (!m.arguments.empty()) {
        if (m.role != "assistant" || m.metadata.empty())
          return invalid_argument("tool call arguments need an assistant message naming the tool");
        auto call = python_tool_call(m.arguments);
        if (!call.ok()) return call.status();
        content = std::move(call).value();
      }
      out.push_back(role);
      append(&out, tok_.encode(m.metadata + "\n"));
      append(&out, tok_.encode(content));
    }
    out.push_back(roles_.assistant);
    return out;
  }
  Ids stop_ids() const override { return {tok_.eos_id(), roles_.user, roles_.observation}; }
  bool strips_answer_whitespace() const override { return true; }

 private:
  const Tokenizer& tok_;
  GlmRoles roles_;
  int32_t gmask_, sop_;
};

// GLM-4 (official chat template): [gMASK] <sop>, then per message its tool system prompt if it
// carries tools (<|system|> + glm4_tools_prompt), and if its content is not empty <|role|> +
// bpe(metadata + "\n" + content); then <|assistant|>. HF renders the template to text and
// tokenizes it; the role tokens cut the text into these pieces, so encoding each piece gives the
// same ids.
class Glm4Template final : public ChatTemplate {
 public:
  explicit Glm4Template(const Tokenizer& t)
      : tok_(t), roles_(t), gmask_(t.find("[gMASK]")), sop_(t.find("<sop>")) {}
  const char* name() const override { return "glm4"; }
  StatusOr<Ids> render(const std::vector<Message>& messages) const override {
    Ids out{gmask_, sop_};
    for (const Message& m : messages) {
      const int32_t role = roles_.of(m.role);
      if (role < 0) return unknown_role(name(), m.role, "system, user, assistant, observation");
      if (!m.tools.empty()) {
        if (m.role != "system")
          return invalid_argument("tools are only allowed on a system message");
        auto tools = glm4_tools_prompt(*m.tools);
        if (!tools.ok()) return tools.status();
        out.push_back(roles_.system);
        append(&out, tok_.encode(*tools));
      }
      const std::string& content = m.arguments.empty() ? m.content : m.arguments;
      if (!m.arguments.empty() && (m.role != "assistant" || m.metadata.empty()))
        return invalid_argument("tool call arguments need an assistant message naming the tool");
      if (content.empty()) continue;  // {% if item['content'] %}
      out.push_back(role);
      append(&out, tok_.encode(m.metadata + "\n" + content));
    }
    out.push_back(roles_.assistant);
    return out;
  }
  Ids stop_ids() const override { return {tok_.eos_id(), roles_.user, roles_.observation}; }
  bool strips_answer_whitespace() const override { return true; }

 private:
  const Tokenizer& tok_;
  GlmRoles roles_;
  int32_t gmask_, sop_;
};

// GLM-4-0414 and GLM-Z1-0414 (their chat_template.jinja, rendered by HF with trim_blocks and
// lstrip_blocks): [gMASK] <sop>; the tools, if any, as <|system|> + glm4_0414_tools_prompt;
// every system message as <|system|>\n + content, before all other messages; then per message
// <|role|> + metadata + "\n" + visible, where visible is the content after its last </think>,
// stripped (the template's own rule: earlier turns' reasoning is dropped); then <|assistant|>\n,
// and for Z1 <think>. The role tokens cut the rendered text into pieces that encode alone.
class Glm4_0414Template final : public ChatTemplate {
 public:
  Glm4_0414Template(const Tokenizer& t, bool z1)
      : tok_(t), roles_(t), gmask_(t.find("[gMASK]")), sop_(t.find("<sop>")), z1_(z1) {}
  const char* name() const override { return z1_ ? "glm-z1" : "glm4-0414"; }
  StatusOr<Ids> render(const std::vector<Message>& messages) const override {
    Ids out{gmask_, sop_};
    for (const Message& m : messages) {  // the tools block comes first
      if (m.tools.empty()) continue;
      if (m.role != "system") return invalid_argument("tools are only allowed on a system message");
      auto tools = glm4_0414_tools_prompt(*m.tools);
      if (!tools.ok()) return tools.status();
      out.push_back(roles_.system);
      append(&out, tok_.encode(*tools));
    }
    for (const Message& m : messages) {
      // A system message that only carries the tools (the engine's) is not a message.
      if (m.role != "system" || (!m.tools.empty() && m.content.empty())) continue;
      out.push_back(roles_.system);
      append(&out, tok_.encode("\n" + m.content));
    }
    for (const Message& m : messages) {
      if (m.role == "system") continue;
      const int32_t role = roles_.of(m.role);
      if (role < 0) return unknown_role(name(), m.role, "system, user, assistant, observation");
      if (!m.arguments.empty() && (m.role != "assistant" || m.metadata.empty()))
        return invalid_argument("tool call arguments need an assistant message naming the tool");
      const std::string& content = m.arguments.empty() ? m.content : m.arguments;
      const std::string meta = m.role == "assistant" ? m.metadata : "";
      out.push_back(role);
      append(&out, tok_.encode(meta + "\n" + glm4_0414_visible(content)));
    }
    out.push_back(roles_.assistant);
    append(&out, tok_.encode(z1_ ? "\n<think>" : "\n"));
    return out;
  }
  Ids stop_ids() const override { return {tok_.eos_id(), roles_.user, roles_.observation}; }
  bool strips_answer_whitespace() const override { return true; }
  // GLM-Z1 thinks first: its prompt opens "<think>", and the answer starts inside it.
  bool reasoning() const override { return z1_; }
  bool opens_reasoning(const TemplateOptions& /*options*/) const override { return z1_; }

 private:
  const Tokenizer& tok_;
  GlmRoles roles_;
  int32_t gmask_, sop_;
  bool z1_;
};

// ChatGLM2 (HF build_prompt): "[Round i]\n\n问：{q}\n\n答：{a}\n\n" per past round, then
// "[Round n]\n\n问：{q}\n\n答：", encoded as one text after [gMASK] sop. ChatGLM2 has no system
// or tool roles: system messages are dropped (as chatglm.cpp does); observation is an error.
class ChatGlm2Template final : public ChatTemplate {
 public:
  explicit ChatGlm2Template(const Tokenizer& t)
      : tok_(t), gmask_(t.find("[gMASK]")), sop_(t.find("sop")) {}
  const char* name() const override { return "chatglm2"; }
  StatusOr<Ids> render(const std::vector<Message>& messages) const override {
    std::string text;
    int round = 0;
    bool open = false;  // a question without its answer yet
    for (const Message& m : messages) {
      if (m.role == "system") continue;
      if (m.role == "user") {
        if (open) text += "\n\n";  // an unanswered question: close its round with no answer
        text += "[Round " + std::to_string(++round) + "]\n\n问：" + m.content + "\n\n答：";
        open = true;
      } else if (m.role == "assistant") {
        if (!open) text += "[Round " + std::to_string(++round) + "]\n\n问：\n\n答：";
        text += m.content + "\n\n";
        open = false;
      } else {
        return unknown_role(name(), m.role, "system, user, assistant");
      }
    }
    if (!open) text += "[Round " + std::to_string(++round) + "]\n\n问：\n\n答：";
    Ids out{gmask_, sop_};
    append(&out, tok_.encode(text));
    return out;
  }
  Ids stop_ids() const override { return {tok_.eos_id()}; }

 private:
  const Tokenizer& tok_;
  int32_t gmask_, sop_;
};

// ChatGLM-6B (HF ChatGLMForConditionalGeneration.chat): with no history the prompt is the
// bare query; otherwise "[Round i]\n问：{q}\n答：{a}\n" per past round (i from 0), then
// "[Round n]\n问：{q}\n答："; the text is tokenized whole, then [gMASK] <sop> (the tokenizer's
// build_inputs_with_special_tokens). No system or tool roles: system messages are dropped;
// observation is an error. An unanswered question before another one is a round with an empty
// answer; a conversation that ends with an answer asks an empty question.
class ChatGlm1Template final : public ChatTemplate {
 public:
  explicit ChatGlm1Template(const Tokenizer& t)
      : tok_(t), gmask_(t.find("[gMASK]")), sop_(t.find("<sop>")) {}
  const char* name() const override { return "chatglm1"; }
  StatusOr<Ids> render(const std::vector<Message>& messages) const override {
    std::vector<std::pair<std::string, std::string>> history;
    std::string query;
    bool open = false;  // `query` is a question without its answer yet
    for (const Message& m : messages) {
      if (m.role == "system") continue;
      if (m.role == "user") {
        if (open) history.emplace_back(query, "");
        query = m.content;
        open = true;
      } else if (m.role == "assistant") {
        history.emplace_back(open ? query : "", m.content);
        query.clear();
        open = false;
      } else {
        return unknown_role(name(), m.role, "system, user, assistant");
      }
    }
    std::string text;
    if (history.empty()) {
      text = query;
    } else {
      for (size_t i = 0; i < history.size(); ++i) {
        text += "[Round " + std::to_string(i) + "]\n问：" + history[i].first + "\n答：" +
                history[i].second + "\n";
      }
      text += "[Round " + std::to_string(history.size()) + "]\n问：" + query + "\n答：";
    }
    Ids out = tok_.encode(text);
    out.push_back(gmask_);
    out.push_back(sop_);
    return out;
  }
  Ids stop_ids() const override { return {tok_.eos_id()}; }
  // HF's process_response strips the answer.
  bool strips_answer_whitespace() const override { return true; }
  std::unique_ptr<AnswerFilter> answer_filter() const override {
    return make_chatglm1_answer_filter();
  }

 private:
  const Tokenizer& tok_;
  int32_t gmask_, sop_;
};

// LLaMA-2 chat: <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {answer} </s> ...
class Llama2Template final : public ChatTemplate {
 public:
  explicit Llama2Template(const Tokenizer& t) : tok_(t) {}
  const char* name() const override { return "llama2"; }
  StatusOr<Ids> render(const std::vector<Message>& messages) const override {
    Ids out;
    std::string system, turn;
    bool open = false;
    for (const Message& m : messages) {
      if (m.role == "system") {
        system = m.content;
      } else if (m.role == "user") {
        if (open) flush(&out, turn + " [/INST]", false);
        turn = "[INST] ";
        if (!system.empty()) turn += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
        system.clear();
        turn += m.content;
        open = true;
      } else if (m.role == "assistant") {
        if (!open) turn = "[INST] ";
        flush(&out, turn + " [/INST] " + m.content + " ", true);
        open = false;
      } else {
        return unknown_role(name(), m.role, "system, user, assistant");
      }
    }
    if (open) flush(&out, turn + " [/INST]", false);
    return out;
  }
  Ids stop_ids() const override { return {tok_.eos_id()}; }

 private:
  void flush(Ids* out, const std::string& text, bool with_eos) const {
    if (tok_.bos_id() >= 0) out->push_back(tok_.bos_id());
    append(out, tok_.encode(text));
    if (with_eos && tok_.eos_id() >= 0) out->push_back(tok_.eos_id());
  }
  const Tokenizer& tok_;
};

// No template: BOS (if the vocabulary adds one) + the message contents joined by "\n".
class RawTemplate final : public ChatTemplate {
 public:
  RawTemplate(const Tokenizer& t, bool add_bos) : tok_(t), add_bos_(add_bos) {}
  const char* name() const override { return "raw"; }
  StatusOr<Ids> render(const std::vector<Message>& messages) const override {
    std::string text;
    for (const Message& m : messages) {
      if (m.role != "system" && m.role != "user" && m.role != "assistant") {
        return unknown_role(name(), m.role, "system, user, assistant");
      }
      if (!text.empty()) text += "\n";
      text += m.content;
    }
    Ids out;
    if (add_bos_ && tok_.bos_id() >= 0) out.push_back(tok_.bos_id());
    append(&out, tok_.encode(text));
    return out;
  }
  Ids stop_ids() const override { return tok_.eos_id() >= 0 ? Ids{tok_.eos_id()} : Ids{}; }
  bool render_ends_with_marker() const override { return false; }

 private:
  const Tokenizer& tok_;
  bool add_bos_;
};

std::string detect(const gguf::File& file, const Tokenizer& t) {
  // GLM-4 spells its start token "<sop>", ChatGLM2/3 "sop" (also in synthetic vocabularies,
  // whatever their tokenizer kind).
  const bool has_user = t.find("<|user|>") >= 0;
  const bool has_gmask = t.find("[gMASK]") >= 0;
  auto arch = file.get_string("general.architecture");
  // GLM-4.7-Flash (llama.cpp's deepseek2 layout, the only GLM in it) speaks GLM-4.7's format.
  if (arch.ok() && *arch == "deepseek2" && has_user && has_gmask) return "glm47";
  if (arch.ok() && *arch == "glm4moe" && has_user && has_gmask) {
    // GLM-4.7's template reads clear_thinking (it keeps earlier turns' reasoning when false).
    auto tmpl = file.get_string("tokenizer.chat_template");
    return tmpl.ok() && tmpl->find("clear_thinking") != std::string::npos ? "glm47" : "glm45";
  }
  if (arch.ok() && *arch == "glm4" && has_user && has_gmask) {
    // GLM-Z1's template opens the answer with <think>; GLM-4-0414's does not.
    auto tmpl = file.get_string("tokenizer.chat_template");
    return tmpl.ok() && tmpl->find("<think>") != std::string::npos ? "glm-z1" : "glm4-0414";
  }
  if (has_user && has_gmask && t.find("<sop>") >= 0) return "glm4";
  if (has_user && has_gmask && t.find("sop") >= 0) return "chatglm3";
  if (!has_user && has_gmask && t.find("<sop>") >= 0) return "chatglm1";
  if (!has_user && has_gmask && t.find("sop") >= 0) return "chatglm2";
  auto tmpl = file.get_string("tokenizer.chat_template");
  if (tmpl.ok() && tmpl->find("[INST]") != std::string::npos) return "llama2";
  return "raw";
}

}  // namespace

StatusOr<std::unique_ptr<ChatTemplate>> make_chat_template(const std::string& name,
                                                           const gguf::File& file,
                                                           const Tokenizer& t) {
  auto need = [&](std::initializer_list<const char*> tokens) -> Status {
    for (const char* tk : tokens) {
      if (t.find(tk) < 0) {
        return unsupported(file.path() + ": the " + name + " chat template needs the token " + tk +
                           ", which this vocabulary lacks");
      }
    }
    return Status::Ok();
  };
  if (name == "chatglm3") {
    GLM_RETURN_IF_ERROR(
        need({"[gMASK]", "sop", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}));
    return std::unique_ptr<ChatTemplate>(new ChatGlm3Template(t));
  }
  if (name == "glm4") {
    GLM_RETURN_IF_ERROR(
        need({"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}));
    return std::unique_ptr<ChatTemplate>(new Glm4Template(t));
  }
  if (name == "glm4-0414" || name == "glm-z1") {
    GLM_RETURN_IF_ERROR(
        need({"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}));
    return std::unique_ptr<ChatTemplate>(new Glm4_0414Template(t, name == "glm-z1"));
  }
  if (name == "glm45" || name == "glm47") {
    GLM_RETURN_IF_ERROR(
        need({"[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"}));
    return detail::make_glm45_template(t, name == "glm47");
  }
  if (name == "chatglm2") {
    GLM_RETURN_IF_ERROR(need({"[gMASK]", "sop"}));
    return std::unique_ptr<ChatTemplate>(new ChatGlm2Template(t));
  }
  if (name == "chatglm1") {
    GLM_RETURN_IF_ERROR(need({"[gMASK]", "<sop>"}));
    return std::unique_ptr<ChatTemplate>(new ChatGlm1Template(t));
  }
  if (name == "llama2") return std::unique_ptr<ChatTemplate>(new Llama2Template(t));
  if (name == "raw") {
    bool add_bos = std::string(t.kind()) == "llama";
    if (const gguf::Value* v = file.find("tokenizer.ggml.add_bos_token");
        v && v->type() == gguf::ValueType::kBool) {
      add_bos = v->as_bool();
    }
    return std::unique_ptr<ChatTemplate>(new RawTemplate(t, add_bos));
  }
  return invalid_argument(
      "unknown chat template '" + name +
      "' (use chatglm3, chatglm2, chatglm1, glm4, glm4-0414, glm-z1, glm45, glm47, llama2 or raw)");
}

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::for_model(const gguf::File& file,
                                                                const Tokenizer& tokenizer) {
  return make_chat_template(detect(file, tokenizer), file, tokenizer);
}

}  // namespace glm::tok
