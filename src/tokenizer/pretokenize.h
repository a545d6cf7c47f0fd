// GLM-4's pre-tokenizer: the split pattern of its tiktoken tokenizer, implemented by hand
// (std::regex has neither \p{L} nor the \s+(?!\S) lookahead):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// Bytes that are not valid UTF-8 count as one "other" character each (neither letter, number
// nor space), so every input splits into pieces that cover it exactly.
// Pure functions; thread-safe. Cost: linear in the piece length.
#pragma once

#include <cstddef>
#include <string_view>

namespace glm::tok {

// End (byte offset) of the piece that starts at `pos` (< text.size()); always > pos.
size_t glm4_piece_end(std::string_view text, size_t pos);

}  // namespace glm::tok
