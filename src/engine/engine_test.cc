// Engine tests over the fake model, tokenizer and template: events, text, batching, cancellation,
// queue limits, context policy, conversation reuse, drain. No timed assertions: waits have a
// generous bound only so that a bug fails instead of hanging.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/utf8.h"
#include "engine/fake_parts.h"
#include "engine/prompt.h"
#include "engine/test_util.h"
#include "scheduler/fake_model.h"

namespace glm::engine {
namespace {

using glm::testing::fake_greedy;
using glm::testing::FakeModel;
using glm::testing::FakeTemplate;
using glm::testing::FakeTokenizer;
using glm::testing::kVocab;
using testing::EventLog;
using testing::greedy;

const std::vector<int32_t> kStops = {1, 2};

struct EngineSetup {
  Options options;
  std::vector<int32_t> never;
  int64_t delay_us = 0;
};

std::unique_ptr<Engine> make_engine(const EngineSetup& s) {
  auto model = std::make_unique<FakeModel>(kVocab, s.options.block_tokens);
  model->set_never(s.never);
  model->set_delay(std::chrono::microseconds(s.delay_us));
  auto tok = std::make_unique<FakeTokenizer>();
  auto tmpl = std::make_unique<FakeTemplate>(*tok);
  return create_engine(std::move(model), std::move(tok), std::move(tmpl), s.options);
}

tok::Message user(std::string s) { return tok::Message{"user", std::move(s)}; }
tok::Message assistant(std::string s) { return tok::Message{"assistant", std::move(s)}; }

// What the engine must stream for these messages: the fake model's greedy ids, as text.
std::vector<int32_t> expected_ids(const std::vector<tok::Message>& m, int max_tokens,
                                  const std::vector<int32_t>& never = {}) {
  FakeTokenizer tok;
  FakeTemplate tmpl(tok);
  return fake_greedy(tmpl.render(m).value(), kVocab, max_tokens, kStops, never);
}
std::string text_of(const std::vector<int32_t>& ids) {
  FakeTokenizer tok;
  tok::StreamDecoder d(tok);
  std::string s;
  for (int32_t id : ids) s += d.push(id);
  return s + d.flush();
}

void wait_idle(Engine* e) {
  for (int i = 0; i < 6000; ++i) {
    const Stats s = e->stats();
    if (s.running == 0 && s.queued == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(Engine, StreamsTheModelsGreedyTextWithEventsInOrder) {
  auto e = make_engine({});
  EventLog c;
  const std::vector<tok::Message> m = {user("hello there")};
  ASSERT_TRUE(e->submit(greedy("a", m), c.sink()).ok());
  ASSERT_TRUE(c.wait("a"));
  const auto ids = expected_ids(m, 40);
  EXPECT_EQ(c.text("a"), text_of(ids));
  const auto ev = c.of("a");
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[0].type, EventType::kQueued);
  EXPECT_EQ(ev[1].type, EventType::kStart);
  EXPECT_EQ(ev.back().type, EventType::kDone);
  int finals = 0;
  for (const Event& x : ev) finals += EventLog::final(x);
  EXPECT_EQ(finals, 1);
  const Event& done = ev.back();
  EXPECT_EQ(done.finish_reason, ids.size() == 40 ? FinishReason::kLength : FinishReason::kStop);
  EXPECT_EQ(done.usage.completion_tokens, static_cast<int>(ids.size()));
  FakeTokenizer tok;
  EXPECT_EQ(ev[1].usage.prompt_tokens, static_cast<int>(FakeTemplate(tok).render(m)->size()));
  EXPECT_GE(done.timings.ttft_ms, done.timings.queue_ms);
  EXPECT_GE(done.timings.total_ms, done.timings.ttft_ms);
  EXPECT_EQ(e->health(), Health::kReady);
}

TEST(Engine, BatchedOutputIsIdenticalToEachRequestAloneAndTextIsWholeCharacters) {
  EngineSetup s;
  s.options.max_batch = 4;
  s.options.prefill_chunk = 5;
  s.options.max_stall_ms = 0;  // exactly that many per step
  auto e = make_engine(s);
  EventLog c;
  std::vector<std::vector<tok::Message>> prompts;
  std::mt19937 rng(17);
  const std::string alphabet = "abcdefghij klmn0123456789\xE4\xBD\xA0!";
  for (int i = 0; i < 12; ++i) {
    std::string t;
    const int n = 1 + rng() % 50;
    for (int j = 0; j < n; ++j) t += alphabet[rng() % alphabet.size()];
    prompts.push_back({user(t)});
  }
  prompts.push_back(prompts[3]);  // identical prompts share cached blocks
  // Submit from several threads at once.
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] {
      ASSERT_TRUE(e->submit(greedy("r" + std::to_string(i), prompts[i], 60), c.sink()).ok());
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = "r" + std::to_string(i);
    ASSERT_TRUE(c.wait(id));
    EXPECT_EQ(c.text(id), text_of(expected_ids(prompts[i], 60))) << id;
    for (const Event& x : c.of(id)) {
      if (x.type == EventType::kToken) {
        EXPECT_FALSE(x.text.empty());
        EXPECT_TRUE(utf8_valid(x.text)) << id;
      }
    }
  }
  wait_idle(e.get());
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  EXPECT_EQ(e->stats().requests_total, static_cast<int64_t>(prompts.size()));
}

TEST(Engine, StopStringEndsTheTextRightBeforeIt) {
  EngineSetup s;
  s.never = kStops;
  auto e = make_engine(s);
  EventLog c;
  const std::vector<tok::Message> m = {user("stop strings")};
  const std::string full = text_of(expected_ids(m, 80, kStops));
  ASSERT_GT(full.size(), 20u);
  const std::string stop = full.substr(full.size() / 2, 3);
  Request r = greedy("a", m, 80);
  r.params.stop = {"never-there", stop};
  ASSERT_TRUE(e->submit(r, c.sink()).ok());
  ASSERT_TRUE(c.wait("a"));
  EXPECT_EQ(c.text("a"), full.substr(0, full.find(stop)));
  EXPECT_EQ(c.of("a").back().finish_reason, FinishReason::kStop);
}

TEST(Engine, CancelWhileQueuedPrefillingAndDecoding) {
  EngineSetup s;
  s.options.max_batch = 1;
  s.options.prefill_chunk = 1;  // a long prompt takes many steps
  s.options.max_stall_ms = 0;   // exactly that many per step
  s.never = kStops;
  s.delay_us = 2000;
  auto e = make_engine(s);
  EventLog c;
  // "decoding" runs alone (batch of 1); "prefilling" and "queued" wait behind it.
  ASSERT_TRUE(e->submit(greedy("decoding", {user("ab")}, 3000), c.sink()).ok());
  ASSERT_TRUE(c.wait_for_type("decoding", EventType::kToken));
  ASSERT_TRUE(e->submit(greedy("queued", {user("cd")}, 10), c.sink()).ok());
  ASSERT_TRUE(c.wait_for_type("queued", EventType::kQueued));
  e->cancel("queued");
  ASSERT_TRUE(c.wait("queued"));
  EXPECT_EQ(c.of("queued").back().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(c.first("queued", EventType::kStart).type, EventType::kToken);  // never started

  e->cancel("decoding");
  ASSERT_TRUE(c.wait("decoding"));
  EXPECT_EQ(c.of("decoding").back().finish_reason, FinishReason::kCancelled);
  EXPECT_GT(c.of("decoding").back().usage.completion_tokens, 0);

  ASSERT_TRUE(e->submit(greedy("prefilling", {user(std::string(300, 'x'))}, 10), c.sink()).ok());
  ASSERT_TRUE(c.wait_for_type("prefilling", EventType::kStart));
  e->cancel("prefilling");
  ASSERT_TRUE(c.wait("prefilling"));
  EXPECT_EQ(c.of("prefilling").back().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(c.text("prefilling"), "");
  wait_idle(e.get());
  EXPECT_EQ(e->stats().kv_blocks_used, 0);
  e->cancel("unknown");  // ignored
}

TEST(Engine, QueueFullIsRefusedWithARetryHint) {
  EngineSetup s;
  s.options.max_batch = 1;
  s.options.max_queue = 2;
  s.never = kStops;
  s.delay_us = 1000;
  auto e = make_engine(s);
  EventLog c;
  ASSERT_TRUE(e->submit(greedy("run", {user("a")}, 3000), c.sink()).ok());
  ASSERT_TRUE(c.wait_for_type("run", EventType::kStart));
  ASSERT_TRUE(e->submit(greedy("q1", {user("b")}, 5), c.sink()).ok());
  ASSERT_TRUE(e->submit(greedy("q2", {user("c")}, 5), c.sink()).ok());
  const Status full = e->submit(greedy("q3", {user("d")}, 5), c.sink());
  EXPECT_EQ(full.code(), ErrorCode::kQueueFull);
  EXPECT_NE(full.message().find("retry"), std::string::npos) << full.message();
  EXPECT_TRUE(c.of("q3").empty());
  // Duplicate ids and bad parameters are refused too.
  EXPECT_EQ(e->submit(greedy("q1", {user("b")}, 5), c.sink()).code(), ErrorCode::kInvalidArgument);
  Request bad = greedy("bad", {user("b")});
  bad.params.top_p = 0.0f;
  EXPECT_EQ(e->submit(bad, c.sink()).code(), ErrorCode::kInvalidArgument);
  e->cancel("run");
  ASSERT_TRUE(c.wait("q2"));
  EXPECT_EQ(c.of("q1").back().type, EventType::kDone);
}

TEST(Engine, ContextPolicyDropsOldestTurnsKeepsTheSystemPromptAndNotifies) {
  EngineSetup s;
  s.options.n_ctx = 64;
  auto e = make_engine(s);
  EventLog c;
  const std::vector<tok::Message> m = {{"system", "be brief"},          user(std::string(20, 'a')),
                                       assistant(std::string(20, 'b')), user(std::string(10, 'c')),
                                       assistant(std::string(5, 'd')),  user("now")};
  ASSERT_TRUE(e->submit(greedy("t", m, 20), c.sink()).ok());
  ASSERT_TRUE(c.wait("t"));
  const Event notice = c.first("t", EventType::kNotice);
  ASSERT_EQ(notice.type, EventType::kNotice);
  // 1 + 8 + 21 + 21 + 11 + 6 + 4 + 1 = 73 > 64 - 20: the first turn (2 messages) must go; then
  // 1 + 8 + 11 + 6 + 4 + 1 = 31 + 20 fits.
  EXPECT_EQ(notice.dropped_messages, 2);
  EXPECT_NE(notice.message.find("2"), std::string::npos);
  const std::vector<tok::Message> kept = {m[0], m[3], m[4], m[5]};
  FakeTokenizer tok;
  EXPECT_EQ(c.first("t", EventType::kStart).usage.prompt_tokens,
            static_cast<int>(FakeTemplate(tok).render(kept)->size()));
  EXPECT_EQ(c.text("t"), text_of(expected_ids(kept, 20)));

  const Status st = e->submit(greedy("big", {user(std::string(70, 'z'))}, 5), c.sink());
  EXPECT_EQ(st.code(), ErrorCode::kContextOverflow);
  EXPECT_NE(st.message().find("context is 64"), std::string::npos) << st.message();
  // Words for the client, about the request: no engine flag (that hint goes to the log).
  EXPECT_EQ(st.message().find("--"), std::string::npos) << st.message();
}

TEST(Engine, NextTurnReusesTheCacheOfEveryPreviousTurn) {
  auto e = make_engine({});
  EventLog c;
  std::vector<tok::Message> m = {{"system", "sys"}, user("first question")};
  FakeTokenizer tok;
  FakeTemplate tmpl(tok);
  std::vector<int32_t> context = tmpl.render(m).value();  // the ACTUAL tokens so far
  int expect_cached = 0;
  for (int turn = 0; turn < 4; ++turn) {
    const std::string id = "turn" + std::to_string(turn);
    Request r = greedy(id, m, 30);
    r.conversation = "conv";
    ASSERT_TRUE(e->submit(r, c.sink()).ok());
    ASSERT_TRUE(c.wait(id));
    const Event start = c.first(id, EventType::kStart);
    const Event done = c.of(id).back();
    ASSERT_EQ(done.type, EventType::kDone);
    if (turn > 0) {
      EXPECT_EQ(start.usage.cached_tokens, expect_cached) << id;
    }
    EXPECT_EQ(start.usage.prompt_tokens, static_cast<int>(context.size())) << id;
    // What the model gives for the actual token history.
    const auto gen = fake_greedy(context, kVocab, 30, kStops);
    EXPECT_EQ(c.text(id), text_of(gen)) << id;
    // Next turn: everything fed so far is cached (a length finish leaves the last token unfed).
    context.insert(context.end(), gen.begin(), gen.end());
    expect_cached =
        static_cast<int>(context.size()) - (done.finish_reason == FinishReason::kLength ? 1 : 0);
    m.push_back(assistant(c.text(id)));
    m.push_back(user("question " + std::to_string(turn + 2)));
    auto tail = tmpl.render({m.end()[-1]}).value();  // <|user|> text <|assistant|>
    context.insert(context.end(), tail.begin(), tail.end());
  }
  // An edited history cannot continue the saved tokens: the prompt is rendered from text.
  m[2] = assistant("something else");
  Request r = greedy("edited", m, 5);
  r.conversation = "conv";
  ASSERT_TRUE(e->submit(r, c.sink()).ok());
  ASSERT_TRUE(c.wait("edited"));
  EXPECT_EQ(c.first("edited", EventType::kStart).usage.prompt_tokens,
            static_cast<int>(tmpl.render(m)->size()));
  EXPECT_EQ(c.text("edited"), text_of(expected_ids(m, 5)));
  EXPECT_GT(e->stats().cached_tokens_total, 0);
}

TEST(Engine, NoKvBlockLeaksAfterAThousandRequestsWithConcurrentCancels) {
  EngineSetup s;
  s.options.max_batch = 4;
  s.options.max_queue = 2000;
  s.options.n_ctx = 256;
  s.options.kv_blocks = 40;  // tight: admission has to wait
  s.options.prefill_chunk = 16;
  s.options.max_stall_ms = 0;  // exactly that many per step
  auto e = make_engine(s);
  EventLog c;
  std::mt19937 rng(99);
  std::vector<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string t;
    const int n = 1 + rng() % 60;
    for (int j = 0; j < n; ++j) t += static_cast<char>('a' + rng() % 8);
    Request r = greedy("r" + std::to_string(i), {user(t)}, 1 + rng() % 40);
    if (rng() % 3 == 0) r.params.temperature = 0.8f;
    ASSERT_TRUE(e->submit(r, c.sink()).ok());
    ids.push_back(r.id);
    if (rng() % 4 == 0) e->cancel(ids[rng() % ids.size()]);
  }
  std::thread canceller([&] {
    std::mt19937 r2(5);
    for (int i = 0; i < 300; ++i) e->cancel(ids[r2() % ids.size()]);
  });
  canceller.join();
  for (const std::string& id : ids) {
    ASSERT_TRUE(c.wait(id)) << id;
    int finals = 0;
    for (const Event& x : c.of(id)) finals += EventLog::final(x);
    EXPECT_EQ(finals, 1) << id;
  }
  wait_idle(e.get());
  const Stats st = e->stats();
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_free, 40);
  EXPECT_EQ(st.requests_total, 1000);
}

TEST(Engine, DrainFinishesOrCancelsWithinTheBoundThenRefuses) {
  EngineSetup s;
  s.never = kStops;
  s.delay_us = 1000;
  auto e = make_engine(s);
  EventLog c;
  ASSERT_TRUE(e->submit(greedy("long", {user("x")}, 3000), c.sink()).ok());
  ASSERT_TRUE(e->submit(greedy("short", {user("y")}, 1), c.sink()).ok());
  ASSERT_TRUE(c.wait_for_type("long", EventType::kToken));
  EXPECT_FALSE(e->drain(std::chrono::milliseconds(50)));
  EXPECT_EQ(e->health(), Health::kStopped);
  EXPECT_EQ(c.of("long").back().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(c.of("short").back().type, EventType::kDone);
  EXPECT_EQ(e->submit(greedy("late", {user("z")}), c.sink()).code(), ErrorCode::kUnavailable);

  auto idle = make_engine({});
  EXPECT_TRUE(idle->drain(std::chrono::milliseconds(1000)));
}

TEST(Engine, RawPromptSkipsTheTemplate) {
  auto e = make_engine({});
  EventLog c;
  Request r;
  r.id = "raw";
  r.raw = true;
  r.prompt = "once upon";
  r.params.temperature = 0.0f;
  r.params.max_tokens = 20;
  ASSERT_TRUE(e->submit(r, c.sink()).ok());
  ASSERT_TRUE(c.wait("raw"));
  FakeTokenizer tok;
  EXPECT_EQ(c.text("raw"), text_of(fake_greedy(tok.encode("once upon"), kVocab, 20, kStops)));
  EXPECT_EQ(e->tokenize("once upon"), tok.encode("once upon"));
}

// Resume: token events carry the ids of their text; the same request with the ids of its first
// j events continues with exactly the text that followed them (the decoder's split characters
// and the stop strings' held-back text replayed, the sampler's draws skipped).
TEST(Engine, AResumeAfterAnyTokenEventGoesOnWithTheSameText) {
  EngineSetup s;
  s.never = kStops;  // to max_tokens, unless a stop string matches
  auto e = make_engine(s);
  int n = 0;
  for (const float temperature : {0.0f, 1.0f}) {
    for (const char* prompt : {"hello there", "\xE4\xBD\xA0 split bytes"}) {
      Request r = greedy("full" + std::to_string(n), {user(prompt)}, 60);
      r.params.temperature = temperature;
      r.params.seed = 77;
      r.params.stop = {"ab", "k l"};  // text that might start one is held back
      EventLog c;
      ASSERT_TRUE(e->submit(r, c.sink()).ok());
      ASSERT_TRUE(c.wait(r.id));
      std::vector<Event> tokens;
      for (const Event& x : c.of(r.id)) {
        if (x.type == EventType::kToken) tokens.push_back(x);
      }
      const Event done = c.of(r.id).back();
      ASSERT_EQ(done.type, EventType::kDone);
      ASSERT_GT(tokens.size(), 4u);
      std::vector<int32_t> all_ids;
      for (const Event& x : tokens) {
        EXPECT_FALSE(x.tokens.empty()) << "a token event without its ids";
        all_ids.insert(all_ids.end(), x.tokens.begin(), x.tokens.end());
      }
      // The ids in order; those of trailing tokens without text (a control token, a stop
      // string) come with no event, as there is no text left to send.
      EXPECT_LE(static_cast<int>(all_ids.size()), done.usage.completion_tokens);
      if (temperature == 0) {
        const auto want = expected_ids({user(prompt)}, 60, kStops);
        ASSERT_LE(all_ids.size(), want.size());
        EXPECT_EQ(all_ids, std::vector<int32_t>(want.begin(), want.begin() + all_ids.size()));
        if (done.finish_reason == FinishReason::kLength) {
          EXPECT_GE(all_ids.size() + 2, want.size());
        }
      }
      const std::string full = c.text(r.id);
      for (size_t j : {size_t{1}, tokens.size() / 2, tokens.size() - 1}) {
        Request again = r;
        again.id = "resumed" + std::to_string(n++);
        std::string sent;
        for (size_t i = 0; i < j; ++i) {
          again.resume.insert(again.resume.end(), tokens[i].tokens.begin(), tokens[i].tokens.end());
          sent += tokens[i].text;
        }
        EventLog c2;
        ASSERT_TRUE(e->submit(again, c2.sink()).ok());
        ASSERT_TRUE(c2.wait(again.id));
        const Event d2 = c2.of(again.id).back();
        EXPECT_EQ(sent + c2.text(again.id), full) << prompt << " t=" << temperature << " j=" << j;
        EXPECT_EQ(d2.finish_reason, done.finish_reason);
        EXPECT_EQ(d2.usage.completion_tokens, done.usage.completion_tokens);
        EXPECT_EQ(d2.usage.prompt_tokens, done.usage.prompt_tokens);
      }
    }
  }
  Request too_many = greedy("too-many", {user("x")}, 2);
  too_many.resume = {5, 6, 7};
  EventLog c;
  ASSERT_TRUE(e->submit(too_many, c.sink()).ok());  // refused by the loop: an error event
  ASSERT_TRUE(c.wait("too-many"));
  EXPECT_EQ(c.of("too-many").back().type, EventType::kError);
  EXPECT_EQ(c.of("too-many").back().error.code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(c.of("too-many").back().restart);  // the request's own fault: not resumed
}

// stats() is the loop's snapshot after each step, so the step that sent a done event may not be
// in it yet: waits (bounded) until it shows nothing running or queued.
Stats settled_stats(const Engine& e) {
  Stats s = e.stats();
  for (int i = 0; i < 5000 && (s.running > 0 || s.queued > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = e.stats();
  }
  return s;
}

TEST(Engine, ChoicesEqualSingleRequestsWithTheirSeedsAndShareOnePrefill) {
  EngineSetup s;
  s.never = kStops;  // to max_tokens
  s.options.max_batch = 4;
  auto e = make_engine(s);
  const std::vector<tok::Message> m = {user("a question whose prompt ends inside a block")};
  auto request = [&](const std::string& id, uint64_t seed) {
    Request r = greedy(id, m, 24);
    r.params.temperature = 1.0f;
    r.params.top_p = 1.0f;
    r.params.seed = seed;
    return r;
  };
  std::vector<std::string> alone;
  for (int i = 0; i < 3; ++i) {
    EventLog c;
    const std::string id = "alone" + std::to_string(i);
    ASSERT_TRUE(e->submit(request(id, 500 + i), c.sink()).ok());
    ASSERT_TRUE(c.wait(id));
    alone.push_back(c.text(id));
  }
  EXPECT_NE(alone[0], alone[1]);
  const Stats before = settled_stats(*e);
  Request r = request("n3", 500);
  r.n = 3;
  EventLog c;
  ASSERT_TRUE(e->submit(r, c.sink()).ok());
  ASSERT_TRUE(c.wait("n3"));
  const std::vector<Event> events = c.of("n3");
  std::vector<std::string> text(3);
  std::vector<int> per_choice_tokens(3, 0);
  int n_queued = 0, n_start = 0, n_choice_done = 0;
  for (const Event& x : events) {
    ASSERT_GE(x.index, 0);
    ASSERT_LT(x.index, 3);
    n_queued += x.type == EventType::kQueued;
    n_start += x.type == EventType::kStart;
    if (x.type == EventType::kToken) text[x.index] += x.text;
    if (x.type == EventType::kChoiceDone) {
      ++n_choice_done;
      EXPECT_EQ(x.finish_reason, FinishReason::kLength);
      per_choice_tokens[x.index] = x.usage.completion_tokens;
    }
  }
  EXPECT_EQ(n_queued, 1);
  EXPECT_EQ(n_start, 1);
  EXPECT_EQ(n_choice_done, 3);
  EXPECT_EQ(text, alone);
  const Event done = events.back();
  ASSERT_EQ(done.type, EventType::kDone);
  EXPECT_EQ(done.usage.completion_tokens, 3 * 24);
  EXPECT_EQ(per_choice_tokens, (std::vector<int>{24, 24, 24}));
  const Stats after = settled_stats(*e);
  // The prompt counted (and prefilled) once for the three choices.
  EXPECT_EQ(after.prompt_tokens_total - before.prompt_tokens_total, done.usage.prompt_tokens);
  EXPECT_EQ(after.generated_tokens_total - before.generated_tokens_total, 3 * 24);
  EXPECT_EQ(after.requests_total - before.requests_total, 1);

  // Cancelled: every choice ends, one final event.
  Request slow = request("slow", 9);
  slow.n = 2;
  slow.params.max_tokens = 400;
  EventLog c2;
  ASSERT_TRUE(e->submit(slow, c2.sink()).ok());
  ASSERT_TRUE(c2.wait_for_type("slow", EventType::kToken));
  e->cancel("slow");
  ASSERT_TRUE(c2.wait("slow"));
  EXPECT_EQ(c2.of("slow").back().finish_reason, FinishReason::kCancelled);
  int finals = 0;
  for (const Event& x : c2.of("slow")) finals += EventLog::final(x);
  EXPECT_EQ(finals, 1);

  // Refused at once: more choices than a batch, a resumed request with choices.
  Request wide = request("wide", 1);
  wide.n = 5;
  EXPECT_EQ(e->submit(wide, c.sink()).code(), ErrorCode::kInvalidArgument);
  Request resumed = request("resumed", 1);
  resumed.n = 2;
  resumed.resume = {5};
  EXPECT_EQ(e->submit(resumed, c.sink()).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace glm::engine
