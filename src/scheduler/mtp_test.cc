// Speculative decoding with the model's own MTP block (Options::spec = kMtp), FakeModel's MTP
// (fake_model.h): each position's hidden row is its context's hash and the block extends it by
// the token after, so an exact block drafts the target's own tokens and one with noise drafts
// tokens that are often, not always, right; the block refuses a row that does not continue the
// previous position (a row paired with the wrong token or position). Greedy output equals the
// target's greedy continuation alone and batched (chunked prefill, forks, a cached prefix);
// cancellation at every step frees every block of both caches; a failing block only stops
// drafting; sampled tokens follow the target distribution (chi-square over 3-token answers).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "scheduler/fake_model.h"
#include "scheduler/scheduler.h"
#include "scheduler/spec_test_util.h"

namespace glm::scheduler {
namespace {

using generation::SpecMode;
using testing::fake_greedy;
using testing::FakeModel;
using testing::kEos;
using testing::kVocab;
using testing::SeqRun;

// Drafts taken as free (draft_cost false) unless a test measures costs.
Options mtp_options(int max_batch = 8, int prefill_chunk = 64, SpecMode mode = SpecMode::kMtp) {
  Options o;
  o.spec = mode;
  o.max_batch = max_batch;
  o.prefill_chunk = prefill_chunk;
  o.draft_cost = false;
  return o;
}

// A target FakeModel with an MTP block of `noise`, its cache and the block's (4-token blocks).
struct MtpBench {
  explicit MtpBench(Options opt, float noise = 0, int n_vocab = kVocab, float copy = 0,
                    int n_blocks = 512, int n_mtp_blocks = 512)
      : model(n_vocab, 4),
        ready(set_up(&model, noise, copy)),
        cache(n_blocks, 4),
        mtp_cache(n_mtp_blocks, 4),
        sched(&model, nullptr, &cache, opt, DraftModel{nullptr, nullptr, &mtp_cache}) {}
  // The block must exist before the scheduler checks for it.
  static bool set_up(FakeModel* m, float noise, float copy) {
    m->set_mtp(noise);
    m->set_copy_bias(copy);
    return true;
  }
  Status add(const std::string& id, std::vector<int32_t> prompt, int max_tokens,
             const std::function<void(SeqRequest*)>& edit = nullptr) {
    return runs.add(&sched, id, std::move(prompt), max_tokens, {kEos}, edit);
  }
  void run_all() { testing::run_all(&sched); }
  SeqRun& run(const std::string& id) { return runs[id]; }
  void expect_no_leak(const std::string& where) {
    testing::expect_no_leak({&cache, &mtp_cache}, where);
  }

