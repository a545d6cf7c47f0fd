#include "tokenizer/pretokenize.h"

#include <cstdint>

#include "tokenizer/unicode.h"

namespace glm::tok {
namespace {

// A decoded character: code point (invalid bytes carry kInvalidByteFlag) and its end offset.
struct Char {
  uint32_t cp;
  size_t end;
};

Char char_at(std::string_view s, size_t pos) {
  size_t p = pos;
  uint32_t cp = utf8_next(s, &p);
  return {cp, p};
}

bool letter(uint32_t cp) { return !(cp & kInvalidByteFlag) && is_letter(cp); }
bool number(uint32_t cp) { return !(cp & kInvalidByteFlag) && is_number(cp); }
bool space(uint32_t cp) { return !(cp & kInvalidByteFlag) && is_whitespace(cp); }
bool newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d): length of the match at pos, or 0.
size_t contraction(std::string_view s, size_t pos) {
  if (s[pos] != '\'' || pos + 1 >= s.size()) return 0;
  const char a = lower(s[pos + 1]);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= s.size()) return 0;
  const char b = lower(s[pos + 2]);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \p{L}+ from pos: end offset (== pos if none).
size_t letters_end(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    Char c = char_at(s, pos);
    if (!letter(c.cp)) break;
    pos = c.end;
  }
  return pos;
}

}  // namespace

size_t glm4_piece_end(std::string_view s, size_t pos) {
  // 1. contractions
  if (size_t n = contraction(s, pos)) return pos + n;
  const Char c0 = char_at(s, pos);
  // 2. [^\r\n\p{L}\p{N}]?\p{L}+
  if (letter(c0.cp)) return letters_end(s, c0.end);
  if (!newline(c0.cp) && !number(c0.cp) && c0.end < s.size()) {
    size_t e = letters_end(s, c0.end);
    if (e > c0.end) return e;
  }
  // 3. \p{N}{1,3}
  if (number(c0.cp)) {
    size_t e = c0.end;
    for (int k = 1; k < 3 && e < s.size(); ++k) {
      Char c = char_at(s, e);
      if (!number(c.cp)) break;
      e = c.end;
    }
    return e;
  }
  // 4. ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  {
    size_t p = (c0.cp == ' ') ? c0.end : pos;
    size_t e = p;
    while (e < s.size()) {
      Char c = char_at(s, e);
      if (space(c.cp) || letter(c.cp) || number(c.cp)) break;
      e = c.end;
    }
    if (e > p) {
      while (e < s.size() && (s[e] == '\r' || s[e] == '\n')) ++e;
      return e;
    }
  }
  // The remaining alternatives all start with whitespace; c0 is whitespace here (any other
  // character matched alternative 4).
  size_t run_end = pos;
  size_t last_nl_end = 0;  // end of the last \r or \n in the run, 0 if none
  size_t last_char_start = pos;
  while (run_end < s.size()) {
    Char c = char_at(s, run_end);
    if (!space(c.cp)) break;
    last_char_start = run_end;
    if (newline(c.cp)) last_nl_end = c.end;
    run_end = c.end;
  }
  if (run_end == pos) return c0.end;  // defensive: not whitespace (cannot happen)
  // 5. \s*[\r\n]+
  if (last_nl_end != 0) return last_nl_end;
  // 6. \s+(?!\S): the whole run at the end of text, else the run minus its last character.
  if (run_end == s.size()) return run_end;
  if (last_char_start > pos) return last_char_start;
  // 7. \s+
  return run_end;
}

}  // namespace glm::tok
