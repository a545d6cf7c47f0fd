// Matcher: the per-sequence state of a grammar during decoding, and the token mask.
//
//   Matcher m(grammar, vocab);
//   TokenMask mask(vocab->n_tokens());
//   while (true) {
//     MaskInfo info = m.fill_mask(&mask);
//     if (info.dead()) -> end the request with an error (nothing can follow)
//     mask.apply_to_logits(logits); id = sample(logits);
//     GLM_CHECK(m.accept_token(id).ok());       // a stop id is accepted only when complete
//     if (m.is_terminated()) break;
//   }
//
// Design (docs/grammar.md): the parse state is a set of stacks of rule positions (llama.cpp's
// pushdown approach, with tail calls so repetitions do not grow the stack), plus the unfinished
// bytes of a UTF-8 character. Each distinct state is interned once and gets a lazily filled
// 256-entry byte transition row, so the mask is a preorder walk of the vocabulary trie with one
// table lookup per trie node, pruning dead subtrees and accepting at once the subtrees that
// loop in the current state (inside a string); masks are cached per state.
// Thread-safety: one Matcher per sequence, used by one thread at a time; the Grammar and the
// TokenVocab it holds are shared read-only.
// Memory: ~1 KB per interned state (at most MatcherOptions::max_states, then the tables are
// rebuilt from the states still referenced) plus max_cached_masks masks of n_tokens / 8 bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/vocab.h"

namespace glm::grammar {

struct MaskInfo {
  size_t n_allowed = 0;       // bits set in the mask (stop tokens included)
  bool stop_allowed = false;  // the grammar is complete: end of generation is allowed (the
                              // stop ids, if the vocabulary has any, are set in the mask)
  // Nothing may follow and the text is not complete: the caller must end with an error.
  bool dead() const { return n_allowed == 0 && !stop_allowed; }
};

struct MatcherOptions {
  size_t max_states = 16384;     // interned parse states kept before a rebuild (~1 KB each)
  size_t max_cached_masks = 64;  // masks kept for states seen again
  size_t max_rollback = 256;     // accept_* calls that rollback() can undo
};

class Matcher {
 public:
  // `vocab` may be null for byte-level use (accept_bytes only).
  Matcher(Grammar grammar, std::shared_ptr<const TokenVocab> vocab, MatcherOptions options = {});
  ~Matcher();
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;

  // Which tokens may come next. mask: resized to the vocabulary. Stop tokens are set when
  // complete. Cost: a cached state costs one copy of the mask; a new one a trie walk over the
  // live part of the vocabulary (see docs/grammar.md for measured times).
  MaskInfo fill_mask(TokenMask* mask);
  // Advances over token `id`. Error (state unchanged) if the grammar does not allow it; a stop
  // token is allowed when complete and terminates the matcher.
  Status accept_token(int32_t id);
  // Advances over raw bytes (forced text, tests). Error (state unchanged) if not allowed.
  Status accept_bytes(std::string_view bytes);
  // Whether `bytes` could be accepted now, without changing the state.
  bool can_accept_bytes(std::string_view bytes);

  bool is_complete() const;    // the text so far is a full sentence of the grammar
  bool is_terminated() const;  // a stop token was accepted
  // No continuation and not complete: only reachable through a grammar the build checks
  // could not reject (e.g. a vocabulary missing a needed character).
  bool can_continue() const;

  // Undoes the last n accept_* calls (speculative decoding, retries).
  // n <= min(n_accepted(), options.max_rollback).
  void rollback(size_t n);
  size_t n_accepted() const;
  size_t n_states() const;  // interned states now (memory use, tests)
  void reset();             // back to the start

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glm::grammar
