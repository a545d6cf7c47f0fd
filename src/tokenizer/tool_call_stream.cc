#include "tokenizer/tool_call_stream.h"

#include <algorithm>
#include <optional>

#include "tokenizer/chat_template.h"

namespace glm::tok {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

constexpr std::string_view kPythonBlock = "```";
constexpr std::string_view kXmlOpen = "<tool_call>";
constexpr std::string_view kXmlClose = "</tool_call>";

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ToolCallStream::ToolCallStream(std::vector<std::string> names, ToolReading reading)
    : names_(std::move(names)), reading_(std::move(reading)) {}

std::vector<ToolDelta> ToolCallStream::feed(const std::string& text) {
  std::vector<ToolDelta> out;
  switch (state_) {
    case State::kContent:
      content(text, &out);
      return out;
    case State::kXmlCall:
      held_ += text;
      decide_xml(&out);
      return out;
    case State::kXmlAfter:
      held_ += text;
      after_call(&out);
      return out;
    case State::kXmlDone:  // after the last call read: the rest is not read
      return out;
    case State::kJsonArgs:
      if (!text.empty()) out.push_back({ToolDelta::Kind::kArguments, text});
      return out;
    case State::kPythonArgs:
      held_ += text;
      return out;
    case State::kStart:
      held_ += text;
      decide_start(&out);
      return out;
    case State::kArgsStart:
      held_ += text;
      decide_args(&out);
      return out;
  }
  return out;
}

// Is the held text the start of "NAME\n" for an allowed name (keep holding), exactly one
// (a call), or neither (content)?
void ToolCallStream::decide_start(std::vector<ToolDelta>* out) {
  size_t b = 0;
  while (b < held_.size() && is_space(held_[b])) ++b;
  const std::string_view rest = std::string_view(held_).substr(b);
  if (rest.substr(0, kXmlOpen.size()) == kXmlOpen) {  // GLM-4.5: a call first
    held_.erase(0, b + kXmlOpen.size());
    state_ = State::kXmlCall;
    decide_xml(out);
    return;
  }
  if (kXmlOpen.substr(0, rest.size()) == rest) return;  // maybe "<tool_call>" yet
  const size_t nl = held_.find('\n');
  if (nl == std::string::npos) {
    const bool maybe = !held_.empty() && std::any_of(names_.begin(), names_.end(), [&](auto& n) {
      return n.size() >= held_.size() && n.compare(0, held_.size(), held_) == 0;
    });
    if (maybe || held_.empty()) return;
  } else {
    const std::string first = held_.substr(0, nl);
    if (std::find(names_.begin(), names_.end(), first) != names_.end()) {
      name_ = first;
      held_.erase(0, nl + 1);
      state_ = State::kArgsStart;
      out->push_back({ToolDelta::Kind::kCallStart, name_});
      decide_args(out);
      return;
    }
  }
  // A plain answer: its leading whitespace is dropped, the rest flows as it comes.
  state_ = State::kContent;
  std::string held = std::move(held_);
  held_.clear();
  content(held, out);
}

void ToolCallStream::content(std::string_view text, std::vector<ToolDelta>* out) {
  held_ += text;
  const size_t open = held_.find(kXmlOpen);
  size_t cut = open != std::string::npos ? open : held_.size() - partial_suffix(held_, kXmlOpen);
  const size_t marker = cut;
  while (cut > 0 && is_space(held_[cut - 1])) --cut;  // whitespace before a call is dropped
  if (open == std::string::npos) {
    emit_content(std::string_view(held_).substr(0, cut), out);
    held_.erase(0, cut);
    return;
  }
  emit_content(std::string_view(held_).substr(0, cut), out);
  space_before_call_ = held_.substr(cut, marker - cut);
  held_.erase(0, marker + kXmlOpen.size());
  state_ = State::kXmlCall;
  decide_xml(out);
}

// A GLM-4.5 call is read when its </tool_call> comes: a well-formed call of an allowed function
// is the answer's next call; anything else between the tags is text when no call came before it
// (the answer goes on), and dropped after a call.
void ToolCallStream::decide_xml(std::vector<ToolDelta>* out) {
  const size_t close = held_.find(kXmlClose);
  if (close == std::string::npos) return;
  const std::string_view body = std::string_view(held_).substr(0, close);
  std::optional<ToolCall> call = parse_glm45_call(body, &reading_);
  const bool allowed = call && std::find(names_.begin(), names_.end(), call->name) != names_.end();
  const std::string whole = held_.substr(0, close + kXmlClose.size());  // body and close tag
  std::string rest = held_.substr(close + kXmlClose.size());
  held_.clear();
  if (allowed) {
    ++calls_;
    out->push_back({ToolDelta::Kind::kCallStart, call->name});
    out->push_back({ToolDelta::Kind::kArguments, call->arguments});
  }
  if (calls_ > 0) {
    state_ = reading_.several ? State::kXmlAfter : State::kXmlDone;
    if (state_ == State::kXmlAfter) {
      held_ = std::move(rest);
      after_call(out);
    }
    return;
  }
  emit_content(space_before_call_ + std::string(kXmlOpen) + whole, out);
  state_ = State::kContent;
  content(rest, out);
}

void ToolCallStream::after_call(std::vector<ToolDelta>* out) {
  const size_t open = held_.find(kXmlOpen);
  if (open == std::string::npos) {
    held_.erase(0, held_.size() - partial_suffix(held_, kXmlOpen));
    return;
  }
  held_.erase(0, open + kXmlOpen.size());
  state_ = State::kXmlCall;
  decide_xml(out);
}

void ToolCallStream::emit_content(std::string_view text, std::vector<ToolDelta>* out) {
  if (!content_started_) {
    size_t b = 0;
    while (b < text.size() && is_space(text[b])) ++b;
    text.remove_prefix(b);
    if (text.empty()) return;
    content_started_ = true;
  }
  if (!text.empty()) out->push_back({ToolDelta::Kind::kContent, std::string(text)});
}

// ChatGLM3's block starts with ``` after optional whitespace; anything else is GLM-4 JSON.
void ToolCallStream::decide_args(std::vector<ToolDelta>* out) {
  size_t b = 0;
  while (b < held_.size() && is_space(held_[b])) ++b;
  const std::string_view rest = std::string_view(held_).substr(b);
  const size_t n = std::min(rest.size(), kPythonBlock.size());
  if (rest.substr(0, n) == kPythonBlock.substr(0, n)) {
    if (n == kPythonBlock.size()) state_ = State::kPythonArgs;
    return;  // still a possible block: hold
  }
  state_ = State::kJsonArgs;
  out->push_back({ToolDelta::Kind::kArguments, std::string(rest)});
  held_.clear();
}

std::vector<ToolDelta> ToolCallStream::finish() {
  std::vector<ToolDelta> out;
  if (state_ == State::kStart || state_ == State::kContent) {
    // Ended while the text could still have been a name or a call's start: it is content.
    state_ = State::kContent;
    emit_content(held_, &out);
  } else if (state_ == State::kXmlCall && calls_ == 0) {
    // A first call that never closed (cut, or malformed): its text, content unless cut (the
    // reader of the deltas knows why the answer ended). One after a call is dropped.
    state_ = State::kContent;
    out.push_back({ToolDelta::Kind::kCutCall, space_before_call_ + std::string(kXmlOpen) + held_});
  } else if (state_ == State::kArgsStart) {
    // Only whitespace or a partial "``" after the name: no arguments, which is the empty object
    // (a client must be able to send the call back: its arguments are JSON object text).
    state_ = State::kJsonArgs;
    size_t b = 0;
    while (b < held_.size() && is_space(held_[b])) ++b;
    out.push_back({ToolDelta::Kind::kArguments, b < held_.size() ? held_.substr(b) : "{}"});
  } else if (state_ == State::kPythonArgs) {
    // tool_call(k=v) -> JSON; a block that does not parse is passed on as written.
    const AssistantOutput parsed = parse_assistant_output(name_ + "\n" + held_);
    std::string args = parsed.tool_call && !parsed.tool_call->arguments.empty()
                           ? parsed.tool_call->arguments
                           : held_;
    out.push_back({ToolDelta::Kind::kArguments, std::move(args)});
  }
  held_.clear();
  return out;
}

ToolAnswer read_tool_answer(const std::vector<std::string>& names, const std::string& text,
                            const ToolReading& reading) {
  ToolCallStream s(names, reading);
  std::vector<ToolDelta> d = s.feed(text);
  for (ToolDelta& x : s.finish()) d.push_back(std::move(x));
  return join_tool_deltas(d);
}

void add_tool_deltas(const std::vector<ToolDelta>& deltas, ToolAnswer* a) {
  for (const ToolDelta& d : deltas) {
    switch (d.kind) {
      case ToolDelta::Kind::kContent:
      case ToolDelta::Kind::kCutCall:
        a->content += d.text;
        break;
      case ToolDelta::Kind::kCallStart:
        a->calls.push_back({d.text, "", ""});
        break;
      case ToolDelta::Kind::kArguments:
        if (!a->calls.empty()) a->calls.back().arguments += d.text;
        break;
    }
  }
}

ToolAnswer join_tool_deltas(const std::vector<ToolDelta>& deltas) {
  ToolAnswer a;
  add_tool_deltas(deltas, &a);
  return a;
}

}  // namespace glm::tok
