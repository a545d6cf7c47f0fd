#include "tokenizer/answer_filter.h"

#include "tokenizer/unicode.h"

namespace glm::tok {

namespace {

constexpr std::string_view kTrainingTime = "[[训练时间]]";
constexpr std::string_view kTrainingYear = "2023年";

// The code point at s[i] and its length in bytes (s is whole UTF-8 characters).
uint32_t code_point(std::string_view s, size_t i, size_t* len) {
  size_t next = i;
  const uint32_t cp = utf8_next(s, &next);
  *len = next - i;
  return cp;
}

bool is_cjk(uint32_t cp) { return cp >= 0x4E00 && cp <= 0x9FFF; }
// Python's str.isspace(), which strip() uses: Unicode White_Space and U+001C-U+001F.
bool is_space(uint32_t cp) { return is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }
// The full-width form of , ! : ; ? ; empty for any other character.
std::string_view full_width(uint32_t cp) {
  switch (cp) {
    case ',':
      return "，";
    case '!':
      return "！";
    case ':':
      return "：";
    case ';':
      return "；";
    case '?':
      return "？";
    default:
      return {};
  }
}

}  // namespace

std::string Chatglm1AnswerFilter::push(std::string_view text) {
  held_.append(text);
  return drain(false);
}

std::string Chatglm1AnswerFilter::flush() {
  std::string out = drain(true);
  held_.clear();
  return out;
}

std::string Chatglm1AnswerFilter::drain(bool end) {
  std::string out;
  size_t i = 0;
  while (i < held_.size()) {
    size_t len = 0;
    const uint32_t cp = code_point(held_, i, &len);
    if (is_space(cp)) {
      // A run of whitespace: dropped at the start; in the middle sent once a non-space follows;
      // at the end dropped (strip()).
      size_t j = i;
      while (j < held_.size()) {
        size_t l = 0;
        if (!is_space(code_point(held_, j, &l))) break;
        j += l;
      }
      if (!started_) {
        i = j;
        continue;
      }
      if (j == held_.size()) {
        if (end) i = j;
        break;
      }
      out.append(held_, i, j - i);
      prev_ = ' ';
      i = j;
      continue;
    }
    if (cp == '[') {
      const std::string_view rest = std::string_view(held_).substr(i);
      if (rest.substr(0, kTrainingTime.size()) == kTrainingTime) {
        out.append(kTrainingYear);
        prev_ = 0x5E74;  // 年
        started_ = true;
        i += kTrainingTime.size();
        continue;
      }
      if (!end && rest.size() < kTrainingTime.size() &&
          kTrainingTime.substr(0, rest.size()) == rest) {
        break;  // could still become the marker
      }
    }
    const std::string_view wide = full_width(cp);
    if (!wide.empty()) {
      bool next_cjk = false;
      if (i + len < held_.size()) {
        size_t l = 0;
        next_cjk = is_cjk(code_point(held_, i + len, &l));
      } else if (!end) {
        break;  // the next character decides
      }
      if (is_cjk(prev_) || next_cjk) {
        out.append(wide);
        prev_ = cp;  // an ASCII mark's code point: not CJK, as in the original text
        started_ = true;
        i += len;
        continue;
      }
    }
    out.append(held_, i, len);
    prev_ = cp;
    started_ = true;
    i += len;
  }
  held_.erase(0, i);
  return out;
}

std::unique_ptr<AnswerFilter> make_chatglm1_answer_filter() {
  return std::make_unique<Chatglm1AnswerFilter>();
}

}  // namespace glm::tok
