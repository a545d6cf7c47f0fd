// Speculative decoding in the scheduler (n-gram drafts, ngram_draft.h), against FakeModel with
// an induction-head copy bias so that drafts are often, not always, right: greedy output equals
// the model's greedy continuation alone and batched, under chunked prefill, forks, grammar,
// stop ids, observer stops and max_tokens; cancellation at every step frees every block; a
// conversation saved after a rejected draft continues exactly; sampled tokens follow the
// target distribution (chi-square) and, for a seed, do not depend on batching or draft length.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "sampler/sampler.h"
#include "scheduler/fake_model.h"
#include "scheduler/scheduler.h"
#include "scheduler/spec_test_util.h"

namespace glm::scheduler {
namespace {

using generation::FinishReason;
using generation::SpecMode;
using testing::copy_prompt;
using testing::fake_greedy;
using testing::FakeModel;
using testing::kCopy;
using testing::kEos;
using testing::kVocab;
using testing::oracle;
using testing::SeqRun;

Options spec_options(SpecMode mode, int max_batch = 8, int prefill_chunk = 64) {
  Options o;
  o.spec = mode;
  o.max_batch = max_batch;
  o.prefill_chunk = prefill_chunk;
  return o;
}

struct SpecBench {
  explicit SpecBench(Options opt, int n_vocab = kVocab, float copy = kCopy, int n_blocks = 512)
      : model(n_vocab, 4), cache(n_blocks, 4), sched(&model, nullptr, &cache, opt) {
    model.set_copy_bias(copy);
  }
  Status add(const std::string& id, std::vector<int32_t> prompt, int max_tokens,
             const std::function<void(SeqRequest*)>& edit = nullptr) {
    return runs.add(&sched, id, std::move(prompt), max_tokens, {kEos}, edit);
  }
  void run_all() { testing::run_all(&sched); }
  SeqRun& run(const std::string& id) { return runs[id]; }

  FakeModel model;
  kv::KvCache cache;
  Scheduler sched;
  testing::Runs runs;
};

TEST(Speculation, GreedyOutputIsTheModelsGreedyContinuationAlone) {
  std::mt19937 rng(7);
  generation::Speculation sum;
  for (int i = 0; i < 60; ++i) {
    const auto prompt = copy_prompt(&rng);
    const int max_tokens = 1 + rng() % 40;
    SpecBench b(spec_options(SpecMode::kNgram));
    ASSERT_TRUE(b.add("a", prompt, max_tokens).ok());
    b.run_all();
    const SeqRun& r = b.run("a");
    EXPECT_EQ(r.tokens, oracle(prompt, max_tokens)) << "prompt " << i;
    EXPECT_EQ(r.n_final, 1);
    EXPECT_LE(r.finish.speculation.accepted, r.finish.speculation.drafted);
    EXPECT_EQ(b.sched.stats().speculation, r.finish.speculation);
    EXPECT_EQ(b.cache.allocator().n_used(), 0);
    EXPECT_EQ(b.cache.allocator().n_reserved(), 0);
    sum.drafted += r.finish.speculation.drafted;
    sum.accepted += r.finish.speculation.accepted;
  }
  // Both outcomes happened: accepted drafts and rejected ones.
  EXPECT_GT(sum.accepted, 100);
  EXPECT_LT(sum.accepted, sum.drafted);
}

TEST(Speculation, OffDraftsNothing) {
  std::mt19937 rng(8);
  const auto prompt = copy_prompt(&rng);
  SpecBench b(spec_options(SpecMode::kOff));
  ASSERT_TRUE(b.add("a", prompt, 30, [](SeqRequest* r) { r->stop_ids.clear(); }).ok());
  b.run_all();
  EXPECT_EQ(b.run("a").tokens, fake_greedy(prompt, kVocab, 30, {}, {}, kCopy));
  EXPECT_EQ(b.run("a").finish.speculation, generation::Speculation{});
  EXPECT_EQ(b.model.n_tokens_run(), static_cast<int64_t>(prompt.size()) + 29);
}

TEST(Speculation, BatchedWithChunkedPrefillAndForksEqualsAloneInFewerPasses) {
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) prompts.push_back(copy_prompt(&rng));
  std::map<SpecMode, int64_t> passes;
  for (SpecMode mode : {SpecMode::kOff, SpecMode::kNgram}) {
    SpecBench b(spec_options(mode, /*max_batch=*/6, /*prefill_chunk=*/7));
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(b.add("r" + std::to_string(i), prompts[i], 40, [&](SeqRequest* r) {
                     if (i % 5 == 0) {  // a second choice, greedy too: the same answer
                       SeqRequest::Fork f;
                       f.sampling = r->sampling;
                       f.observer = b.runs.observe("r" + std::to_string(i) + "#1");
                       r->forks.push_back(std::move(f));
                     }
                   }).ok());
    }
    b.run_all();
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto want = oracle(prompts[i], 40);
      EXPECT_EQ(b.run("r" + std::to_string(i)).tokens, want) << "request " << i;
      if (i % 5 == 0) {
        EXPECT_EQ(b.run("r" + std::to_string(i) + "#1").tokens, want) << i;
      }
    }
    EXPECT_GT(b.model.max_batch_seen(), 1);
    EXPECT_EQ(b.cache.allocator().n_used(), 0);
    EXPECT_EQ(b.cache.allocator().n_reserved(), 0);
    passes[mode] = b.model.n_forward();
    if (mode == SpecMode::kNgram) {
      EXPECT_GT(b.sched.stats().speculation.accepted, 0);
    }
  }
  // 165 of 226 passes under FIFO prefill, 172 of 225 with the shortest prompt first (the
  // order decides which sequences decode, and so draft, together): about a quarter fewer.
  EXPECT_LT(passes[SpecMode::kNgram], passes[SpecMode::kOff] * 4 / 5);
}

