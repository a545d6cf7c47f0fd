// Chat prompts as token ids, exactly as each model's official tokenizer builds them
// (ChatGLM3 build_chat_input, ChatGLM2 "[Round N]", ChatGLM-6B "[Round N]" + [gMASK] <sop>,
// GLM-4, GLM-4-0414 / GLM-Z1 and GLM-4.5's chat_template.jinja, LLaMA-2 plain), plus stop tokens.
// Immutable; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "generation/request.h"
#include "gguf/gguf.h"
#include "tokenizer/answer_filter.h"
#include "tokenizer/tokenizer.h"

namespace glm::tok {

using Message = generation::Message;  // role, content, metadata, tools, arguments

// ChatGLM3's system sentence for tools (its official tool-use demo), used when a system message
// carries tools and no text.
inline constexpr const char* kChatGlm3ToolsSentence =
    "Answer the following questions as best as you can. You have access to the following tools:";

// What a request may ask of a template beyond its messages: the chat_template_kwargs of vLLM's
// and llama-server's APIs that our templates read. A template that reads none ignores them.
struct TemplateOptions {
  // GLM-4.5's enable_thinking (its chat_template.jinja): false appends "/nothink" to each user
  // turn (unless it ends with it) and opens the answer with an empty "<think></think>", so the
  // model answers without thinking (GLM-4.7's: the prompt ends "</think>" instead of "<think>").
  // true = the template's default (it thinks).
  bool enable_thinking = true;
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // Chooses the template from the file's architecture and vocabulary (ChatGLM2 vs 3 vs GLM-4...).
  // `tokenizer` must outlive the template.
  static StatusOr<std::unique_ptr<ChatTemplate>> for_model(const gguf::File& file,
                                                           const Tokenizer& tokenizer);
  // "chatglm3", "chatglm2", "chatglm1", "glm4", "glm4-0414", "glm-z1", "glm45", "glm47", "llama2",
  // "raw"
  virtual const char* name() const = 0;
  // Prompt ids ready for generation (ends with the assistant role marker). invalid_argument for
  // an unknown role.
  virtual StatusOr<std::vector<int32_t>> render(const std::vector<Message>& messages) const = 0;
  // render() with the request's options; the default ignores them (GLM-4.5's reads
  // enable_thinking).
  virtual StatusOr<std::vector<int32_t>> render_with(const std::vector<Message>& messages,
                                                     const TemplateOptions& /*options*/) const {
    return render(messages);
  }
  // Ids that end generation (eos, <|user|>, <|observation|>...).
  virtual std::vector<int32_t> stop_ids() const = 0;
  // True if render() ends with a generation marker (<|assistant|>, 答：...) that a rendered
  // history does not share with a longer prompt; false for the raw template, whose render is
  // just the contents (so a history render is a prefix of the next prompt where the tokenizer
  // cuts cleanly at the message boundary). engine/prompt.h uses it to split turns.
  virtual bool render_ends_with_marker() const { return true; }
  // True if answers start with whitespace that the official code strips (ChatGLM3 and GLM-4:
  // "<|assistant|>" is followed by metadata + "\n"): use StreamDecoder's
  // set_strip_leading_whitespace(true) for chat answers.
  virtual bool strips_answer_whitespace() const { return false; }
  // The clean-up the model's own chat() applies to answer text (answer_filter.h), or null.
  // ChatGLM-6B: HF's process_response (strip, full-width marks beside Chinese text).
  virtual std::unique_ptr<AnswerFilter> answer_filter() const { return nullptr; }
  // True for a reasoning model's template (GLM-Z1, GLM-4.5): its answers start with
  // "<think>...</think>", which --reasoning-format auto splits off (tokenizer/reasoning.h).
  virtual bool reasoning() const { return false; }
  // True if render_with(..., options) ends inside the thinking (the generation prompt writes
  // "<think>": GLM-Z1 always, GLM-4.7 unless options turn thinking off).
  virtual bool opens_reasoning(const TemplateOptions& /*options*/) const { return false; }
};

// How the template is chosen (for_model):
//   general.architecture deepseek2 with [gMASK] and <|user|> -> glm47 (GLM-4.7-Flash)
//   general.architecture glm4moe with [gMASK] and <|user|> -> glm47 if tokenizer.chat_template
//                                                          holds "clear_thinking" (GLM-4.7's),
//                                                          else glm45 (GLM-4.5, 4.5-Air, 4.6)
//   general.architecture glm4 with [gMASK] and <|user|>  -> glm-z1 if tokenizer.chat_template
//                                                          holds "<think>", else glm4-0414
//   [gMASK], <sop> and <|user|> (GLM-4's gpt2 vocab)   -> glm4
//   [gMASK], sop and <|user|> (ChatGLM3's llama vocab) -> chatglm3
//   [gMASK] and <sop> but no <|user|> (ChatGLM-6B)      -> chatglm1
//   [gMASK] and sop but no <|user|> (ChatGLM2)          -> chatglm2
//   tokenizer.chat_template containing "[INST]"       -> llama2
//   anything else (e.g. stories260K)                   -> raw: BOS (if add_bos) + the contents
// `name` forces one of the names above instead (unsupported if the vocabulary lacks its tokens).
StatusOr<std::unique_ptr<ChatTemplate>> make_chat_template(const std::string& name,
                                                           const gguf::File& file,
                                                           const Tokenizer& tokenizer);

// A tool call found in the assistant's output (ChatGLM3's block, GLM-4.5's XML).
struct ToolCall {
  std::string name;       // function name (the metadata line), or "interpreter"
  std::string arguments;  // JSON object text of the keyword arguments of tool_call(...); empty
                          // if they could not be parsed (then `code` holds the raw text)
  std::string code;       // the code block's body (for the code interpreter, or unparsed calls)
};

// The assistant's output split as HF ChatGLM3's process_response does: the first line is the
// metadata (empty for a plain answer, whose content is then trimmed); a non-empty metadata
// line is a tool call whose arguments are the Python keyword arguments of
// "```python\ntool_call(a=1, b='x')\n```" converted to JSON.
struct AssistantOutput {
  std::string content;  // plain answer (trimmed), or the raw tool-call body
  std::optional<ToolCall> tool_call;
};
AssistantOutput parse_assistant_output(std::string_view text);

// "```python\ntool_call(city='Paris', days=3)\n```" from '{"city":"Paris","days":3}': Python
// reprs in the arguments' order. invalid_argument if the text is not a JSON object or a key is
// not a Python identifier.
StatusOr<std::string> python_tool_call(std::string_view arguments_json);
// GLM-4's tool system text (official glm-4-9b-chat chat template, tool type "function"): the
// assistant sentence, "# 可用工具", then per function "## name", the function as
// json.dumps(indent=4, ensure_ascii=False) in the client's key order, and the JSON-arguments
// note. It follows a <|system|> token.
StatusOr<std::string> glm4_tools_prompt(const nlohmann::ordered_json& tools);
// GLM-4-0414 / GLM-Z1's tool system text (their chat_template.jinja): the assistant sentence,
// "# 可用工具", then per function "\n## name\n\n", the function as json.dumps(indent=4,
// ensure_ascii=False) in the client's key order, and the JSON-arguments note. It follows a
// <|system|> token. A tool may be a bare function or {"type":"function","function":{...}}.
StatusOr<std::string> glm4_0414_tools_prompt(const nlohmann::ordered_json& tools);
// What GLM-4-0414 / GLM-Z1's template renders of a message's content: the text after its last
// "</think>" (all of it if none), without leading and trailing whitespace (Python's strip()).
std::string glm4_0414_visible(std::string_view content);
// Shortcut: the tool call in `text`, if any.
std::optional<ToolCall> parse_tool_call(std::string_view text);

// GLM-4.5's tool system text (its chat_template.jinja): "# Tools", the sentences, "<tools>", one
// line per tool as json.dumps(tool, ensure_ascii=False) of the client's tool object (a bare
// function is wrapped as OpenAI's {"type": "function", "function": {...}}, which is what the
// template receives from an OpenAI client), "</tools>" and the XML call format. It follows a
// <|system|> token. `glm47`: GLM-4.7's, whose call format has no newlines.
StatusOr<std::string> glm45_tools_prompt(const nlohmann::ordered_json& tools, bool glm47 = false);
// Python's json.dumps(v, ensure_ascii=False) (the chat templates' tojson): one line, ", " and
// ": " separators, keys in their order, UTF-8 as it is.
std::string python_json(const nlohmann::ordered_json& v);

// How an answer's calls are read against the request's functions.
struct ToolReading {
  // Per function, the parameters its JSON Schema types "string" (or a type list holding
  // "string"): their GLM-4.5 values stay text, so "7" stays "7" and "true" stays "true"
  // (vLLM's Glm4MoeModelToolParser reads them so); any other value that is JSON becomes that
  // JSON value ("7" is 7), and text otherwise.
  std::map<std::string, std::set<std::string>> text_params;
  // Every GLM-4.5 call of an answer, one after another (the default); false: only the first
  // (OpenAI's parallel_tool_calls: false). ChatGLM3 and GLM-4 make one call a turn.
  bool several = true;
};
// The reading for `functions` (a JSON array of function objects {"name", "parameters"}, as
// generation::GenerateRequest::tools holds them; entries without a name are skipped).
ToolReading tool_reading(const nlohmann::ordered_json& functions, bool several = true);

// GLM-4.5's tool calls in an answer: "<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V
// </arg_value>\n...</tool_call>", any number of them, text before the first (vLLM's
// Glm4MoeModelToolParser, whose rules these follow: the name up to the first newline or
// <arg_key>, keys and values stripped, a value typed as ToolReading says; `arguments` is the
// object's JSON text). A call whose body is not pairs of complete tags, or that has no name, is
// no call: parse returns nullopt for the body. Never throws. Without a reading, every value
// that is JSON is read as JSON.
struct Glm45Calls {
  std::string content;          // the text before the first call (all of it if none)
  std::vector<ToolCall> calls;  // in order; empty if none
};
Glm45Calls parse_glm45_tool_calls(std::string_view text, const ToolReading* reading = nullptr);
// One call's body, the text between <tool_call> and </tool_call>; nullopt if malformed.
std::optional<ToolCall> parse_glm45_call(std::string_view body,
                                         const ToolReading* reading = nullptr);

namespace detail {
// The GLM-4.5 template, or GLM-4.7's (chat_template_glm45.cc); make_chat_template("glm45" or
// "glm47", ...) is the door.
std::unique_ptr<ChatTemplate> make_glm45_template(const Tokenizer& tokenizer, bool glm47);
}  // namespace detail

}  // namespace glm::tok
