// N-gram (prompt-lookup) drafting for speculative decoding, model-free: the next token of a
// sequence is guessed as the one that followed the most recent earlier occurrence of its last
// n tokens (n from kNgramMax down to kNgramMin), in its own tokens (prompt and generated). It
// pays where answers repeat their context: quotes of the prompt, code edits, lists.
//
// A draft of several tokens is the same guess repeated over the context extended by the
// guesses before it, so the guess at any position is a function of that position's context
// only (whatever the draft length): the scheduler's sampled tokens then depend on the seed and
// the context alone (docs/engine.md#speculative-decoding).
//
// DraftLength adapts one sequence's draft length to its acceptance: longer after a draft was
// accepted whole, shorter after a miss, and after repeated misses of a one-token draft it
// pauses drafting for a few steps (a growing back-off), so text that never repeats costs
// little.
//
// Thread-safety: none (values owned by one sequence, used on the scheduler loop).
// Cost: ngram_next is O(context * n) (a backward scan); draft() k times that.
#pragma once

#include <cstdint>
#include <vector>

namespace glm::scheduler {

constexpr int kNgramMax = 3;  // longest suffix looked up
constexpr int kNgramMin = 2;  // shortest: a single repeated token guesses too often wrong

// The token that followed the most recent earlier occurrence of the longest suffix of
// context[0, n) of kNgramMax..kNgramMin tokens; -1 if none occurs earlier.
int32_t ngram_next(const int32_t* context, int n);

// Up to k guesses after `context`, each ngram_next of context + the guesses before it,
// appended to *context (the caller pops them or uses them as the batch input). Returns how
// many were appended (fewer than k where a guess has no earlier occurrence).
int ngram_draft(std::vector<int32_t>* context, int k);

class DraftLength {
 public:
  explicit DraftLength(int max_draft);
  // Tokens to draft this step: 0 while paused (after repeated misses) or when max is 0.
  int want() const { return pause_ > 0 ? 0 : k_; }
  // A decode step of the sequence that drafted nothing: counts down a pause.
  void idle_step() {
    if (pause_ > 0) --pause_;
  }
  // The outcome of a verified draft of `drafted` tokens of which the first `accepted` held.
  void verified(int drafted, int accepted);

 private:
  int max_;
  int k_;
  int pause_ = 0;    // steps left without drafting
  int backoff_ = 1;  // the next pause's length
};

}  // namespace glm::scheduler
