// GBNF parser (llama.cpp's grammar syntax) into GrammarBuilder rules.
//   rule ::= alt1 | alt2        sequences, ( groups ), "literals", [classes], [^negated], .
//   x* x+ x? x{m} x{m,} x{m,n} x{,n}       # comments
// A newline ends a rule except inside parentheses, after '|', or before a line starting with
// '|'. Errors name the line and column: "line 3, column 14: undefined rule 'vaule'".
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "grammar/program.h"

namespace glm::grammar {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// A character for an error message: itself if printable ASCII, else \xHH.
std::string shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7F) return std::string(1, c);
  const char* hex = "0123456789ABCDEF";
  return std::string("\\x") + hex[u >> 4] + hex[u & 15];
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr int kMaxDepth = 200;  // nested parentheses

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Status parse(GrammarBuilder* b) {
    skip_space(true);
    if (eof()) return error(pos_, "empty grammar: no rules");
    while (!eof()) {
      size_t start = pos_;
      std::string name = parse_name();
      if (name.empty()) return error(pos_, "expected a rule name");
      skip_space(false);
      if (src_.substr(pos_, 3) != "::=") {
        return error(pos_, "expected '::=' after rule name '" + name + "'");
      }
      pos_ += 3;
      skip_space(true);
      Expr body;
      GLM_RETURN_IF_ERROR(parse_alternates(0, &body));
      Status s = b->add_rule(name, std::move(body), where(start));
      if (!s.ok()) return s;
      skip_space(true);
    }
    return Status::Ok();
  }

 private:
  bool eof() const { return pos_ >= src_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }

  // "line L, column C" (1-based; columns count bytes). Cost: O(log lines).
  std::string where(size_t p) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), p);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    size_t col = p - *(it - 1) + 1;
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
  }
  Status error(size_t p, const std::string& what) const {
    return invalid_argument(where(p) + ": " + what);
  }

  // Skips spaces, tabs and comments; newlines too when `newline_ok`.
  void skip_space(bool newline_ok) {
    while (!eof()) {
      char c = peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!eof() && is_name_char(peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  // At a name: is it the start of the next rule ("name ::=")?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < src_.size() && is_name_char(src_[p])) ++p;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t')) ++p;
    return src_.substr(p, 3) == "::=";
  }

  Status parse_alternates(int depth, Expr* out) {
    std::vector<Expr> alts(1);
    GLM_RETURN_IF_ERROR(parse_sequence(depth, &alts.back()));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.emplace_back();
      GLM_RETURN_IF_ERROR(parse_sequence(depth, &alts.back()));
    }
    *out = alts.size() == 1 ? std::move(alts[0]) : Expr::alt(std::move(alts));
    return Status::Ok();
  }

  Status parse_sequence(int depth, Expr* out) {
    std::vector<Expr> items;
    while (true) {
      skip_space(depth > 0);
      if (depth == 0 && (peek() == '\n' || peek() == '\r')) {
        // A following line that starts with '|' continues this rule.
        size_t save = pos_;
        skip_space(true);
        if (peek() != '|') pos_ = save;
        break;
      }
      if (eof()) break;
      char c = peek();
      size_t start = pos_;
      if (c == '|') break;
      if (c == ')') {
        if (depth == 0) return error(pos_, "unbalanced parentheses: unexpected ')'");
        break;
      }
      if (c == '"') {
        ++pos_;
        std::string text;
        while (true) {
          if (eof()) return error(start, "unterminated string literal");
          if (peek() == '"') break;
          uint32_t cp;
          GLM_RETURN_IF_ERROR(parse_char(&cp));
          detail::append_utf8(&text, cp);
        }
        ++pos_;
        items.push_back(Expr::literal(text).with_origin(where(start)));
      } else if (c == '[') {
        ++pos_;
        bool negated = false;
        if (peek() == '^') negated = true, ++pos_;
        std::vector<CharRange> ranges;
        while (true) {
          if (eof()) return error(start, "unterminated character class: expected ']'");
          if (peek() == ']') break;
          uint32_t lo, hi;
          GLM_RETURN_IF_ERROR(parse_char(&lo));
          hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
            ++pos_;
            size_t at = pos_;
            GLM_RETURN_IF_ERROR(parse_char(&hi));
            if (hi < lo) return error(at, "character range is backwards");
          }
          ranges.push_back({lo, hi});
        }
        ++pos_;
        items.push_back(Expr::chars(std::move(ranges), negated).with_origin(where(start)));
      } else if (c == '.') {
        ++pos_;
        items.push_back(Expr::any_char().with_origin(where(start)));
      } else if (c == '(') {
        if (depth >= kMaxDepth) return error(pos_, "parentheses nested too deeply");
        ++pos_;
        skip_space(true);
        Expr inner;
        GLM_RETURN_IF_ERROR(parse_alternates(depth + 1, &inner));
        skip_space(true);
        if (peek() != ')') {
          return error(start, "unbalanced parentheses: this '(' is never closed");
        }
        ++pos_;
        items.push_back(Expr::seq({std::move(inner)}));
      } else if (is_name_char(c)) {
        if (at_rule_start()) break;  // inside '(': the caller reports the unclosed '('

        std::string name = parse_name();
        items.push_back(Expr::ref(name).with_origin(where(start)));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (items.empty()) return error(pos_, "repetition operator with nothing to repeat");
        int min = 0, max = Expr::kUnbounded;
        ++pos_;
        if (c == '+') {
          min = 1;
        } else if (c == '?') {
          max = 1;
        } else if (c == '{') {
          GLM_RETURN_IF_ERROR(parse_braces(start, &min, &max));
        }
        Expr last = std::move(items.back());
        items.back() = Expr::repeat(std::move(last), min, max).with_origin(where(start));
      } else if (c == '<' || c == '!') {
        return error(pos_, "token references (<...>) are not supported; write the text");
      } else {
        return error(pos_, "unexpected character '" + shown(c) + "'");
      }
    }
    *out = items.size() == 1 ? std::move(items[0]) : Expr::seq(std::move(items));
    return Status::Ok();
  }

  Status parse_int(size_t start, int* v) {
    size_t b = pos_;
    long n = 0;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      n = n * 10 + (peek() - '0');
      if (n > 1000000) return error(start, "repetition bound too large");
      ++pos_;
    }
    if (pos_ == b) return Status(ErrorCode::kNotFound, "");
    *v = static_cast<int>(n);
    return Status::Ok();
  }

  Status parse_braces(size_t start, int* min, int* max) {
    auto bad = [&] { return error(start, "bad repetition: expected {m}, {m,}, {m,n} or {,n}"); };
    skip_space(false);
    Status s = parse_int(start, min);
    if (s.code() == ErrorCode::kInvalidArgument) return s;
    bool has_min = s.ok();
    if (!has_min) *min = 0;
    skip_space(false);
    if (peek() == '}') {
      if (!has_min) return bad();
      ++pos_;
      *max = *min;
      return Status::Ok();
    }
    if (peek() != ',') return bad();
    ++pos_;
    skip_space(false);
    s = parse_int(start, max);
    if (s.code() == ErrorCode::kInvalidArgument) return s;
    if (!s.ok()) *max = Expr::kUnbounded;
    if (!s.ok() && !has_min) return bad();
    skip_space(false);
    if (peek() != '}') return bad();
    ++pos_;
    if (*max != Expr::kUnbounded && *max < *min) return error(start, "repetition {m,n} has n < m");
    return Status::Ok();
  }

  // One character of a literal or class: an escape or one UTF-8 code point.
  Status parse_char(uint32_t* cp) {
    size_t start = pos_;
    if (peek() != '\\') {
      if (!detail::next_code_point(src_, &pos_, cp)) return error(start, "invalid UTF-8");
      return Status::Ok();
    }
    ++pos_;
    if (eof()) return error(start, "bad escape at end of input");
    char e = peek();
    ++pos_;
    int n_hex = 0;
    switch (e) {
      case 'n':
        *cp = '\n';
        return Status::Ok();
      case 't':
        *cp = '\t';
        return Status::Ok();
      case 'r':
        *cp = '\r';
        return Status::Ok();
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '\'':
      case '/':
        *cp = static_cast<uint8_t>(e);
        return Status::Ok();
      case 'x':
        n_hex = 2;
        break;
      case 'u':
        n_hex = 4;
        break;
      case 'U':
        n_hex = 8;
        break;
      default:
        return error(start, "bad escape '\\" + shown(e) + "'");
    }
    uint32_t v = 0;
    for (int i = 0; i < n_hex; ++i) {
      int h = hex_value(peek());
      if (h < 0) {
        return error(start, "bad escape '\\" + shown(e) + "': expected " + std::to_string(n_hex) +
                                " hex digits");
      }
      v = v * 16 + static_cast<uint32_t>(h);
      ++pos_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
      return error(start, "bad escape: not a Unicode scalar value");
    }
    *cp = v;
    return Status::Ok();
  }

  std::string_view src_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
};

}  // namespace

Status GrammarBuilder::add_gbnf(std::string_view text) {
  Parser p(text);
  return p.parse(this);
}

StatusOr<Grammar> parse_gbnf(std::string_view text) {
  GrammarBuilder b;
  GLM_RETURN_IF_ERROR(b.add_gbnf(text));
  return b.build("root");
}

}  // namespace glm::grammar
