// Harness of the speculative decoding tests (n-gram, draft model, MTP drafts): a request's
// tokens and end as its observer saw them, the requests of one scheduler by id, and the
// three-token check that sampled answers follow the target's distribution. Header-only, test
// use only; not thread-safe (the scheduler loop's thread).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sampler/sampler.h"
#include "scheduler/chi_square.h"
#include "scheduler/fake_model.h"
#include "scheduler/scheduler.h"

namespace glm::testing {

// One request's tokens and end.
struct SeqRun {
  std::vector<int32_t> tokens;
  scheduler::FinishInfo finish;
  int n_final = 0;
  bool failed = false;
  int stop_after = -1;  // on_token returns false at this many tokens
  bool save = false;    // keep its conversation (FinishInfo::save_conversation) ...
  uint64_t tag = 0;     // ... under this tag
};

class RunObserver : public scheduler::SeqObserver {
 public:
  explicit RunObserver(SeqRun* r) : r_(r) {}
  bool on_token(int32_t token, const generation::GeneratedLogprobs*) override {
    r_->tokens.push_back(token);
    return r_->stop_after < 0 || static_cast<int>(r_->tokens.size()) < r_->stop_after;
  }
  void on_finish(scheduler::FinishInfo* info) override {
    ++r_->n_final;
    info->save_conversation = r_->save;
    info->conversation_tag = r_->tag;
    r_->finish = *info;
  }
  void on_error(const Status&) override {
    ++r_->n_final;
    r_->failed = true;
  }

 private:
  SeqRun* r_;
};

// The requests of one scheduler, by id.
struct Runs {
  // A new run `id` and its observer.
  std::unique_ptr<RunObserver> observe(const std::string& id) {
    auto& run = by_id[id];
    run = std::make_unique<SeqRun>();
    return std::make_unique<RunObserver>(run.get());
  }
  // Adds a greedy request (temperature 0, stopping at `stops`) as `edit` leaves it.
  Status add(scheduler::Scheduler* sched, const std::string& id, std::vector<int32_t> prompt,
             int max_tokens, std::vector<int32_t> stops,
             const std::function<void(scheduler::SeqRequest*)>& edit = nullptr) {
    scheduler::SeqRequest r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.sampling.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.stop_ids = std::move(stops);
    r.observer = observe(id);
    if (edit) edit(&r);
    return sched->add(std::move(r));
  }
  SeqRun& operator[](const std::string& id) { return *by_id.at(id); }
  std::map<std::string, std::unique_ptr<SeqRun>> by_id;
};

// No block of these caches used or reserved (a prefix cache keeps idle blocks: not "used").
inline void expect_no_leak(std::initializer_list<const kv::KvCache*> caches,
                           const std::string& where) {
  for (const kv::KvCache* c : caches) {
    EXPECT_EQ(c->allocator().n_used(), 0) << where;
    EXPECT_EQ(c->allocator().n_reserved(), 0) << where;
  }
}

// The three-token sampled requests' parameters (temperature 1, top-p 0.95) and their prompt,
// which repeats itself (so copying drafts are often right).
// The copy bias that makes the FakeModel copy most of the time (its logits are in [0, 10)).
inline constexpr float kCopy = 8.0f;

// A prompt that invites copying: a passage, other text, then the passage's first few tokens.
inline std::vector<int32_t> copy_prompt(std::mt19937* rng, int n_vocab = kVocab) {
  auto draw = [&](int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(2 + (*rng)() % (n_vocab - 2));
    return v;
  };
  std::vector<int32_t> passage = draw(8 + (*rng)() % 30);
  std::vector<int32_t> p = draw((*rng)() % 6);
  p.insert(p.end(), passage.begin(), passage.end());
  const std::vector<int32_t> other = draw((*rng)() % 10);
  p.insert(p.end(), other.begin(), other.end());
  p.insert(p.end(), passage.begin(), passage.begin() + 2 + (*rng)() % 3);
  return p;
}

// The FakeModel's greedy continuation of prompt when it copies (kCopy): what speculation must
// not change.
inline std::vector<int32_t> oracle(const std::vector<int32_t>& prompt, int max_tokens,
                                   std::vector<int32_t> stops = {kEos}) {
  return fake_greedy(prompt, kVocab, max_tokens, stops, {}, kCopy);
}

inline const std::vector<int32_t> kThreeTokenPrompt = {2, 3, 4, 5, 2, 3, 4, 5, 2, 3};
inline generation::SamplingParams three_token_sampling() {
  generation::SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_p = 0.95f;
  sp.max_tokens = 3;
  return sp;
}

inline void run_all(scheduler::Scheduler* sched) {
  for (int i = 0; i < 1000000 && !sched->idle(); ++i) sched->step();
  ASSERT_TRUE(sched->idle());
}

// Adds n sampled three-token requests "s<i>" after `prompt` (parameters `sp`, seed 1000 + i, no
// stop ids) to a test bench (add(id, prompt, max_tokens, edit), run_all()), running them 64 at
// a time.
template <typename Bench>
void run_sampled(Bench* b, const std::vector<int32_t>& prompt, const generation::SamplingParams& sp,
                 int n) {
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(b->add("s" + std::to_string(i), prompt, 3, [&](scheduler::SeqRequest* r) {
                   r->sampling = sp;
                   r->sampling.seed = 1000 + i;
                   r->stop_ids.clear();
                 }).ok());
    if (i % 64 == 63) b->run_all();
  }
  b->run_all();
}