  FakeModel model;
  bool ready;
  kv::KvCache cache;
  kv::KvCache mtp_cache;
  Scheduler sched;
  testing::Runs runs;
};

std::vector<int32_t> prompt_of(std::mt19937* rng, int n_vocab = kVocab) {
  std::vector<int32_t> v;
  const int n = 3 + (*rng)() % 40;
  for (int i = 0; i < n; ++i) v.push_back(2 + (*rng)() % (n_vocab - 2));
  return v;
}

std::vector<int32_t> mtp_oracle(const std::vector<int32_t>& prompt, int max_tokens,
                                std::vector<int32_t> stops = {kEos}) {
  return fake_greedy(prompt, kVocab, max_tokens, stops);
}

// An exact block (every draft accepted, several a step) and one with noise (some rejected).
TEST(MtpDraft, GreedyOutputIsTheTargetsGreedyContinuationAlone) {
  for (float noise : {0.0f, 6.0f}) {
    std::mt19937 rng(7);
    generation::Speculation sum;
    int64_t passes = 0, tokens = 0;
    for (int i = 0; i < 60; ++i) {
      const auto prompt = prompt_of(&rng);
      const int max_tokens = 1 + rng() % 40;
      MtpBench b(mtp_options(), noise);
      ASSERT_TRUE(b.add("a", prompt, max_tokens).ok());
      b.run_all();
      const SeqRun& r = b.run("a");
      EXPECT_FALSE(r.failed) << i;
      EXPECT_EQ(r.tokens, mtp_oracle(prompt, max_tokens)) << "prompt " << i << " noise " << noise;
      EXPECT_EQ(r.n_final, 1);
      EXPECT_EQ(b.sched.stats().speculation, r.finish.speculation);
      b.expect_no_leak("prompt " + std::to_string(i));
      sum.drafted += r.finish.speculation.drafted;
      sum.accepted += r.finish.speculation.accepted;
      passes += b.model.n_forward();
      tokens += static_cast<int64_t>(r.tokens.size());
      if (r.tokens.size() > 2) {
        EXPECT_GT(b.model.n_mtp_forward(), 0) << i;
      }
    }
    std::printf("MTP noise %.0f: drafted %lld accepted %lld, %lld target passes for %lld tokens\n",
                noise, static_cast<long long>(sum.drafted), static_cast<long long>(sum.accepted),
                static_cast<long long>(passes), static_cast<long long>(tokens));
    if (noise == 0) {
      EXPECT_EQ(sum.accepted, sum.drafted);  // the block extends the target's own context
      EXPECT_GT(sum.drafted, 500);
      EXPECT_LT(passes, tokens / 2);  // several tokens a pass
    } else {
      EXPECT_GT(sum.accepted, 0);
      EXPECT_LT(sum.accepted, sum.drafted);
    }
  }
}

// Batched with chunked prefill (prefilling sequences feed the block as they go), forks (each
// starts its block from the prompt's last row), and a second round over the cached prompts (the
// block starts where the computed rows start): equal to alone, in fewer target passes.
TEST(MtpDraft, BatchedWithChunkedPrefillForksAndACachedPrefixEqualsAlone) {
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 24; ++i) prompts.push_back(prompt_of(&rng));
  std::map<SpecMode, int64_t> passes;
  for (SpecMode mode : {SpecMode::kOff, SpecMode::kMtp}) {
    MtpBench b(mtp_options(/*max_batch=*/6, /*prefill_chunk=*/7, mode), /*noise=*/0.5f);
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < prompts.size(); ++i) {
        const std::string id = "r" + std::to_string(i) + "." + std::to_string(round);
        ASSERT_TRUE(b.add(id, prompts[i], 40, [&](SeqRequest* r) {
                       if (i % 5 == 0) {  // a second choice, greedy too: the same answer
                         SeqRequest::Fork f;
                         f.sampling = r->sampling;
                         f.observer = b.runs.observe(id + "#1");
                         r->forks.push_back(std::move(f));
                       }
                     }).ok());
      }
      b.run_all();
      for (size_t i = 0; i < prompts.size(); ++i) {
        const std::string id = "r" + std::to_string(i) + "." + std::to_string(round);
        const auto want = mtp_oracle(prompts[i], 40);
        EXPECT_FALSE(b.run(id).failed) << id;
        EXPECT_EQ(b.run(id).tokens, want) << id;
        if (i % 5 == 0) {
          EXPECT_EQ(b.run(id + "#1").tokens, want) << id;
        }
      }
    }
    EXPECT_GT(b.sched.stats().cached_tokens_total, 0);  // the second round reused prompts
    EXPECT_GT(b.model.max_batch_seen(), 1);
    b.expect_no_leak("batched");
    passes[mode] = b.model.n_forward();
    if (mode == SpecMode::kMtp) {
      EXPECT_GT(b.sched.stats().speculation.accepted, 0);
    } else {
      EXPECT_EQ(b.model.n_mtp_forward(), 0);
    }
  }
  EXPECT_LT(passes[SpecMode::kMtp], passes[SpecMode::kOff] * 3 / 4);
}

TEST(MtpDraft, CancelAtEveryStepFreesEveryBlockOfBothCachesAndLeavesOthersExact) {
  std::mt19937 rng(17);
  const auto victim = prompt_of(&rng);
  const auto other = prompt_of(&rng);
  const auto queued = prompt_of(&rng);
  testing::cancel_at_every_step(
      [] {
        return std::make_unique<MtpBench>(mtp_options(/*max_batch=*/2, /*prefill_chunk=*/5),
                                          /*noise=*/2.0f);
      },
      [](const MtpBench& b) { return b.mtp_cache.allocator().n_used() > 0; },
      [](const std::vector<int32_t>& p, int n) { return mtp_oracle(p, n, {}); }, victim, other,
      queued);
}

