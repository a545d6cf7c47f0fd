// A prompt that comes again whole (kv::PromptLogits, Options::prompt_logits_bytes): its first
// token from the logits kept when it last ran, its K/V from the prefix cache, no forward pass
// before its first token; and everything after as if it had run.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "scheduler/fake_model.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_test_util.h"

namespace glm::scheduler {
namespace {

using generation::FinishReason;

TEST(WholePrompt, AgainStartsWithNoForwardPassAndAnswersAsTheFirstTime) {
  std::mt19937 rng(7);
  // 9 and 10 tokens: the last block partly written (copied at admission); 12: on a boundary.
  for (int n_prompt : {9, 10, 12, 1}) {
    Harness h;
    const auto prompt = random_prompt(&rng, n_prompt);
    const auto want = testing::fake_greedy(prompt, testing::kVocab, 20, {testing::kEos});
    ASSERT_TRUE(h.add("first", prompt, 20).ok());
    h.run_all();
    const int64_t run_first = h.model.n_tokens_run();
    EXPECT_EQ(h.rec("first").tokens, want) << n_prompt;
    ASSERT_TRUE(h.add("again", prompt, 20).ok());
    const int64_t run_before = h.model.n_tokens_run();
    h.sched.step();  // admission: its first token, with no forward pass
    ASSERT_FALSE(h.rec("again").tokens.empty()) << n_prompt;
    EXPECT_EQ(h.rec("again").tokens[0], want[0]);
    h.run_all();
    const Record& r = h.rec("again");
    EXPECT_EQ(r.tokens, want) << n_prompt;
    EXPECT_EQ(r.start.cached_tokens, n_prompt);
    EXPECT_EQ(r.finish.usage.cached_tokens, n_prompt);
    EXPECT_EQ(r.finish.usage.prompt_tokens, n_prompt);
    // Only its decode steps ran, as many as the first time's; none of the prompt.
    EXPECT_EQ(h.model.n_tokens_run() - run_before, run_first - n_prompt) << n_prompt;
    EXPECT_EQ(h.sched.stats().whole_prompts_total, 1);
    EXPECT_EQ(h.cache.allocator().n_reserved(), 0);
  }
}

// Forks (n > 1 choices) and a constrained choice, sampled with their seeds: each choice as the
// first time, the prompt run by neither the parent nor its forks.
TEST(WholePrompt, ForksAndConstrainedChoicesAnswerAsTheFirstTime) {
  auto vocab = letter_vocab();
  auto g = grammar::parse_gbnf("root ::= [a-f]+");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::mt19937 rng(13);
  for (int n_prompt : {9, 12}) {
    Harness h;
    h.model.set_never({testing::kEos});
    const auto prompt = random_prompt(&rng, n_prompt);
    auto sampling = [](int i) {
      generation::SamplingParams p;
      p.temperature = 1.0f;
      p.repetition_penalty = 1.2f;
      p.seed = 500 + i;
      p.max_tokens = 10;
      return p;
    };
    auto add = [&](const std::string& id) {
      return h.add(id, prompt, 10, [&](SeqRequest* r) {
        r->sampling = sampling(0);
        h.fork(r, sampling(1));
        h.fork(r, sampling(2), std::make_unique<grammar::Matcher>(*g, vocab));
      });
    };
    ASSERT_TRUE(add("a").ok());
    h.run_all();
    const int64_t run_first = h.model.n_tokens_run();
    ASSERT_TRUE(add("b").ok());
    h.run_all();
    for (const char* suffix : {"", "#1", "#2"}) {
      const Record& first = h.rec(std::string("a") + suffix);
      const Record& again = h.rec(std::string("b") + suffix);
      EXPECT_EQ(again.tokens, first.tokens) << n_prompt << suffix;
      EXPECT_EQ(again.tokens.size(), 10u) << n_prompt << suffix;
      EXPECT_EQ(again.start.cached_tokens, n_prompt);
    }
    for (int32_t t : h.rec("b#2").tokens) EXPECT_TRUE(t >= 2 && t < 8) << t;  // a..f
    EXPECT_EQ(h.model.n_tokens_run(), 2 * run_first - n_prompt) << n_prompt;
    EXPECT_EQ(h.cache.allocator().n_used(), 0);
    EXPECT_EQ(h.cache.allocator().n_reserved(), 0);
  }
}

// Another adapter's K/V and logits are never taken (the prompt runs), nor a prompt whose logits
// were not kept: evicted (a budget of one row), or none kept at all (0 bytes).
TEST(WholePrompt, OnlyTheSameAdaptersKeptLogitsAreTaken) {
  std::mt19937 rng(17);
  const auto p1 = random_prompt(&rng, 10), p2 = random_prompt(&rng, 10);
  struct Case {
    size_t bytes;
    bool p1_again_whole;
  };
  const size_t one_row = testing::kVocab * sizeof(float) + 10 * sizeof(int32_t);
  for (const Case c : {Case{size_t{1} << 20, true}, Case{one_row, false}, Case{0, false}}) {
    Options opt;
    opt.prompt_logits_bytes = c.bytes;
    Harness h(opt);
    ASSERT_TRUE(h.add("p1", p1, 5).ok());
    h.run_all();
    ASSERT_TRUE(h.add("p2", p2, 5).ok());  // with a one-row budget, p1's row goes
    h.run_all();
    int64_t before = h.model.n_tokens_run();
    ASSERT_TRUE(h.add("p1 adapter", p1, 5, [](SeqRequest* r) { r->adapter_salt = 99; }).ok());
    h.run_all();
    EXPECT_EQ(h.rec("p1 adapter").start.cached_tokens, 0);  // nothing shared across adapters
    EXPECT_GE(h.model.n_tokens_run() - before, 10);
    before = h.model.n_tokens_run();
    ASSERT_TRUE(h.add("p1 again", p1, 5).ok());
    h.run_all();
    EXPECT_EQ(h.rec("p1 again").tokens, h.rec("p1").tokens) << c.bytes;
    EXPECT_EQ(h.rec("p1 again").start.cached_tokens, c.p1_again_whole ? 10 : 9) << c.bytes;
    EXPECT_EQ(h.sched.stats().whole_prompts_total, c.p1_again_whole ? 1 : 0) << c.bytes;
    EXPECT_EQ(h.model.n_tokens_run() - before,
              static_cast<int64_t>(h.rec("p1").tokens.size()) - 1 + (c.p1_again_whole ? 0 : 1))
        << c.bytes;
    EXPECT_EQ(h.cache.allocator().n_reserved(), 0);
  }
}

// A kept row whose first token ends the answer (a stop id, or max_tokens 1) ends it at
// admission, its blocks freed; the next request goes on.
TEST(WholePrompt, AnAnswerThatEndsAtItsFirstTokenEndsAtAdmission) {
  std::mt19937 rng(19);
  std::vector<int32_t> stops_at_once;
  for (int i = 0; i < 5000 && stops_at_once.empty(); ++i) {
    auto p = random_prompt(&rng, 6);
    if (testing::fake_greedy(p, testing::kVocab, 4, {testing::kEos}).empty()) stops_at_once = p;
  }
  ASSERT_FALSE(stops_at_once.empty()) << "no prompt whose greedy first token is the stop id";
  const auto other = random_prompt(&rng, 7);
  Harness h;
  ASSERT_TRUE(h.add("a", stops_at_once, 4).ok());
  ASSERT_TRUE(h.add("o", other, 1).ok());
  h.run_all();
  ASSERT_TRUE(h.rec("a").tokens.empty());
  ASSERT_EQ(h.rec("o").tokens.size(), 1u);
  const int64_t before = h.model.n_tokens_run();
  ASSERT_TRUE(h.add("a again", stops_at_once, 4).ok());
  ASSERT_TRUE(h.add("o again", other, 1).ok());
  ASSERT_TRUE(h.add("next", random_prompt(&rng, 5), 3).ok());
  h.sched.step();
  EXPECT_EQ(h.rec("a again").finish.reason, FinishReason::kStop);
  EXPECT_EQ(h.rec("o again").finish.reason, FinishReason::kLength);
  EXPECT_EQ(h.rec("o again").tokens, h.rec("o").tokens);
  EXPECT_EQ(h.rec("a again").events, (std::vector<std::string>{"queued", "start", "finish"}));
  h.run_all();
  EXPECT_EQ(h.model.n_tokens_run() - before,
            5 + static_cast<int64_t>(h.rec("next").tokens.size()) -
                (h.rec("next").finish.reason == FinishReason::kLength ? 1 : 0));
  EXPECT_EQ(h.cache.allocator().n_used(), 0);
  EXPECT_EQ(h.cache.allocator().n_reserved(), 0);
}

}  // namespace
}  // namespace glm::scheduler
