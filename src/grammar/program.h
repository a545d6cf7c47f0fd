// Internal: the compiled form of a Grammar, shared by the builder (writer) and the matcher
// (reader). Every rule is a list of alternatives; every alternative is a run of elements in one
// flat array ending with kEnd, like llama.cpp's flattened rules.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace glm::grammar::detail {

enum class Op : uint8_t {
  kChar,  // match one code point of classes[arg]
  kRef,   // descend into rule arg
  kEnd,   // end of an alternative: return to the caller
};

struct Elem {
  Op op;
  uint32_t arg;
};

// A set of code points: sorted, merged ranges, optionally negated; ASCII as a bitmap.
struct CharClass {
  std::vector<CharRange> ranges;  // sorted, disjoint, merged
  bool negated = false;
  std::array<uint64_t, 2> ascii{};  // membership of code points 0..127 (negation applied)

  bool matches(uint32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    return contains(cp) != negated;
  }
  bool contains(uint32_t cp) const;  // raw range membership, no negation
  // Whether some code point in [lo, hi] matches.
  bool intersects(uint32_t lo, uint32_t hi) const;
  // Whether every code point in [lo, hi] matches.
  bool covers(uint32_t lo, uint32_t hi) const;
  bool empty() const { return !intersects(0, 0x10FFFF); }
};

struct Program {
  std::vector<Elem> elems;
  std::vector<std::vector<uint32_t>> rule_alts;  // rule id -> start position of each alternative
  std::vector<std::string> rule_names;
  std::vector<CharClass> classes;
  uint32_t root = 0;
};

// Builds a CharClass from unsorted ranges.
CharClass make_class(std::vector<CharRange> ranges, bool negated);

// Appends the UTF-8 encoding of `cp` (<= 0x10FFFF).
void append_utf8(std::string* out, uint32_t cp);
// Decodes one code point of strict UTF-8 at s[*i], advancing *i; false if malformed.
bool next_code_point(std::string_view s, size_t* i, uint32_t* cp);

}  // namespace glm::grammar::detail
