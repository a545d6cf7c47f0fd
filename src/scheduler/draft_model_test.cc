// Speculative decoding with a draft model (Options::spec = kDraft, DraftModel), FakeModel as
// both target and draft: the target copies like an induction head (copy bias 8); a draft with
// the same bias proposes exactly the target's tokens, one with another bias proposes tokens
// that are often, not always, right, from a distribution q that differs from the target's p.
// Greedy output equals the target's greedy continuation alone and batched (chunked prefill,
// forks, stop ids, max_tokens); cancellation at every step frees every block of both caches;
// sampled tokens follow the target distribution (chi-square over 3-token answers); a seed gives
// the same tokens alone and batched; a draft cache without room only stops drafting.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sampler/sampler.h"
#include "scheduler/fake_model.h"
#include "scheduler/scheduler.h"
#include "scheduler/spec_test_util.h"

namespace glm::scheduler {
namespace {

using generation::SpecMode;
using testing::copy_prompt;
using testing::fake_greedy;
using testing::FakeModel;
using testing::kCopy;
using testing::kEos;
using testing::kVocab;
using testing::oracle;
using testing::SeqRun;

constexpr float kDraftCopy = 5.0f;  // a draft that agrees often, not always

Options draft_options(int max_batch = 8, int prefill_chunk = 64, SpecMode mode = SpecMode::kDraft) {
  Options o;
  o.spec = mode;
  o.max_batch = max_batch;
  o.prefill_chunk = prefill_chunk;
  return o;
}

// A target and a draft FakeModel, each with its own cache (4-token blocks).
struct DraftBench {
  explicit DraftBench(Options opt, float draft_copy = kDraftCopy, int n_vocab = kVocab,
                      float copy = kCopy, int n_blocks = 512, int n_draft_blocks = 512)
      : model(n_vocab, 4),
        draft(n_vocab, 4),
        cache(n_blocks, 4),
        draft_cache(n_draft_blocks, 4),
        sched(&model, nullptr, &cache, opt, DraftModel{&draft, nullptr, &draft_cache}) {
    model.set_copy_bias(copy);
    draft.set_copy_bias(draft_copy);
  }
  Status add(const std::string& id, std::vector<int32_t> prompt, int max_tokens,
             const std::function<void(SeqRequest*)>& edit = nullptr) {
    return runs.add(&sched, id, std::move(prompt), max_tokens, {kEos}, edit);
  }
  void run_all() { testing::run_all(&sched); }
  SeqRun& run(const std::string& id) { return runs[id]; }
  // Nothing held in either cache (the target's prefix cache keeps idle blocks: not "used").
  void expect_no_leak(const std::string& where) {
    testing::expect_no_leak({&cache, &draft_cache}, where);
  }

