// A reasoning model's thinking, apart from its answer. GLM-Z1 and GLM-4.5 (and the reasoning
// models of other families) write "<think>...</think>" before the answer; clients receive it as
// reasoning (OpenAI `reasoning_content`, Anthropic `thinking` blocks), not as content.
//
// ReasoningSplitter turns the text as it is generated into reasoning and content: a leading
// "<think>" (after whitespace) opens the reasoning, "</think>" closes it, and whitespace at the
// start of the answer after it is dropped. A text that does not start with "<think>" is all
// content. A prompt that already ends with "<think>" (a template that opens it) starts inside.
// A marker split across pieces is held back until it is known; the answer's last piece (`end`)
// releases what is held (an unterminated thinking stays reasoning). The joined output of any split
// of a text into pieces is the same as for the whole text. Not thread-safe; one per answer. Cost:
// O(text).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace glm::tok {

// Whether answers are split (engine::Options::reasoning, --reasoning-format).
enum class ReasoningFormat {
  kAuto,   // when the chat template is a reasoning model's (ChatTemplate::reasoning)
  kNone,   // never: the thinking stays in the content, as the model wrote it
  kThink,  // any answer that starts with <think> (e.g. a reasoning model without our template)
};
const char* reasoning_format_name(ReasoningFormat f);
std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name);

struct ReasoningPiece {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  // `opened`: the prompt ends inside a thinking block (its template wrote "<think>").
  explicit ReasoningSplitter(bool opened = false);
  // The next piece of the answer; `end`: it is the last (then nothing is held back).
  ReasoningPiece feed(std::string_view text, bool end = false);
  bool in_reasoning() const { return state_ == State::kReasoning; }

 private:
  enum class State { kStart, kReasoning, kAfter, kContent };
  void step(ReasoningPiece* out, bool end);

  State state_;
  std::string held_;  // text not yet known to be reasoning or content
};

}  // namespace glm::tok