TEST(Speculation, StopIdsObserverStopsAndMaxTokensInsideADraft) {
  std::mt19937 rng(13);
  for (int i = 0; i < 40; ++i) {
    const auto prompt = copy_prompt(&rng);
    const auto full = oracle(prompt, 30);
    // A stop id: the token the answer would have at some position ends it there.
    const int cut = rng() % (full.size() + 1);
    SpecBench b(spec_options(SpecMode::kNgram));
    ASSERT_TRUE(b.add("stop", prompt, 30, [&](SeqRequest* r) {
                   if (cut < static_cast<int>(full.size())) r->stop_ids.push_back(full[cut]);
                 }).ok());
    ASSERT_TRUE(b.add("observer", prompt, 30).ok());
    b.run("observer").stop_after = 1 + i % 12;
    b.run_all();
    std::vector<int32_t> until(full.begin(), full.begin() + cut);
    // (an earlier equal token stops it first)
    for (size_t j = 0; j < until.size(); ++j) {
      if (cut < static_cast<int>(full.size()) && until[j] == full[cut]) until.resize(j);
    }
    EXPECT_EQ(b.run("stop").tokens, until) << i;
    const size_t n_obs = std::min<size_t>(full.size(), 1 + i % 12);
    EXPECT_EQ(b.run("observer").tokens, std::vector<int32_t>(full.begin(), full.begin() + n_obs));
    EXPECT_EQ(b.run("observer").finish.usage.completion_tokens, static_cast<int>(n_obs));
    EXPECT_EQ(b.cache.allocator().n_used(), 0);
  }
}

