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
// (read_tool_answer), so a streamed call reassembles to exactly the non-streamed one. One call
// per answer: ChatGLM3 and GLM-4 put one call in a turn; of GLM-4.5's several calls the first
// is read and the text after it dropped (parse_glm45_tool_calls reads them all). A GLM-4.5 call
// that is cut (no </tool_call> at the end), malformed or names no allowed function is text. The
// gateway reads answers with it for its clients, and the engine reads its own answers with it to
// know how a client will send them back (the next turn's KV reuse). Not thread-safe; one per
// answer. Cost: O(text).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "generation/tool_delta.h"

namespace glm::tok {

using ToolDelta = generation::ToolDelta;

class ToolCallStream {
 public:
  // `names`: the functions the model may call (a first line naming another is plain text).
  explicit ToolCallStream(std::vector<std::string> names);
  // Deltas for the next piece of generated text.
  std::vector<ToolDelta> feed(const std::string& text);
  // Deltas for what was held back, at the end of the answer. An answer that ended inside a
  // GLM-4.5 call (no </tool_call>) gives that call's text as one kCutCall delta.
  std::vector<ToolDelta> finish();
  bool is_call() const {
    return state_ == State::kJsonArgs || state_ == State::kPythonArgs || state_ == State::kXmlDone;
  }
  const std::string& name() const { return name_; }

 private:
  // kXmlCall: inside a GLM-4.5 <tool_call> (held_ = its text so far); kXmlDone: after it.
  enum class State { kStart, kContent, kArgsStart, kJsonArgs, kPythonArgs, kXmlCall, kXmlDone };
  void decide_start(std::vector<ToolDelta>* out);
  void decide_args(std::vector<ToolDelta>* out);
  void decide_xml(std::vector<ToolDelta>* out);
  // Content, watching for GLM-4.5's <tool_call>: held_ keeps a suffix that may begin one.
  void content(std::string_view text, std::vector<ToolDelta>* out);
  void emit_content(std::string_view text, std::vector<ToolDelta>* out);

  std::vector<std::string> names_;
  State state_ = State::kStart;
  std::string held_;  // text not yet classified (the ChatGLM3 block, GLM-4.5's call so far)
  std::string name_;
  std::string space_before_call_;  // dropped before a GLM-4.5 call; back if it is text after all
  bool content_started_ = false;   // a plain answer's first non-whitespace was emitted
};

// The whole answer's deltas, joined: content text, and the call (empty name if none).
struct ToolAnswer {
  std::string content;
  std::string name;
  std::string arguments;
};
ToolAnswer join_tool_deltas(const std::vector<ToolDelta>& deltas);
// The same, onto an answer joined so far (a kCutCall piece is text).
void add_tool_deltas(const std::vector<ToolDelta>& deltas, ToolAnswer* answer);
// A whole (non-streamed) answer read as the stream reads it: feed(text), finish(), joined.
ToolAnswer read_tool_answer(const std::vector<std::string>& names, const std::string& text);

}  // namespace glm::tok
