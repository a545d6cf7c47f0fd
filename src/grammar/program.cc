// Character classes, UTF-8 helpers and Grammar::to_gbnf().
#include "grammar/program.h"

#include <algorithm>
#include <cstdio>

namespace glm::grammar {
namespace detail {

CharClass make_class(std::vector<CharRange> ranges, bool negated) {
  CharClass c;
  c.negated = negated;
  std::sort(ranges.begin(), ranges.end(),
            [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  for (const CharRange& r : ranges) {
    if (!c.ranges.empty() && r.lo <= c.ranges.back().hi + 1) {
      c.ranges.back().hi = std::max(c.ranges.back().hi, r.hi);
    } else {
      c.ranges.push_back(r);
    }
  }
  for (uint32_t cp = 0; cp < 128; ++cp) {
    if (c.contains(cp) != negated) c.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
  }
  return c;
}

bool CharClass::contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const CharRange& r) { return v < r.lo; });
  return it != ranges.begin() && cp <= std::prev(it)->hi;
}

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const CharRange& r : ranges) {
      if (r.lo <= hi && lo <= r.hi) return true;
    }
    return false;
  }
  // Negated: some code point of [lo, hi] lies outside every range.
  uint32_t next = lo;
  for (const CharRange& r : ranges) {
    if (r.hi < next) continue;
    if (r.lo > next) return true;
    if (r.hi >= hi) return false;
    next = r.hi + 1;
  }
  return next <= hi;
}

bool CharClass::covers(uint32_t lo, uint32_t hi) const {
  if (negated) {
    for (const CharRange& r : ranges) {
      if (r.lo <= hi && lo <= r.hi) return false;
    }
    return true;
  }
  uint32_t next = lo;
  for (const CharRange& r : ranges) {
    if (r.hi < next) continue;
    if (r.lo > next) return false;
    if (r.hi >= hi) return true;
    next = r.hi + 1;
  }
  return false;
}

void append_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool next_code_point(std::string_view s, size_t* i, uint32_t* cp) {
  const auto b0 = static_cast<uint8_t>(s[*i]);
  int n;
  uint32_t v, min;
  if (b0 < 0x80) {
    *cp = b0;
    ++*i;
    return true;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 1, v = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 2, v = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 3, v = b0 & 0x07, min = 0x10000;
  } else {
    return false;
  }
  if (*i + static_cast<size_t>(n) >= s.size()) return false;  // truncated
  for (int k = 1; k <= n; ++k) {
    const auto b = static_cast<uint8_t>(s[*i + k]);
    if ((b & 0xC0) != 0x80) return false;
    v = (v << 6) | (b & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
  *cp = v;
  *i += n + 1;
  return true;
}

}  // namespace detail

namespace {

void append_escaped(std::string* out, uint32_t cp, bool in_class) {
  switch (cp) {
    case '\n':
      *out += "\\n";
      return;
    case '\t':
      *out += "\\t";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\\':
      *out += "\\\\";
      return;
    default:
      break;
  }
  if (!in_class && cp == '"') {
    *out += "\\\"";
  } else if (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^')) {
    *out += '\\';
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x20 || cp == 0x7F) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
    *out += buf;
  } else if (cp >= 0xD800 && cp <= 0xDFFF) {
    char buf[12];
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
    *out += buf;
  } else {
    detail::append_utf8(out, cp);
  }
}

}  // namespace

std::string Grammar::to_gbnf() const {
  using detail::Op;
  const detail::Program& p = *program_;
  std::string out;
  auto single = [&](uint32_t c) {
    const detail::CharClass& k = p.classes[c];
    return !k.negated && k.ranges.size() == 1 && k.ranges[0].lo == k.ranges[0].hi;
  };
  // Root first, then the others in definition order.
  std::vector<uint32_t> order = {p.root};
  for (uint32_t r = 0; r < p.rule_alts.size(); ++r) {
    if (r != p.root) order.push_back(r);
  }
  for (uint32_t r : order) {
    out += p.rule_names[r] + " ::=";
    bool first_alt = true;
    for (uint32_t a : p.rule_alts[r]) {
      out += first_alt ? " " : " | ";
      first_alt = false;
      if (p.elems[a].op == Op::kEnd) out += "\"\"";
      bool first = true;
      for (uint32_t i = a; p.elems[i].op != Op::kEnd; ++i) {
        if (!first) out += ' ';
        first = false;
        const detail::Elem& e = p.elems[i];
        if (e.op == Op::kRef) {
          out += p.rule_names[e.arg];
        } else if (single(e.arg)) {
          out += '"';
          while (true) {
            append_escaped(&out, p.classes[p.elems[i].arg].ranges[0].lo, false);
            if (p.elems[i + 1].op != Op::kChar || !single(p.elems[i + 1].arg)) break;
            ++i;
          }
          out += '"';
        } else {
          const detail::CharClass& k = p.classes[e.arg];
          if (k.negated && k.ranges.empty()) {
            out += '.';
            continue;
          }
          out += k.negated ? "[^" : "[";
          for (const CharRange& rg : k.ranges) {
            append_escaped(&out, rg.lo, true);
            if (rg.hi != rg.lo) {
              out += '-';
              append_escaped(&out, rg.hi, true);
            }
          }
          out += ']';
        }
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace glm::grammar
