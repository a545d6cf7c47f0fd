#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"
#include "scheduler/fake_model.h"
#include "scheduler/scheduler_test_util.h"
#include "scheduler/spec_test_util.h"

namespace glm::scheduler {
namespace {

using generation::FinishReason;
using testing::fake_greedy;
using testing::FakeModel;
using testing::kEos;
using testing::kVocab;

TEST(Scheduler, SingleRequestMatchesTheModelsGreedyContinuation) {
  Harness h;
  std::mt19937 rng(3);
  auto prompt = random_prompt(&rng, 11);
  ASSERT_TRUE(h.add("a", prompt, 30).ok());
  h.run_all();
  const auto want = fake_greedy(prompt, kVocab, 30, {kEos});
  EXPECT_EQ(h.rec("a").tokens, want);
  EXPECT_EQ(h.rec("a").finish.reason,
            want.size() == 30 ? FinishReason::kLength : FinishReason::kStop);
  EXPECT_EQ(h.rec("a").finish.usage.completion_tokens, static_cast<int>(want.size()));
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

TEST(Scheduler, BatchedGreedyOutputIsIdenticalToEachRequestAlone) {
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 10; ++i) prompts.push_back(random_prompt(&rng, 1 + rng() % 40));
  prompts.push_back(prompts[0]);  // an identical prompt shares cached blocks
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    Harness h;
    ASSERT_TRUE(h.add("x", p, 25).ok());
    h.run_all();
    alone.push_back(h.rec("x").tokens);
    EXPECT_EQ(alone.back(), fake_greedy(p, kVocab, 25, {kEos}));
  }
  Options opt;
  opt.max_batch = 4;
  opt.prefill_chunk = 7;
  Harness h(opt);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(h.add("r" + std::to_string(i), prompts[i], 25).ok());
  }
  h.run_all();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(h.rec("r" + std::to_string(i)).tokens, alone[i]) << "request " << i;
  }
  EXPECT_GT(h.model.max_batch_seen(), 1);  // really batched
  EXPECT_LE(h.model.max_batch_seen(), 4);
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

TEST(Scheduler, CancelInEveryStateFreesBlocksAtOnce) {
  Options opt;
  opt.max_batch = 2;
  opt.prefill_chunk = 4;
  Harness h(opt);
  std::mt19937 rng(5);
  ASSERT_TRUE(h.add("decoding", random_prompt(&rng, 3), 100, [](SeqRequest* r) {
                 r->stop_ids.clear();
               }).ok());
  ASSERT_TRUE(h.add("prefilling", random_prompt(&rng, 40), 10).ok());
  ASSERT_TRUE(h.add("queued", random_prompt(&rng, 5), 10).ok());
  h.sched.step();  // decoding: prompt done, first token; prefilling: 1 token of 40 (budget 4-3)
  h.sched.step();
  EXPECT_EQ(h.rec("decoding").events.back(), "start");
  EXPECT_FALSE(h.rec("decoding").tokens.empty());
  EXPECT_EQ(h.rec("prefilling").events.back(), "start");
  EXPECT_TRUE(h.rec("prefilling").tokens.empty());
  EXPECT_EQ(h.rec("queued").events, std::vector<std::string>{"queued"});
  const int used_before = h.cache.allocator().n_used();
  EXPECT_GT(used_before, 0);

  h.sched.cancel("queued");
  EXPECT_EQ(h.rec("queued").finish.reason, FinishReason::kCancelled);
  h.sched.cancel("prefilling");
  EXPECT_EQ(h.rec("prefilling").finish.reason, FinishReason::kCancelled);
  EXPECT_LT(h.cache.allocator().n_used(), used_before);
  h.sched.cancel("decoding");
  EXPECT_EQ(h.rec("decoding").finish.reason, FinishReason::kCancelled);
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
  EXPECT_EQ(h.cache.allocator().n_reserved(), 0);
  EXPECT_TRUE(h.sched.idle());
  for (const char* id : {"queued", "prefilling", "decoding"}) EXPECT_EQ(h.rec(id).n_final, 1);
  h.sched.cancel("decoding");  // unknown now: ignored
  h.sched.cancel("nobody");
  EXPECT_EQ(h.rec("decoding").n_final, 1);
}

