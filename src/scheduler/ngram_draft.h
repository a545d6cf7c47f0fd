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
// little. Where drafting itself costs (a draft model's or an MTP block's pass per token), the
// length is also cut where its next token no longer pays for its pass.
//
// Thread-safety: none (values owned by one sequence, used on the scheduler loop).
// Cost: ngram_next is O(context * n) (a backward scan); draft() k times that.
#pragma once

#include <cstdint>
#include <utility>
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
  // Tokens to draft this step: 0 while paused (after repeated misses) or when max is 0; with a
  // cost, the k (1 at least) that gives the most tokens per unit of a step's cost.
  int want() const;
  // What drafting costs, in plain decode steps of the target (all 0, the default: free, as
  // n-gram guesses are). With a cost, each drafted token's acceptance a is estimated from the
  // verified drafts (decaying counts, prior 1/2); a step of k drafts yields 1 + a + ... + a^k
  // tokens for 1 + k verify + first + (k - 1) each, and the k of the best ratio is drafted;
  // when even that ratio is not above 1 (a plain step's), drafting pauses as after a miss, so
  // the estimate is checked again now and then; when a measured cost could not pay even if
  // every draft held (1 + first + verify >= 2), it pauses kNeverPaysPause steps.
  struct Cost {
    double first = 0;       // the draft pass that proposes the first token
    double each = 0;        // each further draft pass
    double verify = 0;      // each drafted token in the target's verify pass
    bool measured = false;  // all three measured, not assumed
    bool free() const { return first <= 0 && each <= 0 && verify <= 0; }
  };
  void set_cost(const Cost& cost) { cost_ = cost; }
  double acceptance() const { return hits_ / trials_; }
  // The best k <= the plain rule's length under the cost, and its tokens per cost (> 1 pays).
  std::pair<int, double> best() const;
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
  Cost cost_;
  double hits_ = 1, trials_ = 2;  // drafted tokens accepted, of those verified (decaying)
  void pause();
};

}  // namespace glm::scheduler
