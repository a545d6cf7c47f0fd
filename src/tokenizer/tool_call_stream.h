// Tool calls in a GLM model's answer. ChatGLM3 and GLM-4 call a tool by starting their answer
// with its name on a line of its own; the arguments follow in the model's format: GLM-4 writes
// JSON, ChatGLM3 a "```python\ntool_call(k=v, ...)\n```" block (converted to JSON here).
// GLM-4.5 writes "<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...
// </tool_call>", after text or not (parse_glm45_call in chat_template.h turns it into JSON
// arguments). Anything else is a plain answer (leading whitespace dropped, as HF's
// process_response does).
//
// ToolCallStream turns the text as it is generated into deltas: plain content as soon as it is
// known not to be a call, a call's start (its name) as soon as its name line is complete, its
// arguments as they arrive (GLM-4 JSON) or at the end (ChatGLM3, whose block is converted
// whole; GLM-4.5's when its </tool_call> comes, the text before it having streamed, without
// the whitespace just before the call). The whole answer is the same deltas joined
// (read_tool_answer), so a streamed call reassembles to exactly the non-streamed one. ChatGLM3
// and GLM-4 put one call in a turn; GLM-4.5 writes its calls one after another, and each is read
// (each kCallStart delta begins the next call; ToolReading::several = false keeps the first):
// text after the first call, and calls after it that are malformed, cut or name no allowed
// function, are dropped, as vLLM's parser drops them. A GLM-4.5 first call that is cut (no
// </tool_call> at the end), malformed or names no allowed function is text. Argument values are
// typed by the functions' schemas (ToolReading). The gateway reads answers with it for its
// clients, and the engine reads its own answers with it to know how a client will send them back
// (the next turn's KV reuse). Not thread-safe; one per answer. Cost: O(text).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "generation/tool_delta.h"
#include "tokenizer/chat_template.h"

namespace glm::tok {

using ToolDelta = generation::ToolDelta;

class ToolCallStream {
 public:
  // `names`: the functions the model may call (a first line naming another is plain text).
  explicit ToolCallStream(std::vector<std::string> names, ToolReading reading = {});
  // Deltas for the next piece of generated text.
  std::vector<ToolDelta> feed(const std::string& text);
  // Deltas for what was held back, at the end of the answer. An answer that ended inside its
  // first GLM-4.5 call (no </tool_call>) gives that call's text as one kCutCall delta.
  std::vector<ToolDelta> finish();
  // The answer calls a function (its first call has started).
  bool is_call() const {
    return calls_ > 0 || state_ == State::kJsonArgs || state_ == State::kPythonArgs;
  }

 private:
  // kXmlCall: inside a GLM-4.5 <tool_call> (held_ = its text so far); kXmlAfter: after a call,
  // watching for the next (held_ = a suffix that may begin one); kXmlDone: after the last call
  // read (ToolReading::several false).
  enum class State {
    kStart,
    kContent,
    kArgsStart,
    kJsonArgs,
    kPythonArgs,
    kXmlCall,
    kXmlAfter,
    kXmlDone
  };
  void decide_start(std::vector<ToolDelta>* out);
  void decide_args(std::vector<ToolDelta>* out);
  void decide_xml(std::vector<ToolDelta>* out);
  // After a GLM-4.5 call: the next <tool_call> opens a call; anything else is dropped.
  void after_call(std::vector<ToolDelta>* out);
  // Content, watching for GLM-4.5's <tool_call>: held_ keeps a suffix that may begin one.
  void content(std::string_view text, std::vector<ToolDelta>* out);
  void emit_content(std::string_view text, std::vector<ToolDelta>* out);

  std::vector<std::string> names_;
  ToolReading reading_;
  State state_ = State::kStart;
  std::string held_;  // text not yet classified (the ChatGLM3 block, GLM-4.5's call so far)
  std::string name_;  // a ChatGLM3 / GLM-4 call's function (its Python block is read at the end)
  int calls_ = 0;     // GLM-4.5 calls read
  std::string space_before_call_;  // dropped before a GLM-4.5 call; back if it is text after all
  bool content_started_ = false;   // a plain answer's first non-whitespace was emitted
};

// The whole answer's deltas, joined: content text, and the calls in order (none: a plain
// answer).
struct ToolAnswer {
  std::string content;
  std::vector<ToolCall> calls;  // name and JSON arguments text (ToolCall::code unused)
};
ToolAnswer join_tool_deltas(const std::vector<ToolDelta>& deltas);
// The same, onto an answer joined so far (a kCutCall piece is text).
void add_tool_deltas(const std::vector<ToolDelta>& deltas, ToolAnswer* answer);
// A whole (non-streamed) answer read as the stream reads it: feed(text), finish(), joined.
ToolAnswer read_tool_answer(const std::vector<std::string>& names, const std::string& text,
                            const ToolReading& reading = {});

}  // namespace glm::tok