TEST(Speculation, CancelAtEveryStepFreesEveryBlockAndLeavesOthersExact) {
  std::mt19937 rng(17);
  const auto victim = copy_prompt(&rng);
  const auto other = copy_prompt(&rng);
  const auto queued = copy_prompt(&rng);
  for (int at = 0; at < 40; ++at) {
    SpecBench b(spec_options(SpecMode::kNgram, /*max_batch=*/2, /*prefill_chunk=*/5));
    auto no_stop = [](SeqRequest* r) { r->stop_ids.clear(); };
    ASSERT_TRUE(b.add("victim", victim, 60, no_stop).ok());
    ASSERT_TRUE(b.add("other", other, 60, no_stop).ok());
    ASSERT_TRUE(b.add("queued", queued, 20, no_stop).ok());
    for (int i = 0; i < at && !b.sched.idle(); ++i) b.sched.step();
    b.sched.cancel("victim");
    if (at % 3 == 0) b.sched.cancel("queued");
    b.run_all();
    EXPECT_EQ(b.run("victim").n_final, 1);
    EXPECT_EQ(b.run("other").tokens, fake_greedy(other, kVocab, 60, {}, {}, kCopy)) << at;
    EXPECT_EQ(b.cache.allocator().n_used(), 0) << at;
    EXPECT_EQ(b.cache.allocator().n_reserved(), 0) << at;
  }
}

TEST(Speculation, AConversationSavedAfterRejectedDraftsContinuesExactly) {
  std::mt19937 rng(19);
  int n_rejected = 0;
  for (int i = 0; i < 20; ++i) {
    SpecBench b(spec_options(SpecMode::kNgram), kVocab, kCopy, 96);
    const auto p1 = copy_prompt(&rng);
    ASSERT_TRUE(b.add("t1", p1, 25, [](SeqRequest* r) { r->conversation = "c"; }).ok());
    b.run("t1").save = true;
    b.run("t1").tag = 5;
    b.run_all();
    const SeqRun& t1 = b.run("t1");
    n_rejected += t1.finish.speculation.accepted < t1.finish.speculation.drafted;
    ASSERT_TRUE(b.cache.has_conversation("c"));
    // The entry holds exactly the blocks of its written tokens (a length finish leaves the
    // last token unfed), none a rejected draft grew.
    const int written = static_cast<int>(p1.size() + t1.tokens.size()) -
                        (t1.finish.reason == FinishReason::kLength ? 1 : 0);
    EXPECT_EQ(b.cache.allocator().n_used(), b.cache.blocks_for(written)) << i;
    std::vector<int32_t> full = p1;
    full.insert(full.end(), t1.tokens.begin(), t1.tokens.end());
    const std::vector<int32_t> tail(p1.begin(), p1.begin() + 3);  // asks to copy again
    full.insert(full.end(), tail.begin(), tail.end());
    ASSERT_TRUE(b.add("t2", {3}, 25, [&](SeqRequest* r) {
                   r->conversation = "c";
                   r->history_tag = 5;
                   r->tail = tail;
                 }).ok());
    b.run_all();
    EXPECT_EQ(b.run("t2").tokens, oracle(full, 25)) << i;
    b.cache.clear_conversations();
    EXPECT_EQ(b.cache.allocator().n_used(), 0);
    EXPECT_EQ(b.cache.allocator().n_reserved(), 0);
  }
  EXPECT_GT(n_rejected, 0);
}

// Grammar: token v >= 2 spells one letter; the grammar allows only a, b, c (ids 2, 3, 4) and
// the stop id after 3 letters, so many drafts fall outside the mask.
TEST(Speculation, ConstrainedGreedyIsUnchanged) {
  std::vector<std::string> letters(kVocab);
  for (int v = 2; v < kVocab; ++v)
    letters[v] = std::string(1, static_cast<char>('a' + (v - 2) % 26));
  for (int v = 28; v < kVocab; ++v) letters[v] = "0" + std::to_string(v);  // distinct
  auto vocab = grammar::TokenVocab::create(letters, {kEos}, {0}).value();
  auto g = grammar::parse_gbnf("root ::= [a-c]{3,30}");
  ASSERT_TRUE(g.ok());
  std::mt19937 rng(23);
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> prompt;
    for (int j = 0; j < 30; ++j) prompt.push_back(2 + rng() % 3);  // letters a-c: copyable
    std::map<SpecMode, std::vector<int32_t>> out;
    for (SpecMode mode : {SpecMode::kOff, SpecMode::kNgram}) {
      SpecBench b(spec_options(mode));
      ASSERT_TRUE(b.add("g", prompt, 40, [&](SeqRequest* r) {
                     r->matcher = std::make_unique<grammar::Matcher>(*g, vocab);
                   }).ok());
      b.run_all();
      EXPECT_FALSE(b.run("g").failed);
      out[mode] = b.run("g").tokens;
      EXPECT_EQ(b.cache.allocator().n_used(), 0);
    }
    EXPECT_EQ(out[SpecMode::kNgram], out[SpecMode::kOff]) << i;
    EXPECT_GE(out[SpecMode::kOff].size(), 3u);
  }
}

