// Sorted, disjoint code point ranges of Unicode general categories (generated data, see
// gen_unicode_tables.py). Immutable; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace glm::tok {

struct CodeRange {
  uint32_t first, last;  // inclusive
};

extern const CodeRange kLetterRanges[];  // \p{L}
extern const size_t kLetterRanges_size;
extern const CodeRange kNumberRanges[];  // \p{N}
extern const size_t kNumberRanges_size;

}  // namespace glm::tok