// Cancels a decoding request ("victim", beside "other" and "queued", none stopping at a stop
// id; max_batch 2) after each of 0..39 steps of a bench from `make()` (its add, run, run_all,
// sched, expect_no_leak), and the queued one every third time: the others' tokens stay
// `oracle(prompt, max_tokens)`'s and no block of either cache stays held. `drafting(b)` says
// whether a drafter holds blocks: true at least 6 of the times the victim was mid-answer.
template <typename MakeBench, typename Drafting, typename Oracle>
void cancel_at_every_step(const MakeBench& make, const Drafting& drafting, const Oracle& oracle,
                          const std::vector<int32_t>& victim, const std::vector<int32_t>& other,
                          const std::vector<int32_t>& queued) {
  int n_mid_draft = 0;
  for (int at = 0; at < 40; ++at) {
    auto b = make();
    auto no_stop = [](scheduler::SeqRequest* r) { r->stop_ids.clear(); };
    ASSERT_TRUE(b->add("victim", victim, 60, no_stop).ok());
    ASSERT_TRUE(b->add("other", other, 60, no_stop).ok());
    ASSERT_TRUE(b->add("queued", queued, 20, no_stop).ok());
    for (int i = 0; i < at && !b->sched.idle(); ++i) b->sched.step();
    if (b->run("victim").tokens.size() >= 2 && b->run("victim").n_final == 0) {
      EXPECT_TRUE(drafting(*b)) << at;  // drafting when cancelled
      ++n_mid_draft;
    }
    b->sched.cancel("victim");
    if (at % 3 == 0) b->sched.cancel("queued");
    b->run_all();
    EXPECT_EQ(b->run("victim").n_final, 1);
    EXPECT_EQ(b->run("other").tokens, oracle(other, 60)) << at;
    if (at % 3 != 0) {
      EXPECT_EQ(b->run("queued").tokens, oracle(queued, 20)) << at;
    }
    b->expect_no_leak("cancel at " + std::to_string(at));
  }
  EXPECT_GT(n_mid_draft, 5);
}

// Sampled three-token answers after `prompt` (FakeModel targets of n_vocab tokens, copy bias
// `copy`): their joint frequencies against the exact product of the target's distributions
// under `sp`. Returns the chi-square p-value; *max_diff is the largest |p - q| at the second
// token, q the distribution of a drafter whose logits are FakeModel's with `draft_copy`.
inline double three_token_p_value(const Runs& runs, const std::vector<int32_t>& prompt, int n_vocab,
                                  const generation::SamplingParams& sp, float copy,
                                  float draft_copy, double* max_diff) {
  const int v = n_vocab;
  std::vector<double> observed(v * v * v), expected(v * v * v);
  double n = 0;
  for (const auto& [id, run] : runs.by_id) {
    EXPECT_EQ(run->tokens.size(), 3u) << id;
    if (run->tokens.size() != 3) continue;
    observed[(run->tokens[0] * v + run->tokens[1]) * v + run->tokens[2]] += 1;
    n += 1;
  }
  sampler::Sampler dist(sp, v);  // no penalties: its distribution is stateless
  std::vector<float> logits(v);
  auto dist_of = [&](const std::vector<int32_t>& context, float c) {
    FakeModel::logits_for(context, v, logits.data(), c);
    std::vector<double> p(v);
    for (const sampler::Candidate& cand : dist.distribution(logits.data())) p[cand.id] = cand.p;
    return p;
  };
  *max_diff = 0;
  const auto p1 = dist_of(prompt, copy);
  for (int a = 0; a < v; ++a) {
    auto c1 = prompt;
    c1.push_back(a);
    const auto p2 = dist_of(c1, copy);
    const auto q2 = dist_of(c1, draft_copy);
    for (int c = 0; c < v; ++c) *max_diff = std::max(*max_diff, std::abs(p2[c] - q2[c]));
    for (int c = 0; c < v; ++c) {
      auto c2 = c1;
      c2.push_back(c);
      const auto p3 = dist_of(c2, copy);
      for (int d = 0; d < v; ++d) expected[(a * v + c) * v + d] = n * p1[a] * p2[c] * p3[d];
    }
  }
  return chi_square(observed, expected);
}

}  // namespace glm::testing
