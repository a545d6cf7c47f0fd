// Speculative decoding (Options::spec = kNgram) over real model files: stories260K (a tiny
// trained llama whose stories repeat their own phrases; ../shared/data/models) and
// chatglm3-small (ChatGLM3's vocabulary and template, random weights): greedy text identical
// with and without it, alone and batched, and the done event counts drafted and accepted
// tokens. With a draft model (kDraft, --draft): stories260K and chatglm3-small as their own
// drafts, the same checks, and a draft of another vocabulary refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/test_util.h"

namespace glm::engine {
namespace {

using testing::kChatglm3;
using testing::kStories;
using testing::Results;

std::unique_ptr<Engine> load(const std::string& path, generation::SpecMode spec, int max_batch,
                             const std::string& draft = "") {
  Options o;
  o.draft_path = draft;
  o.model_path = path;
  o.n_threads = 2;
  o.n_ctx = 512;
  o.max_batch = max_batch;
  o.prefill_chunk = 32;
  o.max_stall_ms = 0;  // exactly that many per step
  o.spec = spec;
  auto e = load_engine(o);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e.value()) : nullptr;
}

Request raw_greedy(const std::string& id, const std::string& prompt, int n) {
  Request r;
  r.id = id;
  r.raw = true;
  r.prompt = prompt;
  r.params.temperature = 0.0f;
  r.params.max_tokens = n;
  return r;
}

// Runs the requests together on one engine; returns each one's text and done event.
std::map<std::string, std::pair<std::string, Event>> run(Engine* e, std::vector<Request> reqs) {
  Results c;
  std::vector<std::string> ids;
  for (Request& r : reqs) {
    ids.push_back(r.id);
    const Status st = e->submit(std::move(r), c.sink());
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  std::map<std::string, std::pair<std::string, Event>> out;
  for (const std::string& id : ids) {
    EXPECT_TRUE(c.wait(id)) << id;
    std::lock_guard<std::mutex> lock(c.mu);
    out[id] = {c.text[id], c.done[id]};
    EXPECT_EQ(c.done[id].type, EventType::kDone) << c.done[id].error.to_string();
  }
  return out;
}

// A story that quotes itself: stories260K continues it by copying.
const char* kCopyPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big red ball. Once upon a time, there was a little girl named";

TEST(SpecReal, StoriesGreedyTextIsIdenticalAndDraftsAreAccepted) {
  if (access(kStories.c_str(), R_OK) != 0) GTEST_SKIP() << kStories << " is absent";
  const std::vector<std::string> prompts = {kCopyPrompt, "Once upon a time",
                                            "Tom and Sue went to the park. Tom and Sue"};
  std::map<generation::SpecMode, std::map<std::string, std::pair<std::string, Event>>> got;
  for (generation::SpecMode mode : {generation::SpecMode::kOff, generation::SpecMode::kNgram}) {
    auto e = load(kStories, mode, 4);
    ASSERT_NE(e, nullptr);
    // Alone, then batched.
    std::vector<Request> together;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string id = "p" + std::to_string(i);
      auto alone = run(e.get(), {raw_greedy(id, prompts[i], 120)});
      got[mode][id] = alone[id];
      together.push_back(raw_greedy("b" + std::to_string(i), prompts[i], 120));
    }
    for (auto& [id, r] : run(e.get(), std::move(together))) got[mode][id] = r;
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (const char* kind : {"p", "b"}) {
      const std::string id = kind + std::to_string(i);
      EXPECT_EQ(got[generation::SpecMode::kNgram][id].first,
                got[generation::SpecMode::kOff][id].first)
          << id;
      EXPECT_EQ(got[generation::SpecMode::kOff][id].second.speculation, generation::Speculation{});
    }
    EXPECT_EQ(got[generation::SpecMode::kOff]["p" + std::to_string(i)].first,
              got[generation::SpecMode::kOff]["b" + std::to_string(i)].first);
  }
  const generation::Speculation s = got[generation::SpecMode::kNgram]["p0"].second.speculation;
  EXPECT_GT(s.drafted, 0);
  EXPECT_GT(s.accepted, 0);
  EXPECT_LE(s.accepted, s.drafted);
  std::printf("stories260K copy prompt: drafted %lld, accepted %lld\n",
              static_cast<long long>(s.drafted), static_cast<long long>(s.accepted));
}

TEST(SpecReal, Chatglm3GreedyChatIsIdenticalAndAFixedSeedRepeats) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  auto chat = [](const std::string& id, const std::string& text, float temp) {
    Request r;
    r.id = id;
    r.messages = {{"user", text}};
    r.params.temperature = temp;
    r.params.seed = 42;
    r.params.max_tokens = 60;
    return r;
  };
  const std::vector<std::string> texts = {
      "Repeat after me: the quick brown fox jumps over the lazy dog", "hello",
      "1 2 3 4 5 6 7 8 9 10 11 12"};
  std::map<generation::SpecMode, std::map<std::string, std::string>> text;
  for (generation::SpecMode mode : {generation::SpecMode::kOff, generation::SpecMode::kNgram}) {
    auto e = load(kChatglm3, mode, 4);
    ASSERT_NE(e, nullptr);
    std::vector<Request> reqs;
    for (size_t i = 0; i < texts.size(); ++i)
      reqs.push_back(chat("g" + std::to_string(i), texts[i], 0));
    for (auto& [id, r] : run(e.get(), std::move(reqs))) text[mode][id] = r.first;
    if (mode == generation::SpecMode::kNgram) {  // sampled: the same seed, the same text
      auto a = run(e.get(), {chat("s1", texts[0], 0.9f)});
      auto b = run(e.get(), {chat("s2", texts[0], 0.9f)});
      EXPECT_EQ(a["s1"].first, b["s2"].first);
      EXPECT_FALSE(a["s1"].first.empty());
    }
  }
  EXPECT_EQ(text[generation::SpecMode::kNgram], text[generation::SpecMode::kOff]);
}

