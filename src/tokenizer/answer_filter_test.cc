// Chatglm1AnswerFilter against a whole-text reference written from HF's process_response
// (strip, the training-time marker, then each mark's two regular expressions), on hand cases and
// on random answers cut into stream pieces at every character.
#include "tokenizer/answer_filter.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/unicode.h"

namespace glm::tok {
namespace {

// Code points of a UTF-8 string and back.
std::u32string cps(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) out.push_back(utf8_next(s, &i));
  return out;
}
std::string utf8(const std::u32string& s) {
  std::string out;
  for (char32_t c : s) out += utf8_encode(c);
  return out;
}

bool cjk(char32_t c) { return c >= 0x4E00 && c <= 0x9FFF; }
bool space(char32_t c) { return c == ' ' || c == '\n' || c == '\t' || c == 0x3000; }

// process_response, step by step as the Python code does it (whole text).
std::string reference(const std::string& text) {
  std::u32string s = cps(text);
  size_t a = 0, b = s.size();
  while (a < b && space(s[a])) ++a;
  while (b > a && space(s[b - 1])) --b;
  s = s.substr(a, b - a);
  const std::u32string marker = cps("[[训练时间]]"), year = cps("2023年");
  for (size_t p = s.find(marker); p != std::u32string::npos; p = s.find(marker, p + year.size())) {
    s.replace(p, marker.size(), year);
  }
  const std::vector<std::pair<char32_t, char32_t>> punkts = {
      {',', U'，'}, {'!', U'！'}, {':', U'：'}, {';', U'；'}, {'?', U'？'}};
  for (const auto& [ascii, wide] : punkts) {
    // re.sub(r"([\u4e00-\u9fff])" + mark, ...): left to right, matches do not overlap.
    for (size_t i = 0; i + 1 < s.size();) {
      if (cjk(s[i]) && s[i + 1] == ascii) {
        s[i + 1] = wide;
        i += 2;
      } else {
        ++i;
      }
    }
    // re.sub(mark + r"([\u4e00-\u9fff])", ...)
    for (size_t i = 0; i + 1 < s.size();) {
      if (s[i] == ascii && cjk(s[i + 1])) {
        s[i] = wide;
        i += 2;
      } else {
        ++i;
      }
    }
  }
  return utf8(s);
}

std::string streamed(const std::vector<std::string>& pieces) {
  Chatglm1AnswerFilter f;
  std::string out;
  for (const std::string& p : pieces) out += f.push(p);
  return out + f.flush();
}

TEST(Chatglm1AnswerFilter, HandCases) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  你好,我是ChatGLM-6B!  \n", "你好，我是ChatGLM-6B!"},
      {"我于[[训练时间]]训练:完成", "我于2023年训练：完成"},
      {"Hello, world: ok? yes!", "Hello, world: ok? yes!"},
      {"中,,", "中，,"},
      {",中,", "，中，"},
      {"中 ,文", "中 ，文"},
      {"[[训练时", "[[训练时"},
      {"a\n\nb ", "a\n\nb"},
      {"\u3000 ", ""},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(reference(in), want) << "reference, input '" << in << "'";
    EXPECT_EQ(streamed({in}), want) << "input '" << in << "'";
  }
}

TEST(Chatglm1AnswerFilter, EveryStreamCutEqualsTheWholeTextRule) {
  const std::vector<std::string> alphabet = {"中", "文", "a",    "B",    ",",  "!",
                                             ":",  ";",  "?",    " ",    "\n", "\u3000",
                                             "[",  "[[", "训练", "时间", "]]", "[[训练时间]]",
                                             "年", "，"};
  std::mt19937 rng(7);
  for (int n = 0; n < 3000; ++n) {
    std::vector<std::string> pieces;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < len; ++i) pieces.push_back(alphabet[rng() % alphabet.size()]);
    std::string whole;
    for (const std::string& p : pieces) whole += p;
    const std::string want = reference(whole);
    ASSERT_EQ(streamed(pieces), want) << "input '" << whole << "'";
    ASSERT_EQ(streamed({whole}), want) << "input '" << whole << "'";
    // One character at a time.
    std::vector<std::string> chars;
    for (char32_t c : cps(whole)) chars.push_back(utf8(std::u32string(1, c)));
    ASSERT_EQ(streamed(chars), want) << "input '" << whole << "' char by char";
  }
}

}  // namespace
}  // namespace glm::tok