  FakeModel model;
  FakeModel draft;
  kv::KvCache cache;
  kv::KvCache draft_cache;
  Scheduler sched;
  testing::Runs runs;
};

// 60 prompts each with a draft that is the target's own model (every draft accepted), one
// that agrees often, and one that knows nothing of copying (rarely right).
TEST(DraftModel, GreedyOutputIsTheTargetsGreedyContinuationAlone) {
  for (float draft_copy : {kCopy, kDraftCopy, 0.0f}) {
    std::mt19937 rng(7);
    generation::Speculation sum;
    for (int i = 0; i < 60; ++i) {
      const auto prompt = copy_prompt(&rng);
      const int max_tokens = 1 + rng() % 40;
      DraftBench b(draft_options(), draft_copy);
      ASSERT_TRUE(b.add("a", prompt, max_tokens).ok());
      b.run_all();
      const SeqRun& r = b.run("a");
      EXPECT_EQ(r.tokens, oracle(prompt, max_tokens)) << "prompt " << i << " bias " << draft_copy;
      EXPECT_EQ(r.n_final, 1);
      EXPECT_LE(r.finish.speculation.accepted, r.finish.speculation.drafted);
      EXPECT_EQ(b.sched.stats().speculation, r.finish.speculation);
      b.expect_no_leak("prompt " + std::to_string(i));
      sum.drafted += r.finish.speculation.drafted;
      sum.accepted += r.finish.speculation.accepted;
    }
    std::printf("draft copy bias %.0f: drafted %lld accepted %lld\n", draft_copy,
                static_cast<long long>(sum.drafted), static_cast<long long>(sum.accepted));
    if (draft_copy == kCopy) {
      EXPECT_EQ(sum.accepted, sum.drafted);  // the target's own model: never wrong
      EXPECT_GT(sum.drafted, 500);
    } else {
      EXPECT_GT(sum.accepted, 0);
      EXPECT_LT(sum.accepted, sum.drafted);
    }
  }
}

TEST(DraftModel, BatchedWithChunkedPrefillAndForksEqualsAloneInFewerPasses) {
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) prompts.push_back(copy_prompt(&rng));
  std::map<SpecMode, int64_t> passes;
  for (SpecMode mode : {SpecMode::kOff, SpecMode::kDraft}) {
    DraftBench b(draft_options(/*max_batch=*/6, /*prefill_chunk=*/7, mode));
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
    b.expect_no_leak("batched");
    passes[mode] = b.model.n_forward();
    if (mode == SpecMode::kDraft) {
      EXPECT_GT(b.sched.stats().speculation.accepted, 0);
      EXPECT_GT(b.draft.max_batch_seen(), 1);  // the draft passes are batched too
    } else {
      EXPECT_EQ(b.draft.n_forward(), 0);
    }
  }
  EXPECT_LT(passes[SpecMode::kDraft], passes[SpecMode::kOff] * 3 / 4);
}

TEST(DraftModel, CancelAtEveryStepFreesEveryBlockOfBothCachesAndLeavesOthersExact) {
  std::mt19937 rng(17);
  const auto victim = copy_prompt(&rng);
  const auto other = copy_prompt(&rng);
  const auto queued = copy_prompt(&rng);
  testing::cancel_at_every_step(
      [] {
        return std::make_unique<DraftBench>(draft_options(/*max_batch=*/2, /*prefill_chunk=*/5));
      },
      [](const DraftBench& b) { return b.draft_cache.allocator().n_used() > 0; },
      [](const std::vector<int32_t>& p, int n) { return oracle(p, n, {}); }, victim, other, queued);
}

// Stop ids drafted by the draft model and max_tokens inside a draft.
TEST(DraftModel, StopIdsAndMaxTokensInsideADraft) {
  std::mt19937 rng(19);
  int n_stopped = 0;
  for (int i = 0; i < 40; ++i) {
    const auto prompt = copy_prompt(&rng);
    const int32_t stop = prompt[prompt.size() - 1 - rng() % 4];  // a token it will copy
    for (int max_tokens : {2, 5, 33}) {
      DraftBench b(draft_options(), kCopy);
      ASSERT_TRUE(
          b.add("a", prompt, max_tokens, [&](SeqRequest* r) { r->stop_ids = {stop}; }).ok());
      b.run_all();
      const auto want = oracle(prompt, max_tokens, {stop});
      EXPECT_EQ(b.run("a").tokens, want) << i << " " << max_tokens;
      n_stopped += static_cast<int>(want.size()) < max_tokens;
      b.expect_no_leak("stops");
    }
  }
  EXPECT_GT(n_stopped, 10);
}

// Prompts longer than a draft catch-up chunk (128 tokens): the draft model reads them over
// several steps, then drafts; alone and batched, the output stays exact.
TEST(DraftModel, LongPromptsAreCaughtUpInChunksThenDrafted) {
  std::mt19937 rng(37);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p;
    while (static_cast<int>(p.size()) < 300 + 60 * i) {
      const auto part = copy_prompt(&rng);
      p.insert(p.end(), part.begin(), part.end());
    }
    prompts.push_back(p);
  }
  DraftBench b(draft_options(/*max_batch=*/3, /*prefill_chunk=*/64), kCopy);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(b.add("r" + std::to_string(i), prompts[i], 40).ok());
  }
  b.run_all();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const SeqRun& r = b.run("r" + std::to_string(i));
    EXPECT_EQ(r.tokens, oracle(prompts[i], 40)) << i;
    EXPECT_GT(r.finish.speculation.accepted, 0) << i;
  }
  // Each prompt was read once by the draft model (and its generated tokens after it).
  int64_t prompt_tokens = 0;
  for (const auto& p : prompts) prompt_tokens += static_cast<int64_t>(p.size());
  EXPECT_GE(b.draft.n_tokens_run(), prompt_tokens);
  EXPECT_LT(b.draft.n_tokens_run(), prompt_tokens + 3 * 80);
  b.expect_no_leak("long prompts");
}

// A draft cache too small for the sequences: those without a reservation do not draft, and
// the output stays exact.
TEST(DraftModel, ADraftCacheWithoutRoomOnlyStopsDrafting) {
  std::mt19937 rng(23);
  DraftBench b(draft_options(/*max_batch=*/4), kCopy, kVocab, kCopy, 512, /*n_draft_blocks=*/12);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(copy_prompt(&rng));
    ASSERT_TRUE(b.add("r" + std::to_string(i), prompts.back(), 30).ok());
  }
  b.run_all();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(b.run("r" + std::to_string(i)).tokens, oracle(prompts[i], 30)) << i;
  }
  b.expect_no_leak("small draft cache");
}