// n > 1 choices: each drafts for itself; greedy choices equal the single answer, and the final
// done sums the choices' counts.
TEST(SpecReal, ChoicesDraftEachForItselfAndTheDoneSumsThem) {
  if (access(kStories.c_str(), R_OK) != 0) GTEST_SKIP() << kStories << " is absent";
  auto e = load(kStories, generation::SpecMode::kNgram, 4);
  ASSERT_NE(e, nullptr);
  const std::string single = run(e.get(), {raw_greedy("one", kCopyPrompt, 100)})["one"].first;
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::string> text;
  generation::Speculation choices;
  Event done;
  bool ended = false;
  Request r = raw_greedy("three", kCopyPrompt, 100);
  r.n = 3;
  ASSERT_TRUE(e->submit(std::move(r), [&](const Event& ev) {
                 std::lock_guard<std::mutex> lock(mu);
                 if (ev.type == EventType::kToken) text[ev.index] += ev.text;
                 if (ev.type == EventType::kChoiceDone) {
                   choices.drafted += ev.speculation.drafted;
                   choices.accepted += ev.speculation.accepted;
                 }
                 if (ev.type == EventType::kDone || ev.type == EventType::kError) {
                   done = ev;
                   ended = true;
                   cv.notify_all();
                 }
               }).ok());
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(300), [&] { return ended; }));
  ASSERT_EQ(done.type, EventType::kDone);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(text[i], single) << i;
  EXPECT_GT(choices.accepted, 0);
  EXPECT_EQ(done.speculation, choices);
}

// A draft model: stories260K drafting for itself. Greedy text identical to no speculation,
// alone and batched, and nearly every draft accepted (the same weights; the draft's one-token
// passes and the target's verify chunks may round differently, so not asserted to be all).
TEST(SpecReal, StoriesAsItsOwnDraftModelGreedyTextIsIdentical) {
  if (access(kStories.c_str(), R_OK) != 0) GTEST_SKIP() << kStories << " is absent";
  const std::vector<std::string> prompts = {kCopyPrompt, "Once upon a time",
                                            "Tom and Sue went to the park. Tom and Sue",
                                            "The cat sat on the mat. It was", "Lily"};
  std::map<generation::SpecMode, std::map<std::string, std::pair<std::string, Event>>> got;
  for (generation::SpecMode mode : {generation::SpecMode::kOff, generation::SpecMode::kDraft}) {
    auto e = load(kStories, mode, 4, mode == generation::SpecMode::kDraft ? kStories : "");
    ASSERT_NE(e, nullptr);
    std::vector<Request> together;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string id = "p" + std::to_string(i);
      auto alone = run(e.get(), {raw_greedy(id, prompts[i], 100)});
      got[mode][id] = alone[id];
      together.push_back(raw_greedy("b" + std::to_string(i), prompts[i], 100));
    }
    for (auto& [id, r] : run(e.get(), std::move(together))) got[mode][id] = r;
  }
  generation::Speculation sum;
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (const char* kind : {"p", "b"}) {
      const std::string id = kind + std::to_string(i);
      EXPECT_EQ(got[generation::SpecMode::kDraft][id].first,
                got[generation::SpecMode::kOff][id].first)
          << id;
      const generation::Speculation& s = got[generation::SpecMode::kDraft][id].second.speculation;
      sum.drafted += s.drafted;
      sum.accepted += s.accepted;
    }
  }
  EXPECT_GT(sum.drafted, 500);
  EXPECT_GT(sum.accepted, sum.drafted * 9 / 10);
  EXPECT_LE(sum.accepted, sum.drafted);
  std::printf("stories260K drafting for itself: drafted %lld, accepted %lld\n",
              static_cast<long long>(sum.drafted), static_cast<long long>(sum.accepted));
}