// A block that fails from some call on, and a block cache too small for every sequence: those
// sequences stop drafting (blocks given back), the output stays exact.
TEST(MtpDraft, AFailingBlockOrAFullBlockCacheOnlyStopsDrafting) {
  for (int variant = 0; variant < 2; ++variant) {
    std::mt19937 rng(31);
    MtpBench b(mtp_options(4), 0.0f, kVocab, 0, 512, variant == 0 ? 512 : 12);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 6; ++i) {
      prompts.push_back(prompt_of(&rng));
      ASSERT_TRUE(b.add("r" + std::to_string(i), prompts.back(), 30).ok());
    }
    for (int i = 0; i < 6 && !b.sched.idle(); ++i) b.sched.step();
    if (variant == 0) b.model.set_mtp_fails(true);
    b.run_all();
    for (int i = 0; i < 6; ++i) {
      EXPECT_FALSE(b.run("r" + std::to_string(i)).failed) << i;
      EXPECT_EQ(b.run("r" + std::to_string(i)).tokens, mtp_oracle(prompts[i], 30)) << i;
    }
    EXPECT_GT(b.sched.stats().speculation.drafted, 0) << variant;
    b.expect_no_leak("variant " + std::to_string(variant));
  }
}

// Three sampled tokens after a prompt (the second and third are verified drafts of a block
// whose q differs from the target's p: the target copies, the block does not know it): their
// joint frequencies over many seeds against the exact product of the target's distributions.
TEST(MtpDraft, SampledTokensFollowTheTargetDistribution) {
  constexpr int kV = 6, kDraws = 30000;
  constexpr float kSampledCopy = 3.0f;
  const std::vector<int32_t>& prompt = testing::kThreeTokenPrompt;
  const generation::SamplingParams sp = testing::three_token_sampling();
  MtpBench b(mtp_options(), /*noise=*/0.0f, kV, kSampledCopy, 4096, 4096);
  testing::run_sampled(&b, prompt, sp, kDraws);
  double max_diff = 0;  // the block's q is the target's logits without the copying
  const double p_value =
      testing::three_token_p_value(b.runs, prompt, kV, sp, kSampledCopy, 0.0f, &max_diff);
  EXPECT_GT(max_diff, 0.2);
  const generation::Speculation s = b.sched.stats().speculation;
  EXPECT_GT(s.accepted, kDraws / 10) << s.drafted;
  EXPECT_LT(s.accepted, s.drafted);
  EXPECT_GT(p_value, 1e-3);
  std::printf("chi-square p-value %.3g, drafted %lld accepted %lld, max |p - q| %.2f\n", p_value,
              static_cast<long long>(s.drafted), static_cast<long long>(s.accepted), max_diff);
  b.expect_no_leak("sampled");
}

// With measured costs (the engine's setting): a block whose pass costs a tenth of a decode
// step drafts several tokens a step; one whose pass costs 1.5 steps does not pay even when
// every draft would be accepted, and then it only probes now and then. Output exact in both.
// The fake passes sleep: milliseconds long, so that a loaded machine's scheduling delays (ctest
// runs lavapipe's tests beside this one) stay small beside them.
TEST(MtpDraft, DraftLengthsFollowTheMeasuredCostOfTheBlock) {
  std::mt19937 rng(41);
  const auto prompt = prompt_of(&rng);
  std::map<int, generation::Speculation> got;
  std::map<int, int64_t> passes;
  for (int mtp_us : {1500, 22500}) {
    Options o = mtp_options(1);
    o.draft_cost = true;
    MtpBench b(o, /*noise=*/0.0f);
    b.model.set_delay(std::chrono::microseconds(15000));
    b.model.set_mtp_delay(std::chrono::microseconds(mtp_us));
    ASSERT_TRUE(b.add("a", prompt, 120, [](SeqRequest* r) { r->stop_ids.clear(); }).ok());
    b.run_all();
    EXPECT_EQ(b.run("a").tokens, mtp_oracle(prompt, 120, {})) << mtp_us;
    got[mtp_us] = b.run("a").finish.speculation;
    passes[mtp_us] = b.model.n_forward();
    std::printf("MTP pass %d us, decode 15000 us: drafted %lld accepted %lld in %lld passes\n",
                mtp_us, static_cast<long long>(got[mtp_us].drafted),
                static_cast<long long>(got[mtp_us].accepted),
                static_cast<long long>(passes[mtp_us]));
  }
  EXPECT_EQ(got[1500].accepted, got[1500].drafted);
  EXPECT_LT(passes[1500], 120 / 2);   // several drafted tokens a step
  EXPECT_LT(got[22500].drafted, 12);  // a first probe, then rare ones
  EXPECT_GT(passes[22500], 120 * 9 / 10);
}

}  // namespace
}  // namespace glm::scheduler
