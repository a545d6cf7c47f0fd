// AnswerFilter: the clean-up a model's official chat() applies to its answer text, done on the
// stream. Input: whole UTF-8 characters (StreamDecoder output, after stop strings); output is
// whole characters too. Text a later character could still change is held back until it is
// known (at most a few characters), and flush() ends the answer.
// One per answer; not thread-safe.
//
// Chatglm1AnswerFilter: THUDM/chatglm-6b's ChatGLMForConditionalGeneration.process_response:
//   strip() the answer (leading and trailing whitespace, as Python's str.isspace());
//   "[[训练时间]]" -> "2023年";
//   an ASCII , ! : ; ? next to a CJK ideograph (U+4E00-U+9FFF, before or after it) -> its
//   full-width form ，！：；？ (its regular expressions, one pair per mark).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace glm::tok {

class AnswerFilter {
 public:
  virtual ~AnswerFilter() = default;
  // Appends text; returns what is safe to send.
  virtual std::string push(std::string_view text) = 0;
  // The rest, at the end of the answer.
  virtual std::string flush() = 0;
};

class Chatglm1AnswerFilter final : public AnswerFilter {
 public:
  std::string push(std::string_view text) override;
  std::string flush() override;

 private:
  // Emits from held_ what is decided; `end`: nothing follows.
  std::string drain(bool end);
  std::string held_;
  bool started_ = false;  // a non-space character was sent
  uint32_t prev_ = 0;     // the last code point sent (0: none)
};

std::unique_ptr<AnswerFilter> make_chatglm1_answer_filter();

}  // namespace glm::tok