// Three sampled tokens after a repetitive prompt (the second and third are verified drafts):
// their joint frequencies over many seeds against the exact product of the model's
// distributions (temperature, top-p).
TEST(Speculation, SampledTokensFollowTheTargetDistribution) {
  constexpr int kV = 6, kDraws = 30000;
  constexpr float kSampledCopy = 6.0f;
  const std::vector<int32_t>& prompt = testing::kThreeTokenPrompt;
  const generation::SamplingParams sp = testing::three_token_sampling();
  SpecBench b(spec_options(SpecMode::kNgram), kV, /*copy=*/kSampledCopy, 4096);
  testing::run_sampled(&b, prompt, sp, kDraws);
  double max_diff = 0;  // (no drafter distribution: n-gram guesses)
  const double p_value =
      testing::three_token_p_value(b.runs, prompt, kV, sp, kSampledCopy, kSampledCopy, &max_diff);
  const generation::Speculation s = b.sched.stats().speculation;
  EXPECT_GT(s.accepted, kDraws / 10) << s.drafted;
  EXPECT_LT(s.accepted, s.drafted);
  EXPECT_GT(p_value, 1e-3);
  std::printf("chi-square p-value %.3g, drafted %lld accepted %lld\n", p_value,
              static_cast<long long>(s.drafted), static_cast<long long>(s.accepted));
}

// For a seed, the sampled tokens depend on the context only: the same alone, batched with
// others, with one-token and eight-token drafts, and resumed.
TEST(Speculation, SeededSampledOutputIsTheSameAloneBatchedAndWithAnyDraftLength) {
  std::mt19937 rng(29);
  for (int i = 0; i < 10; ++i) {
    const auto prompt = copy_prompt(&rng);
    auto sampled = [&](SeqRequest* r) {
      r->sampling.temperature = 0.8f;
      r->sampling.top_p = 0.9f;
      r->sampling.seed = 77 + i;
      r->stop_ids.clear();
    };
    std::vector<std::vector<int32_t>> outs;
    for (int max_draft : {1, 3, 8}) {
      Options o = spec_options(SpecMode::kNgram);
      o.max_draft = max_draft;
      SpecBench alone(o);
      ASSERT_TRUE(alone.add("x", prompt, 30, sampled).ok());
      alone.run_all();
      outs.push_back(alone.run("x").tokens);
      SpecBench batched(spec_options(SpecMode::kNgram, 3, 5));
      for (int j = 0; j < 4; ++j)
        ASSERT_TRUE(batched.add("o" + std::to_string(j), copy_prompt(&rng), 20).ok());
      ASSERT_TRUE(batched.add("x", prompt, 30, sampled).ok());
      batched.run_all();
      outs.push_back(batched.run("x").tokens);
    }
    // Resumed after 7 tokens: the rest as the uninterrupted run.
    SpecBench resumed(spec_options(SpecMode::kNgram));
    auto p = prompt;
    p.insert(p.end(), outs[0].begin(), outs[0].begin() + 7);
    ASSERT_TRUE(resumed
                    .add("x", p, 30,
                         [&](SeqRequest* r) {
                           sampled(r);
                           r->resumed = 7;
                         })
                    .ok());
    resumed.run_all();
    EXPECT_EQ(resumed.run("x").tokens, std::vector<int32_t>(outs[0].begin() + 7, outs[0].end()));
    for (const auto& o : outs) EXPECT_EQ(o, outs[0]) << i;
  }
}

}  // namespace
}  // namespace glm::scheduler
