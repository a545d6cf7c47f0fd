// A piece of an answer read for tool calls (tok::ToolCallStream does the reading): plain content,
// a call's start (the function's name), a fragment of its JSON arguments, or the text of a
// GLM-4.5 call the answer ended inside (content, unless max_tokens cut the answer: then no
// call and no text). The engine reads each answer once and sends the pieces with its events
// (Event::tool); the gateway sends them on to clients as each API spells calls. Value type.
#pragma once

#include <string>

namespace glm::generation {

struct ToolDelta {
  enum class Kind { kContent, kCallStart, kArguments, kCutCall };
  Kind kind = Kind::kContent;
  // kContent: text; kCallStart: the function name; kArguments: a fragment; kCutCall: the text of
  // the unfinished call (from "<tool_call>" on, with the whitespace before it).
  std::string text;
};

// The wire's names of the kinds ("content", "call", "args", "cut_call"), and back (false:
// unknown).
const char* tool_delta_kind_name(ToolDelta::Kind k);
bool parse_tool_delta_kind(const std::string& name, ToolDelta::Kind* k);

}  // namespace glm::generation