// A draft model whose forward fails (from its 4th pass on): those sequences stop drafting and
// free their draft blocks; the output stays exact.
TEST(DraftModel, AFailingDraftModelOnlyStopsDrafting) {
  class Failing : public FakeModel {
   public:
    using FakeModel::FakeModel;
    Status forward(const std::vector<model::SeqInput>& batch, model::KvPool* kv,
                   std::vector<float>* out, model::OutputKind kind) override {
      if (++calls_ > 3) return Status(ErrorCode::kInternal, "draft failure (test)");
      return FakeModel::forward(batch, kv, out, kind);
    }

   private:
    int calls_ = 0;
  };
  std::mt19937 rng(31);
  FakeModel target(kVocab, 4);
  target.set_copy_bias(kCopy);
  Failing draft(kVocab, 4);
  draft.set_copy_bias(kCopy);
  kv::KvCache cache(512, 4), draft_cache(512, 4);
  Scheduler sched(&target, nullptr, &cache, draft_options(4),
                  DraftModel{&draft, nullptr, &draft_cache});
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SeqRun> runs(3);
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(copy_prompt(&rng));
    SeqRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt = prompts.back();
    r.sampling.max_tokens = 30;
    r.sampling.temperature = 0.0f;
    r.stop_ids = {kEos};
    r.observer = std::make_unique<testing::RunObserver>(&runs[i]);
    ASSERT_TRUE(sched.add(std::move(r)).ok());
  }
  for (int i = 0; i < 10000 && !sched.idle(); ++i) sched.step();
  ASSERT_TRUE(sched.idle());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(runs[i].tokens, oracle(prompts[i], 30)) << i;
  EXPECT_GT(sched.stats().speculation.drafted, 0);
  EXPECT_EQ(draft_cache.allocator().n_used(), 0);
  EXPECT_EQ(draft_cache.allocator().n_reserved(), 0);
  EXPECT_EQ(cache.allocator().n_used(), 0);
}

// Three sampled tokens after a repetitive prompt (the second and third are verified drafts
// of a draft model whose q differs from the target's p): their joint frequencies over many
// seeds against the exact product of the target's distributions (temperature, top-p). The
// sampler's own test shows that wrong rules (accepting always, resampling from p) fail it.
TEST(DraftModel, SampledTokensFollowTheTargetDistribution) {
  constexpr int kV = 6, kDraws = 30000;
  constexpr float kSampledCopy = 6.0f, kSampledDraftCopy = 2.0f;
  const std::vector<int32_t>& prompt = testing::kThreeTokenPrompt;
  const generation::SamplingParams sp = testing::three_token_sampling();
  DraftBench b(draft_options(), kSampledDraftCopy, kV, kSampledCopy, 4096, 4096);
  testing::run_sampled(&b, prompt, sp, kDraws);
  double max_diff = 0;  // the draft's q differs from p where it is checked (the second token)
  const double p_value = testing::three_token_p_value(b.runs, prompt, kV, sp, kSampledCopy,
                                                      kSampledDraftCopy, &max_diff);
  EXPECT_GT(max_diff, 0.2);
  const generation::Speculation s = b.sched.stats().speculation;
  EXPECT_GT(s.accepted, kDraws / 10) << s.drafted;
  EXPECT_LT(s.accepted, s.drafted);
  EXPECT_GT(p_value, 1e-3);
  std::printf("chi-square p-value %.3g, drafted %lld accepted %lld, max |p - q| %.2f\n", p_value,
              static_cast<long long>(s.drafted), static_cast<long long>(s.accepted), max_diff);
  b.expect_no_leak("sampled");
}

// For a seed (and a draft model and max_draft), the sampled tokens are the same alone and
// batched with others.
TEST(DraftModel, SeededSampledOutputIsTheSameAloneAndBatched) {
  std::mt19937 rng(29);
  for (int i = 0; i < 10; ++i) {
    const auto prompt = copy_prompt(&rng);
    auto sampled = [&](SeqRequest* r) {
      r->sampling.temperature = 0.8f;
      r->sampling.top_p = 0.9f;
      r->sampling.repetition_penalty = 1.1f;  // the draft's q sees the drafted tokens too
      r->sampling.seed = 77 + i;
      r->stop_ids.clear();
    };
    DraftBench alone(draft_options());
    ASSERT_TRUE(alone.add("x", prompt, 30, sampled).ok());
    alone.run_all();
    DraftBench batched(draft_options(3, 5));
    for (int j = 0; j < 4; ++j)
      ASSERT_TRUE(batched.add("o" + std::to_string(j), copy_prompt(&rng), 20).ok());
    ASSERT_TRUE(batched.add("x", prompt, 30, sampled).ok());
    batched.run_all();
    EXPECT_EQ(batched.run("x").tokens, alone.run("x").tokens) << i;
    EXPECT_EQ(alone.run("x").tokens.size(), 30u);
    EXPECT_GT(alone.run("x").finish.speculation.drafted, 0);
    alone.expect_no_leak("alone");
    batched.expect_no_leak("batched");
  }
}

}  // namespace
}  // namespace glm::scheduler
