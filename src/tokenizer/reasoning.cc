#include "tokenizer/reasoning.h"

namespace glm::tok {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

const char* reasoning_format_name(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::kAuto:
      return "auto";
    case ReasoningFormat::kNone:
      return "none";
    case ReasoningFormat::kThink:
      return "think";
  }
  return "auto";
}

std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name) {
  for (ReasoningFormat f :
       {ReasoningFormat::kAuto, ReasoningFormat::kNone, ReasoningFormat::kThink}) {
    if (name == reasoning_format_name(f)) return f;
  }
  return std::nullopt;
}

ReasoningSplitter::ReasoningSplitter(bool opened)
    : state_(opened ? State::kReasoning : State::kStart) {}

ReasoningPiece ReasoningSplitter::feed(std::string_view text, bool end) {
  held_ += text;
  ReasoningPiece out;
  step(&out, end);
  return out;
}

void ReasoningSplitter::step(ReasoningPiece* out, bool end) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t i = 0;
        while (i < held_.size() && is_space(held_[i])) ++i;
        const std::string_view rest = std::string_view(held_).substr(i);
        if (rest.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, i + kOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!end && kOpen.substr(0, rest.size()) == rest) return;  // maybe "<think>" yet
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t close = held_.find(kClose);
        if (close != std::string::npos) {
          out->reasoning += held_.substr(0, close);
          held_.erase(0, close + kClose.size());
          state_ = State::kAfter;
          continue;
        }
        const size_t keep = end ? 0 : partial_suffix(held_, kClose);
        out->reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case State::kAfter: {  // the answer's leading whitespace is dropped
        size_t i = 0;
        while (i < held_.size() && is_space(held_[i])) ++i;
        held_.erase(0, i);
        if (held_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out->content += held_;
        held_.clear();
        return;
    }
  }
}

}  // namespace glm::tok
