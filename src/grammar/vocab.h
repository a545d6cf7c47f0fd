// TokenVocab: a vocabulary prepared once for mask computation (a byte trie in preorder), and
// TokenMask: one bit per token id.
// Thread-safety: TokenVocab is immutable after create(); share one per model across all
// matchers and threads. TokenMask is a plain value.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::grammar {

class TokenVocab {
 public:
  // tokens[id] = the raw bytes the token decodes to (not necessarily valid UTF-8; SentencePiece
  // '▁' already turned into ' ', <0xNN> pieces into their byte, GPT-2 byte-level strings into
  // bytes). special_ids: never allowed by a grammar (control tokens such as [gMASK], sop, pad).
  // stop_ids: end of generation (EOS, <|user|>, <|observation|>); allowed exactly when the
  // grammar is complete. Empty tokens are never allowed. Errors: an id out of range.
  // Cost: sorts the tokens and builds the trie once per model: ~130 ms CPU and ~10 MB for
  // GLM-4's 151552 tokens (341 k nodes, ~30 bytes each), ~30-45 ms for ChatGLM3's 65024.
  static StatusOr<std::shared_ptr<const TokenVocab>> create(
      std::vector<std::string> tokens, const std::vector<int32_t>& stop_ids,
      const std::vector<int32_t>& special_ids);

  size_t n_tokens() const { return tokens_.size(); }
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  bool is_stop(int32_t id) const { return kind_[static_cast<size_t>(id)] == kStop; }
  bool is_special(int32_t id) const { return kind_[static_cast<size_t>(id)] == kSpecial; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }

  // The trie in preorder: node i has edge byte byte[i] at depth depth[i] (>= 1); its subtree
  // ends before node skip[i]; the tokens spelled by the path to it are
  // node_tokens[tok_begin[i] .. tok_begin[i + 1]), so the tokens of the whole subtree are
  // node_tokens[tok_begin[i] .. tok_begin[skip[i]]).
  // Summaries of what lies strictly below node i, which let a mask walk accept a whole
  // subtree at once: the ASCII bytes used there (a 128-bit set), whether any byte is
  // non-ASCII, and whether every token's rest after node i is well-formed UTF-8 (complete
  // characters, the last possibly unfinished but still completable).
  struct Trie {
    std::vector<uint8_t> byte;
    std::vector<uint16_t> depth;
    std::vector<uint32_t> skip;
    std::vector<uint32_t> tok_begin;  // n_nodes + 1 entries
    std::vector<int32_t> node_tokens;
    std::vector<std::array<uint64_t, 2>> ascii_below;
    std::vector<uint8_t> nonascii_below;
    std::vector<uint8_t> utf8_ok_below;
    size_t max_depth = 0;
  };
  const Trie& trie() const { return trie_; }

 private:
  enum Kind : uint8_t { kText, kStop, kSpecial };
  std::vector<std::string> tokens_;
  std::vector<uint8_t> kind_;
  std::vector<int32_t> stop_ids_;
  Trie trie_;
};

// One bit per token id: 1 = allowed.
class TokenMask {
 public:
  TokenMask() = default;
  explicit TokenMask(size_t n_tokens) : n_(n_tokens), words_((n_tokens + 31) / 32, 0) {}
  size_t size() const { return n_; }
  bool allowed(int32_t id) const {
    return (words_[static_cast<size_t>(id) >> 5] >> (id & 31)) & 1u;
  }
  void set(int32_t id) { words_[static_cast<size_t>(id) >> 5] |= 1u << (id & 31); }
  size_t count() const;
  // Sets logits[i] = -inf for every disallowed i. logits: [size()].
  void apply_to_logits(float* logits) const;
  std::vector<uint32_t>& words() { return words_; }
  const std::vector<uint32_t>& words() const { return words_; }

 private:
  size_t n_ = 0;
  std::vector<uint32_t> words_;
};

}  // namespace glm::grammar