TEST(Scheduler, AdmissionIsFifoUnderBatchAndMemoryLimits) {
  Options opt;
  opt.max_batch = 2;
  // 12 blocks of 4: "big" needs 11 blocks, so it must wait for the first two to finish, and the
  // small ones behind it must not overtake it.
  Harness h(opt, 12, 4);
  std::mt19937 rng(9);
  auto no_stop = [](SeqRequest* r) { r->stop_ids.clear(); };
  ASSERT_TRUE(h.add("a", random_prompt(&rng, 4), 8, no_stop).ok());
  ASSERT_TRUE(h.add("b", random_prompt(&rng, 4), 8, no_stop).ok());
  ASSERT_TRUE(h.add("big", random_prompt(&rng, 30), 14, no_stop).ok());
  ASSERT_TRUE(h.add("c", random_prompt(&rng, 2), 2, no_stop).ok());
  ASSERT_TRUE(h.add("d", random_prompt(&rng, 2), 2, no_stop).ok());
  EXPECT_EQ(h.rec("d").queued_position, 4);
  h.run_all();
  EXPECT_EQ(h.rec("a").start_order, 0);
  EXPECT_EQ(h.rec("b").start_order, 1);
  EXPECT_EQ(h.rec("big").start_order, 2);
  EXPECT_EQ(h.rec("c").start_order, 3);
  EXPECT_EQ(h.rec("d").start_order, 4);
  for (const char* id : {"a", "b", "big", "c", "d"})
    EXPECT_EQ(h.rec(id).finish.reason, FinishReason::kLength);
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

TEST(Scheduler, ChunkedPrefillKeepsOthersDecodingEveryStep) {
  Options opt;
  opt.prefill_chunk = 8;
  Harness h(opt);
  std::mt19937 rng(2);
  auto no_stop = [](SeqRequest* r) { r->stop_ids.clear(); };
  ASSERT_TRUE(h.add("short", random_prompt(&rng, 3), 40, no_stop).ok());
  h.sched.step();
  ASSERT_EQ(h.rec("short").tokens.size(), 1u);
  const auto long_prompt = random_prompt(&rng, 100);
  ASSERT_TRUE(h.add("long", long_prompt, 5, no_stop).ok());
  // The long prompt needs ceil(100 / 8) = 13 steps of prefill (decode tokens do not use the
  // prefill budget); the short one gets a token in every one of them.
  int steps = 0;
  while (h.rec("long").tokens.empty()) {
    const size_t before = h.rec("short").tokens.size();
    h.sched.step();
    ++steps;
    EXPECT_EQ(h.rec("short").tokens.size(), before + 1) << "step " << steps;
  }
  EXPECT_EQ(steps, 13);
  h.run_all();
  EXPECT_EQ(h.rec("long").tokens, fake_greedy(long_prompt, kVocab, 5, {}));
  // Its progress after each chunk but the last (which gives the first token): 8, 16, ... 96 of
  // 100; a prompt of one chunk reports none.
  std::vector<std::pair<int, int>> want;
  for (int done = 8; done < 100; done += 8) want.emplace_back(done, 100);
  EXPECT_EQ(h.rec("long").prefill, want);
  EXPECT_TRUE(h.rec("short").prefill.empty());
}

// The prefill order (docs/engine.md#prefill-order): the prompt with the fewest tokens left
// draws on the step's budget first, so a short prompt admitted after a long one gets its first
// token in its first step; the long one takes the rest of the budget.
TEST(Scheduler, AShortPromptGoesAheadOfALongOneInThePrefillBudget) {
  Options opt;
  opt.prefill_chunk = 8;
  Harness h(opt);
  std::mt19937 rng(3);
  auto no_stop = [](SeqRequest* r) { r->stop_ids.clear(); };
  const auto long_prompt = random_prompt(&rng, 40);
  const auto short_prompt = random_prompt(&rng, 5);
  ASSERT_TRUE(h.add("long", long_prompt, 3, no_stop).ok());
  ASSERT_TRUE(h.add("short", short_prompt, 3, no_stop).ok());
  h.sched.step();
  EXPECT_EQ(h.rec("short").tokens.size(), 1u);
  EXPECT_TRUE(h.rec("long").tokens.empty());
  EXPECT_EQ(h.rec("long").prefill, (std::vector<std::pair<int, int>>{{3, 40}}));
  h.run_all();
  EXPECT_EQ(h.rec("long").tokens, fake_greedy(long_prompt, kVocab, 3, {}));
  EXPECT_EQ(h.rec("short").tokens, fake_greedy(short_prompt, kVocab, 3, {}));
}

// A prompt whose rest exceeds the budget by at most a quarter of it finishes in this step
// instead of leaving a stub that would cost its first token a step of its own.
TEST(Scheduler, APromptNearlyDoneFinishesInTheSameStep) {
  auto steps_to_first_token = [](int prompt_tokens) {
    Options opt;
    opt.prefill_chunk = 8;
    Harness h(opt);
    std::mt19937 rng(4);
    EXPECT_TRUE(h.add("p", random_prompt(&rng, prompt_tokens), 2).ok());
    int steps = 0;
    while (h.rec("p").tokens.empty() && steps < 10) {
      h.sched.step();
      ++steps;
    }
    return steps;
  };
  EXPECT_EQ(steps_to_first_token(8), 1);
  EXPECT_EQ(steps_to_first_token(10), 1);  // 2 over the budget of 8: within its quarter
  EXPECT_EQ(steps_to_first_token(11), 2);  // 3 over: a second step
  EXPECT_EQ(steps_to_first_token(18), 2);  // 8, then 10
  EXPECT_EQ(steps_to_first_token(19), 3);
}

// Shortest-first never starves: a long prompt passed over kMaxPassedOver steps in a row goes
// first, however many short prompts keep arriving, and a decoding sequence gets a token every
// step throughout.
TEST(Scheduler, ALongPromptIsNotStarvedByAStreamOfShortOnes) {
  Options opt;
  opt.prefill_chunk = 8;
  opt.max_batch = 16;
  Harness h(opt);
  std::mt19937 rng(5);
  auto no_stop = [](SeqRequest* r) { r->stop_ids.clear(); };
  ASSERT_TRUE(h.add("decoder", random_prompt(&rng, 3), 200, no_stop).ok());
  h.sched.step();
  const auto long_prompt = random_prompt(&rng, 40);
  ASSERT_TRUE(h.add("long", long_prompt, 2, no_stop).ok());
  int steps = 0;
  int gap = 0, longest_gap = 0;  // steps in a row the long prompt got no tokens
  size_t last_progress = 0;
  while (h.rec("long").tokens.empty()) {
    ASSERT_TRUE(h.add("s" + std::to_string(steps), random_prompt(&rng, 8), 1, no_stop).ok());
    const size_t before = h.rec("decoder").tokens.size();
    h.sched.step();
    ++steps;
    ASSERT_EQ(h.rec("decoder").tokens.size(), before + 1) << "step " << steps;
    const size_t progress = h.rec("long").prefill.size();
    gap = progress == last_progress && h.rec("long").tokens.empty() ? gap + 1 : 0;
    longest_gap = std::max(longest_gap, gap);
    last_progress = progress;
    ASSERT_LT(steps, 100);
  }
  EXPECT_EQ(longest_gap, 4);       // kMaxPassedOver: then it goes first
  EXPECT_LE(steps, 5 * (40 / 8));  // a chunk at least every fifth step
  EXPECT_GT(steps, 40 / 8);        // the short ones did go first
  h.run_all();
  EXPECT_EQ(h.rec("long").tokens, fake_greedy(long_prompt, kVocab, 2, {}));
}

// The prefill budget in time (Options::max_stall_ms): with every token costing 1 ms, a step's
// prompt tokens grow from the chunk of 4 towards the 100 that fit in the 100 ms allowed, never
// past them, while the decoding sequence still gets a token every step.
TEST(Scheduler, ATimeBudgetGrowsTheChunkWithinTheStall) {
  Options opt;
  opt.prefill_chunk = 4;
  opt.max_stall_ms = 100;
  Harness h(opt);
  h.model.set_token_delay(std::chrono::milliseconds(1));
  std::mt19937 rng(6);
  auto no_stop = [](SeqRequest* r) { r->stop_ids.clear(); };
  ASSERT_TRUE(h.add("decoder", random_prompt(&rng, 2), 400, no_stop).ok());
  h.sched.step();
  h.sched.step();  // a decode-only step measured
  ASSERT_TRUE(h.add("long", random_prompt(&rng, 400), 2, no_stop).ok());
  int steps = 0;
  while (h.rec("long").tokens.empty()) {
    const size_t before = h.rec("decoder").tokens.size();
    h.sched.step();
    ++steps;
    ASSERT_EQ(h.rec("decoder").tokens.size(), before + 1);
    ASSERT_LT(steps, 100);
  }
  int last = 0, largest = 0;
  for (const auto& [done, total] : h.rec("long").prefill) {
    largest = std::max(largest, done - last);
    last = done;
  }
  EXPECT_LE(largest, 100 + 1);  // the slack (a quarter of the chunk) may end a prompt
  EXPECT_GT(largest, 4 * 4);    // measured: far more than the chunk
  EXPECT_LT(steps, 400 / 4 / 4);
}

TEST(Scheduler, PrefillProgressCountsOnlyTheTokensNotCached) {
  Options opt;
  opt.prefill_chunk = 8;
  Harness h(opt);
  std::mt19937 rng(3);
  const auto prompt = random_prompt(&rng, 40);
  ASSERT_TRUE(h.add("first", prompt, 2).ok());
  h.run_all();
  // The same 40 tokens and 20 more: the prefix cache holds 40 (10 full blocks of 4), so 20 are
  // prefilled, in chunks of 8: progress 8 and 16 of 20.
  auto longer = prompt;
  const auto more = random_prompt(&rng, 20);
  longer.insert(longer.end(), more.begin(), more.end());
  ASSERT_TRUE(h.add("second", longer, 2).ok());
  h.run_all();
  ASSERT_EQ(h.rec("second").start.cached_tokens, 40);
  EXPECT_EQ(h.rec("second").prefill, (std::vector<std::pair<int, int>>{{8, 20}, {16, 20}}));
}

TEST(Scheduler, StopsOnStopIdObserverAndLength) {
  Harness h;
  std::mt19937 rng(4);
  auto prompt = random_prompt(&rng, 6);
  auto free_run = fake_greedy(prompt, kVocab, 12, {});
  ASSERT_GE(free_run.size(), 5u);
  // A stop id = the 4th greedy token: three tokens come out, the stop id does not.
  ASSERT_TRUE(
      h.add("stopid", prompt, 12, [&](SeqRequest* r) { r->stop_ids = {free_run[3]}; }).ok());
  ASSERT_TRUE(h.add("observer", prompt, 12, [](SeqRequest* r) { r->stop_ids.clear(); }).ok());
  h.rec("observer").stop_after = 2;
  ASSERT_TRUE(h.add("length", prompt, 5, [](SeqRequest* r) { r->stop_ids.clear(); }).ok());
  h.run_all();
  // (free_run[3] may also appear earlier; compare with the model's own stop-aware output.)
  EXPECT_EQ(h.rec("stopid").tokens, fake_greedy(prompt, kVocab, 12, {free_run[3]}));
  EXPECT_EQ(h.rec("stopid").finish.reason, FinishReason::kStop);
  EXPECT_EQ(h.rec("observer").tokens.size(), 2u);
  EXPECT_EQ(h.rec("observer").finish.reason, FinishReason::kStop);
  EXPECT_EQ(h.rec("length").tokens.size(), 5u);
  EXPECT_EQ(h.rec("length").finish.reason, FinishReason::kLength);
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

TEST(Scheduler, RejectsBadRequestsWithoutCallbacks) {
  Options opt;
  opt.n_ctx = 32;
  Harness h(opt);
  EXPECT_EQ(h.add("empty", {}, 4).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.add("range", {5, kVocab}, 4).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.add("neg", {5, -1}, 4).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.add("zero", {5}, 0).code(), ErrorCode::kInvalidArgument);
  const Status s = h.add("long", std::vector<int32_t>(30, 5), 3);
  EXPECT_EQ(s.code(), ErrorCode::kContextOverflow);
  EXPECT_NE(s.message().find("context of 32"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("--"), std::string::npos) << s.message();  // no flag for clients
  for (const char* id : {"empty", "range", "neg", "zero", "long"}) {
    EXPECT_TRUE(h.rec(id).events.empty());
  }
  EXPECT_TRUE(h.sched.idle());
}

TEST(Scheduler, RequestLargerThanTheWholeCacheFailsAndOthersGoOn) {
  Harness h(Options{}, 4, 4);
  std::mt19937 rng(8);
  ASSERT_TRUE(h.add("huge", random_prompt(&rng, 20), 4).ok());
  ASSERT_TRUE(h.add("ok", random_prompt(&rng, 3), 4).ok());
  h.run_all();
  EXPECT_EQ(h.rec("huge").error.code(), ErrorCode::kOutOfMemory);
  EXPECT_EQ(h.rec("ok").n_final, 1);
  EXPECT_EQ(h.rec("ok").events.back(), "finish");
}

TEST(Scheduler, NextTurnOfAConversationPrefillsOnlyItsNewTokens) {
  Harness h;
  std::mt19937 rng(21);
  auto p1 = random_prompt(&rng, 13);
  ASSERT_TRUE(h.add("t1", p1, 9, [](SeqRequest* r) { r->conversation = "c"; }).ok());
  h.rec("t1").save = true;
  h.rec("t1").tag = 77;
  h.run_all();
  const auto gen1 = h.rec("t1").tokens;
  ASSERT_FALSE(gen1.empty());
  EXPECT_TRUE(h.cache.has_conversation("c"));

  const std::vector<int32_t> tail = {40, 41, 42};
  std::vector<int32_t> history = p1;
  history.insert(history.end(), gen1.begin(), gen1.end());
  std::vector<int32_t> full = history;
  full.insert(full.end(), tail.begin(), tail.end());
  ASSERT_TRUE(h.add("t2", {3, 3, 3}, 9,
                    [&](SeqRequest* r) {  // prompt unused when reused
                      r->conversation = "c";
                      r->history_tag = 77;
                      r->tail = tail;
                    })
                  .ok());
  h.run_all();
  const Record& t2 = h.rec("t2");
  EXPECT_TRUE(t2.start.from_conversation);
  // Everything of turn 1 is cached (prompt + generated; a length finish leaves the last
  // generated token unfed, which is then prefilled with the new turn).
  const bool by_length = h.rec("t1").finish.reason == FinishReason::kLength;
  EXPECT_EQ(t2.start.cached_tokens, static_cast<int>(history.size()) - (by_length ? 1 : 0));
  EXPECT_EQ(t2.start.prompt_tokens, static_cast<int>(full.size()));
  // The continuation is what the model gives for the full token history.
  EXPECT_EQ(t2.tokens, fake_greedy(full, kVocab, 9, {kEos}));
  h.cache.clear_conversations();
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

TEST(Scheduler, ConstrainedGreedyIsTheArgmaxOverTheMaskAndLeavesOthersAlone) {
  auto vocab = letter_vocab();
  auto g = grammar::parse_gbnf("root ::= [a-c]{3,6}");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::mt19937 rng(5);
  Options opt;
  opt.max_batch = 8;
  Harness h(opt);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(random_prompt(&rng, 1 + rng() % 20));
    const bool constrained = i % 2 == 0;
    ASSERT_TRUE(h.add("s" + std::to_string(i), prompts.back(), 20, [&](SeqRequest* r) {
                   if (constrained) r->matcher = std::make_unique<grammar::Matcher>(*g, vocab);
                 }).ok());
  }
  ASSERT_TRUE(h.add("cancelled", random_prompt(&rng, 5), 20, [&](SeqRequest* r) {
                 r->matcher = std::make_unique<grammar::Matcher>(*g, vocab);
               }).ok());
  h.sched.step();
  h.sched.step();
  h.sched.cancel("cancelled");
  h.run_all();
  int n_full = 0;
  for (int i = 0; i < 8; ++i) {
    const Record& r = h.rec("s" + std::to_string(i));
    if (i % 2 == 0) {
      EXPECT_EQ(r.tokens, masked_greedy(prompts[i])) << i;
      EXPECT_GE(r.tokens.size(), 3u);
      n_full += r.tokens.size() == 6;
      EXPECT_EQ(r.finish.reason, FinishReason::kStop);
    } else {
      EXPECT_EQ(r.tokens, fake_greedy(prompts[i], kVocab, 20, {kEos})) << i;
    }
  }
  EXPECT_GT(n_full, 0) << "no answer reached the grammar's end (the no-sampling stop)";
  EXPECT_EQ(h.rec("cancelled").finish.reason, FinishReason::kCancelled);
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

TEST(Scheduler, ConstrainedDeadStateIsAnErrorAndFreesTheBlocks) {
  auto vocab = letter_vocab();
  auto g = grammar::parse_gbnf("root ::= \"ab\" \"#\"");  // no token spells '#'
  ASSERT_TRUE(g.ok());
  Harness h;
  ASSERT_TRUE(h.add("d", {5, 6, 7}, 20, [&](SeqRequest* r) {
                 r->matcher = std::make_unique<grammar::Matcher>(*g, vocab);
               }).ok());
  h.run_all();
  EXPECT_EQ(h.rec("d").events.back(), "error");
  EXPECT_EQ(h.rec("d").error.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.rec("d").tokens, (std::vector<int32_t>{2, 3}));  // "a", "b"
  EXPECT_EQ(h.rec("d").n_final, 1);
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

// Resume (an engine restarted mid-answer): the prompt + the first k generated tokens with
// resumed = k gives the uninterrupted run's remaining tokens, greedy and sampled with a seed
// (the RNG skips k draws), with a repetition penalty over them, under a constraint, and with a
// chunk shorter than what is prefilled; usage counts the resumed tokens as completion tokens.
TEST(Scheduler, AResumedSequenceContinuesAsTheUninterruptedOne) {
  auto vocab = letter_vocab();
  auto g = grammar::parse_gbnf("root ::= [a-f]+");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  struct Case {
    const char* name;
    float temperature;
    float repetition_penalty;
    int top_k;
    bool constrained;
  };
  const Case cases[] = {{"greedy", 0.0f, 1.0f, 0, false},
                        {"sampled", 1.0f, 1.0f, 0, false},
                        {"sampled+penalty+top_k", 0.9f, 1.3f, 12, false},
                        {"sampled+constraint", 1.0f, 1.0f, 0, true}};
  std::mt19937 rng(17);
  constexpr int kMax = 30;
  for (const Case& c : cases) {
    const auto prompt = random_prompt(&rng, 9);
    auto edit = [&](SeqRequest* r) {
      r->sampling.temperature = c.temperature;
      r->sampling.repetition_penalty = c.repetition_penalty;
      r->sampling.top_k = c.top_k;
      r->sampling.seed = 4242;
      if (c.constrained) r->matcher = std::make_unique<grammar::Matcher>(*g, vocab);
    };
    Harness full;
    full.model.set_never({kEos});  // runs to max_tokens
    ASSERT_TRUE(full.add("full", prompt, kMax, edit).ok());
    full.run_all();
    const std::vector<int32_t> all = full.rec("full").tokens;
    ASSERT_EQ(all.size(), static_cast<size_t>(kMax)) << c.name;
    if (c.temperature > 0) {  // sampling really happened: another seed gives another answer
      Harness other;
      other.model.set_never({kEos});
      ASSERT_TRUE(other
                      .add("other", prompt, kMax,
                           [&](SeqRequest* r) {
                             edit(r);
                             r->sampling.seed = 4243;
                           })
                      .ok());
      other.run_all();
      EXPECT_NE(other.rec("other").tokens, all) << c.name;
    }
    for (int k : {1, 6, kMax - 1, kMax}) {
      Options opt;
      opt.prefill_chunk = 5;  // the prompt and the resumed tokens take several steps
      Harness h(opt);
      h.model.set_never({kEos});
      std::vector<int32_t> p = prompt;
      p.insert(p.end(), all.begin(), all.begin() + k);
      ASSERT_TRUE(h.add("r", p, kMax, [&](SeqRequest* r) {
                     edit(r);
                     r->resumed = k;
                   }).ok());
      h.run_all();
      const Record& r = h.rec("r");
      EXPECT_EQ(r.tokens, std::vector<int32_t>(all.begin() + k, all.end())) << c.name << " k=" << k;
      EXPECT_EQ(r.finish.reason, FinishReason::kLength);
      EXPECT_EQ(r.finish.usage.completion_tokens, kMax);
      EXPECT_EQ(r.finish.usage.prompt_tokens, static_cast<int>(prompt.size()));
      EXPECT_EQ(r.start.prompt_tokens, static_cast<int>(prompt.size()));
      EXPECT_EQ(h.cache.allocator().n_used(), 0);
    }
  }
  // Refused without a callback: more resumed tokens than max_tokens, or than the prompt holds.
  Harness h;
  EXPECT_EQ(h.add("over", {5, 6, 7, 8}, 2, [](SeqRequest* r) { r->resumed = 3; }).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.add("all", {5, 6, 7}, 8, [](SeqRequest* r) { r->resumed = 3; }).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_TRUE(h.rec("over").events.empty());
  // A constraint that refuses the resumed tokens.
  EXPECT_EQ(h.add("bad", {5, 6, 0}, 8,
                  [&](SeqRequest* r) {
                    r->matcher = std::make_unique<grammar::Matcher>(*g, vocab);
                    r->resumed = 1;  // token 0 is not a letter of [a-f]
                  })
                .code(),
            ErrorCode::kInvalidArgument);
}

TEST(Scheduler, ForkedChoicesEqualSingleRequestsWithTheirSeedsAndThePromptRunsOnce) {
  auto vocab = letter_vocab();
  auto g = grammar::parse_gbnf("root ::= [a-f]+");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  constexpr int kMax = 12;
  constexpr int kChoices = 3;
  std::mt19937 rng(29);
  // 9: the prompt ends inside a block (copied); 12: on a block boundary (nothing to copy).
  for (int n_prompt : {9, 12}) {
    for (bool constrained : {false, true}) {
      const auto prompt = random_prompt(&rng, n_prompt);
      auto sampling = [&](int i) {
        generation::SamplingParams p;
        p.temperature = 1.0f;
        p.top_p = 1.0f;
        p.repetition_penalty = 1.2f;
        p.seed = 900 + i;
        p.max_tokens = kMax;
        return p;
      };
      auto matcher = [&]() -> std::unique_ptr<grammar::Matcher> {
        return constrained ? std::make_unique<grammar::Matcher>(*g, vocab) : nullptr;
      };
      // Each choice alone, with its seed.
      std::vector<std::vector<int32_t>> alone;
      std::vector<int64_t> alone_run;
      for (int i = 0; i < kChoices; ++i) {
        Harness one;
        one.model.set_never({kEos});
        ASSERT_TRUE(one.add("one", prompt, kMax,
                            [&](SeqRequest* r) {
                              r->sampling = sampling(i);
                              r->matcher = matcher();
                            })
                        .ok());
        one.run_all();
        alone.push_back(one.rec("one").tokens);
        alone_run.push_back(one.model.n_tokens_run());
      }
      EXPECT_NE(alone[0], alone[1]);  // the seeds matter
      // Together: one request with two forks, batched with an unrelated request, the prompt
      // over several steps.
      Options opt;
      opt.prefill_chunk = 5;
      Harness h(opt);
      h.model.set_never({kEos});
      ASSERT_TRUE(h.add("other", random_prompt(&rng, 7), kMax).ok());
      ASSERT_TRUE(h.add("n", prompt, kMax, [&](SeqRequest* r) {
                     r->sampling = sampling(0);
                     r->matcher = matcher();
                     for (int i = 1; i < kChoices; ++i) h.fork(r, sampling(i), matcher());
                   }).ok());
      h.run_all();
      const std::string what =
          "prompt " + std::to_string(n_prompt) + (constrained ? " constrained" : "");
      for (int i = 0; i < kChoices; ++i) {
        const std::string id = i == 0 ? "n" : "n#" + std::to_string(i);
        const Record& r = h.rec(id);
        EXPECT_EQ(r.tokens, alone[i]) << what << " choice " << i;
        EXPECT_EQ(r.events, (std::vector<std::string>{"queued", "start", "finish"})) << id;
        EXPECT_EQ(r.finish.reason, FinishReason::kLength);
        EXPECT_EQ(r.finish.usage.completion_tokens, kMax);
      }
      // The prompt ran once: one choice's work plus two choices' decode steps (and the other
      // request's), not three prompts.
      const int64_t other_run = 7 + (kMax - 1);
      EXPECT_EQ(h.model.n_tokens_run(), alone_run[0] + (kChoices - 1) * (kMax - 1) + other_run)
          << what;
      EXPECT_EQ(h.sched.stats().prompt_tokens_total, n_prompt + 7);
      EXPECT_EQ(h.cache.allocator().n_used(), 0);
      EXPECT_EQ(h.cache.allocator().n_reserved(), 0);
    }
  }
}

TEST(Scheduler, ForkedChoicesEndTogetherWhenCancelledInAnyState) {
  Options opt;
  opt.prefill_chunk = 4;
  opt.max_batch = 4;
  std::mt19937 rng(31);
  // Cancelled after this many steps: 0 = queued, 1 = prefilling (forks not started yet),
  // 6 = decoding.
  for (int steps : {0, 1, 6}) {
    Harness h(opt);
    h.model.set_never({kEos});
    ASSERT_TRUE(h.add("n", random_prompt(&rng, 10), 20, [&](SeqRequest* r) {
                   generation::SamplingParams p;
                   p.temperature = 0.0f;
                   h.fork(r, p);
                   h.fork(r, p);
                 }).ok());
    for (int i = 0; i < steps; ++i) h.sched.step();
    h.sched.cancel("n");
    EXPECT_TRUE(h.sched.idle()) << steps;
    for (const char* id : {"n", "n#1", "n#2"}) {
      const Record& r = h.rec(id);
      EXPECT_EQ(r.n_final, 1) << id << " after " << steps;
      EXPECT_EQ(r.finish.reason, FinishReason::kCancelled) << id;
      if (steps == 6) {
        EXPECT_FALSE(r.tokens.empty()) << id;
      }
    }
    EXPECT_EQ(h.cache.allocator().n_used(), 0) << steps;
    EXPECT_EQ(h.cache.allocator().n_reserved(), 0) << steps;
  }
  // Waiting for batch room: a request with two forks needs three slots at once.
  Harness h(opt);
  h.model.set_never({kEos});
  ASSERT_TRUE(h.add("a", random_prompt(&rng, 5), 8).ok());
  ASSERT_TRUE(h.add("b", random_prompt(&rng, 5), 8).ok());
  ASSERT_TRUE(h.add("n", random_prompt(&rng, 5), 8, [&](SeqRequest* r) {
                 h.fork(r, r->sampling);
                 h.fork(r, r->sampling);
               }).ok());
  h.sched.step();
  EXPECT_EQ(h.sched.n_running(), 2);  // 2 + 3 > 4
  h.run_all();
  for (const char* id : {"n", "n#1", "n#2"}) EXPECT_EQ(h.rec(id).tokens.size(), 8u) << id;
  // Refused without callbacks: forks with resumed tokens, more choices than a batch.
  EXPECT_EQ(h.add("r", {5, 6, 7, 8}, 4,
                  [&](SeqRequest* r) {
                    r->resumed = 1;
                    h.fork(r, r->sampling);
                  })
                .code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(h.add("w", {5, 6}, 4,
                  [&](SeqRequest* r) {
                    for (int i = 0; i < 4; ++i) h.fork(r, r->sampling);
                  })
                .code(),
            ErrorCode::kInvalidArgument);
  EXPECT_TRUE(h.rec("w").events.empty());
  EXPECT_TRUE(h.rec("w#1").events.empty());
}

// A batch's samplers on the model's host threads (Model::host_threads) give the tokens of the
// serial loop: the same seeded tokens, log-probabilities and ends, with constrained, forked and
// greedy requests among the sampled ones (ThreadSanitizer runs this too).
TEST(Scheduler, SamplersOnTheModelsHostThreadsGiveTheSerialLoopsTokens) {
  auto vocab = letter_vocab();
  auto g = grammar::parse_gbnf("root ::= [a-c]{3,6}");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::mt19937 rng(41);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 10; ++i) prompts.push_back(random_prompt(&rng, 1 + rng() % 20));
  auto run = [&](int threads) {
    Options opt;
    opt.max_batch = 8;
    opt.prefill_chunk = 16;
    auto h = std::make_unique<Harness>(opt);
    if (threads > 0) h->model.set_host_threads(threads);
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(h->add("r" + std::to_string(i), prompts[i], 24, [&](SeqRequest* r) {
                     r->sampling.temperature = i == 9 ? 0.0f : 0.9f;
                     r->sampling.top_p = i % 2 == 0 ? 0.9f : 1.0f;
                     r->sampling.seed = 100 + i;
                     if (i % 3 == 0) r->sampling.top_logprobs = 2;
                     if (i == 4) r->matcher = std::make_unique<grammar::Matcher>(*g, vocab);
                     if (i == 5) {
                       generation::SamplingParams other = r->sampling;
                       other.seed = 7;
                       h->fork(r, other);
                     }
                   }).ok());
    }
    h->run_all();
    return h;
  };
  const std::unique_ptr<Harness> serial = run(0);
  const std::unique_ptr<Harness> threaded = run(4);
  EXPECT_EQ(serial->model.n_host_threads_lent(), 0);
  EXPECT_GT(threaded->model.n_host_threads_lent(), 10);  // batches of several, many steps
  ASSERT_EQ(serial->records.size(), 11u);
  for (const auto& [id, rec] : serial->records) {
    const Record& got = threaded->rec(id);
    EXPECT_FALSE(rec->tokens.empty()) << id;
    EXPECT_EQ(got.tokens, rec->tokens) << id;
    EXPECT_EQ(got.logprobs, rec->logprobs) << id;
    EXPECT_EQ(got.finish.reason, rec->finish.reason) << id;
    EXPECT_EQ(got.events, rec->events) << id;
  }
  EXPECT_EQ(serial->rec("r0").logprobs.size(), serial->rec("r0").tokens.size());
  EXPECT_GE(serial->rec("r4").tokens.size(), 3u);  // the constrained one ran its grammar
  EXPECT_EQ(threaded->cache.allocator().n_used(), 0);
}

// A finished sequence's sampler is restarted for the next one (its buffers' memory kept), and a
// written prompt's row is kept after its first token is out: requests one after another in one
// scheduler give what each gives in a scheduler of its own, with and without penalties, and a
// prompt that comes again starts from the row kept for it with the same tokens.
TEST(Scheduler, RestartedSamplersAndKeptRowsGiveWhatNewOnesGive) {
  std::mt19937 rng(57);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(random_prompt(&rng, 3 + rng() % 20));
  prompts.push_back(prompts[1]);  // again, whole: its first token from the kept row
  auto edit = [](int i) {
    const int k = i == 6 ? 1 : i;  // the repeat samples as its first time
    return [k](SeqRequest* r) {
      r->sampling.temperature = k == 3 ? 0.0f : 1.0f;
      r->sampling.top_p = 0.95f;
      r->sampling.seed = 100 + k;
      if (k % 2 == 1) {
        r->sampling.repetition_penalty = 1.4f;
        r->sampling.frequency_penalty = 0.3f;
      }
    };
  };
  std::vector<std::vector<int32_t>> alone;
  for (int i = 0; i < 7; ++i) {
    Harness h;
    ASSERT_TRUE(h.add("x", prompts[i], 20, edit(i)).ok());
    h.run_all();
    alone.push_back(h.rec("x").tokens);
    ASSERT_FALSE(alone.back().empty()) << i;
  }
  EXPECT_EQ(alone[6], alone[1]);
  Harness h;
  for (int i = 0; i < 7; ++i) {
    const std::string id = "r" + std::to_string(i);
    const int64_t forwards = h.model.n_forward();
    ASSERT_TRUE(h.add(id, prompts[i], 20, edit(i)).ok());
    h.run_all();
    EXPECT_EQ(h.rec(id).tokens, alone[i]) << id;
    if (i == 6) {  // the repeat's first token needs no forward pass: one for each token after it
      const bool stopped = h.rec(id).finish.reason == FinishReason::kStop;
      EXPECT_EQ(h.model.n_forward() - forwards,
                static_cast<int64_t>(alone[i].size()) - (stopped ? 0 : 1));
    }
  }
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
}

TEST(Scheduler, NoKvBlockLeaksAfterAThousandMixedRequests) {
  Options opt;
  opt.max_batch = 5;
  opt.prefill_chunk = 16;
  opt.n_ctx = 256;
  Harness h(opt, 48, 4);  // small: admission waits and conversations get evicted
  std::mt19937 rng(1234);
  const std::vector<int32_t> system = random_prompt(&rng, 9);
  int next = 0, added = 0, cancelled = 0;
  std::vector<std::string> live;
  while (next < 1000 || !h.sched.idle()) {
    const int action = rng() % 10;
    if (next < 1000 && action < 4) {
      auto p = system;
      auto body = random_prompt(&rng, 1 + rng() % 30);
      p.insert(p.end(), body.begin(), body.end());
      const std::string id = "r" + std::to_string(next++);
      const int conv = rng() % 6;
      Status s = h.add(id, p, 1 + rng() % 24, [&](SeqRequest* r) {
        if (rng() % 2) {
          r->conversation = "c" + std::to_string(conv);
          r->history_tag = rng() % 3;
          r->tail = random_prompt(&rng, 1 + rng() % 5);
        }
        if (rng() % 3 == 0) {
          r->sampling.temperature = 0.9f;
          r->sampling.top_p = 1.0f;
          r->sampling.seed = 5;
        }
        for (int k = rng() % 5 == 0 ? 1 + rng() % 2 : 0; k > 0; --k) h.fork(r, r->sampling);
      });
      ASSERT_TRUE(s.ok()) << s.to_string();
      h.rec(id).save = rng() % 2;
      h.rec(id).tag = rng() % 3;
      live.push_back(id);
      ++added;
    } else if (action == 4 && !live.empty()) {
      h.sched.cancel(live[rng() % live.size()]);
      ++cancelled;
    } else {
      h.sched.step();
    }
    ASSERT_GE(h.cache.allocator().n_available(), 0);
  }
  int finished = 0, errors = 0;
  for (const auto& [id, rec] : h.records) {
    EXPECT_EQ(rec->n_final, 1) << id;
    finished += rec->events.back() == "finish";
    errors += rec->events.back() == "error";
  }
  EXPECT_EQ(added, 1000);
  EXPECT_GT(static_cast<int>(h.records.size()), 1000);  // forks too
  EXPECT_EQ(finished, static_cast<int>(h.records.size()));
  EXPECT_EQ(errors, 0);
  EXPECT_GT(h.sched.stats().cached_tokens_total, 0);
  h.cache.clear_conversations();
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
  EXPECT_EQ(h.cache.allocator().n_reserved(), 0);
  EXPECT_EQ(h.cache.allocator().n_free(), 48);
}

}  // namespace
}  // namespace glm::scheduler
