// SentencePiece BPE with byte fallback, driven by the GGUF vocabulary (pieces, scores, types):
// the algorithm of sentencepiece's bpe_model.cc. The normalised text ("▁" for spaces, a dummy
// "▁" prefix) is cut into characters, then the adjacent pair whose concatenation is the
// highest-scoring mergeable piece is merged, leftmost first on ties, until no pair is a piece.
// Pieces that are not in the vocabulary fall back to their UTF-8 bytes (<0xNN>).
// Only NORMAL and USER_DEFINED pieces are merge results: never CONTROL tokens such as sop/eop.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "tokenizer/vocab_tokenizer.h"

namespace glm::tok {
namespace {}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> SpmTokenizer::create(const VocabSpec& spec,
                                                          const std::string& label) {
  auto t = std::unique_ptr<SpmTokenizer>(new SpmTokenizer());
  GLM_RETURN_IF_ERROR(t->init(spec, label));
  const size_t n = spec.tokens.size();
  if (spec.scores.size() != n) {
    return bad_file(label + ": SentencePiece vocabulary needs tokenizer.ggml.scores (" +
                    std::to_string(spec.scores.size()) + " scores for " + std::to_string(n) +
                    " tokens)");
  }
  t->scores_ = spec.scores;
  t->byte_ids_.fill(-1);
  t->add_space_prefix_ = spec.add_space_prefix;
  t->mergeable_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = spec.tokens[i];
    const int32_t type = spec.types[i];
    if (type == kTokenByte) {
      int b = parse_byte_piece(p);
      if (b >= 0 && t->byte_ids_[b] < 0) t->byte_ids_[b] = static_cast<int32_t>(i);
    } else if (type == kTokenNormal || type == kTokenUserDefined) {
      t->mergeable_.emplace(p, static_cast<int32_t>(i));
      // A piece with "▁" after another character could span our word boundaries.
      for (size_t k = p.find(kSpaceMarker, 1); k != std::string::npos;
           k = p.find(kSpaceMarker, k + 1)) {
        if (k < 3 || p.compare(k - 3, 3, kSpaceMarker) != 0) t->split_words_ = false;
      }
    }
  }
  if (t->unk_ < 0) {
    for (size_t i = 0; i < n; ++i) {
      if (spec.types[i] == kTokenUnknown) {
        t->unk_ = static_cast<int32_t>(i);
        break;
      }
    }
  }
  return std::unique_ptr<Tokenizer>(std::move(t));
}

void SpmTokenizer::encode_text(std::string_view text, bool after_special,
                               std::vector<int32_t>* out) const {
  // Normalise: dummy prefix, spaces -> "▁".
  std::string norm;
  norm.reserve(text.size() + text.size() / 4 + 3);
  if (add_space_prefix_ && after_special) norm.append(kSpaceMarker);
  for (char c : text) {
    if (c == ' ') {
      norm.append(kSpaceMarker);
    } else {
      norm.push_back(c);
    }
  }
  if (!split_words_) {
    encode_word(norm, out);
    return;
  }
  // Words: a run of "▁" followed by other characters; a new word starts at a "▁" that follows
  // another character. No mergeable piece crosses that boundary, so words are independent.
  std::string_view s(norm);
  size_t start = 0;
  bool prev_marker = true;
  for (size_t i = 0; i < s.size();) {
    const bool marker = s.compare(i, 3, kSpaceMarker) == 0;
    if (marker && !prev_marker && i > start) {
      encode_word(s.substr(start, i - start), out);
      start = i;
    }
    prev_marker = marker;
    i += marker ? 3 : utf8_char_len(s, i);
  }
  if (start < s.size()) encode_word(s.substr(start), out);
}

void SpmTokenizer::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  struct Symbol {
    uint32_t start, len;
    int32_t prev, next;
  };
  struct Candidate {
    float score;
    int32_t left;
    uint32_t len;  // length of the merged text, to detect stale entries
  };
  // Small words are the common case: keep the buffers on the stack-like thread-local storage.
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Candidate> heap;
  sym.clear();
  heap.clear();
  for (size_t i = 0; i < word.size();) {
    const size_t n = utf8_char_len(word, i);
    const int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(n), idx - 1, idx + 1});
    i += n;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  // Max-heap on score; on equal scores the leftmost pair first (sentencepiece's order).
  auto worse = [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  };
  auto try_add = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = sym[l].next;
    if (r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    auto it = mergeable_.find(word.substr(sym[l].start, len));
    if (it == mergeable_.end()) return;
    heap.push_back({scores_[it->second], l, len});
    std::push_heap(heap.begin(), heap.end(), worse);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) try_add(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[c.left];
    if (l.len == 0 || l.next < 0 || l.len + sym[l.next].len != c.len) continue;  // stale
    Symbol& r = sym[l.next];
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_add(l.prev);
    try_add(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    std::string_view piece = word.substr(sym[i].start, sym[i].len);
    auto it = mergeable_.find(piece);
    if (it != mergeable_.end()) {
      out->push_back(it->second);
      continue;
    }
    // Byte fallback; without byte pieces, an unknown character becomes <unk>.
    bool have_bytes = true;
    for (char b : piece) have_bytes = have_bytes && byte_ids_[static_cast<uint8_t>(b)] >= 0;
    if (have_bytes) {
      for (char b : piece) out->push_back(byte_ids_[static_cast<uint8_t>(b)]);
    } else if (unk_ >= 0) {
      out->push_back(unk_);
    }
  }
}

std::string SpmTokenizer::token_bytes(int32_t id) const { return sentencepiece_bytes(id); }

std::string SpmTokenizer::token_bytes_at_start(int32_t id) const {
  return sentencepiece_bytes_at_start(id, add_space_prefix_);
}

}  // namespace glm::tok