// chatglm3-small drafting for itself through the chat path: greedy chat identical, and a fixed
// seed repeats its sampled answer.
TEST(SpecReal, Chatglm3DraftModelGreedyChatIsIdenticalAndAFixedSeedRepeats) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  auto chat = [](const std::string& id, const std::string& text, float temp) {
    Request r;
    r.id = id;
    r.messages = {{"user", text}};
    r.params.temperature = temp;
    r.params.seed = 42;
    r.params.max_tokens = 40;
    return r;
  };
  const std::vector<std::string> texts = {
      "Repeat after me: the quick brown fox jumps over the lazy dog", "hello"};
  std::map<generation::SpecMode, std::map<std::string, std::string>> text;
  for (generation::SpecMode mode : {generation::SpecMode::kOff, generation::SpecMode::kDraft}) {
    auto e = load(kChatglm3, mode, 4, mode == generation::SpecMode::kDraft ? kChatglm3 : "");
    ASSERT_NE(e, nullptr);
    std::vector<Request> reqs;
    for (size_t i = 0; i < texts.size(); ++i)
      reqs.push_back(chat("g" + std::to_string(i), texts[i], 0));
    for (auto& [id, r] : run(e.get(), std::move(reqs))) {
      text[mode][id] = r.first;
      if (mode == generation::SpecMode::kDraft) {
        EXPECT_GT(r.second.speculation.accepted, 0) << id;
      }
    }
    if (mode == generation::SpecMode::kDraft) {  // sampled: the same seed, the same text
      auto a = run(e.get(), {chat("s1", texts[0], 0.9f)});
      auto b = run(e.get(), {chat("s2", texts[0], 0.9f)});
      EXPECT_EQ(a["s1"].first, b["s2"].first);
      EXPECT_FALSE(a["s1"].first.empty());
      EXPECT_GT(a["s1"].second.speculation.drafted, 0);
    }
  }
  EXPECT_EQ(text[generation::SpecMode::kDraft], text[generation::SpecMode::kOff]);
}

TEST(SpecReal, ADraftModelOfAnotherVocabularyIsRefusedWithBothSizes) {
  if (access(kStories.c_str(), R_OK) != 0 || access(kChatglm3.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "a model file is absent";
  }
  Options o;
  o.model_path = kChatglm3;
  o.n_ctx = 256;
  o.spec = generation::SpecMode::kDraft;
  o.draft_path = kStories;
  auto e = load_engine(o);
  ASSERT_FALSE(e.ok());
  const std::string m = e.status().message();
  EXPECT_NE(m.find("--draft"), std::string::npos) << m;
  EXPECT_NE(m.find("4096"), std::string::npos) << m;  // chatglm3-small: a 4096-token vocabulary
  EXPECT_NE(m.find("512"), std::string::npos) << m;
}

TEST(SpecReal, SpecDraftWithoutADraftModelAndADraftWithoutSpecDraftAreRefused) {
  Options o;
  o.model_path = kStories;
  o.spec = generation::SpecMode::kDraft;
  auto e = load_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--draft M.gguf"), std::string::npos);
  o.spec = generation::SpecMode::kNgram;
  o.draft_path = kStories;
  e = load_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--draft is for --spec draft"), std::string::npos);
  o.spec = generation::SpecMode::kDraft;
  o.draft_path = "/nonexistent/draft.gguf";
  e = load_engine(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--draft"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace glm::engine
