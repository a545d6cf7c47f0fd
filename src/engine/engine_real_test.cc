// The engine over a real model file (../shared/data/reference/chatglm3-small.gguf: ChatGLM3
// architecture, real vocabulary and template, random weights): batching must not change greedy
// output, and a conversation's next turn must reuse every token of the previous ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>

#include "core/json.h"
#include "core/utf8.h"
#include "engine/engine.h"
#include "engine/prompt.h"
#include "engine/test_util.h"
#include "gguf/gguf.h"
#include "model/eval.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tool_call_stream.h"

namespace glm::engine {
namespace {

using testing::greedy;
using testing::kChatglm3;
using testing::Results;

std::unique_ptr<Engine> load(int max_batch, const std::string& kv_disk = "",
                             tok::ReasoningFormat reasoning = tok::ReasoningFormat::kAuto) {
  Options o;
  o.reasoning = reasoning;
  o.kv_disk = kv_disk;
  o.model_path = kChatglm3;
  o.n_threads = 2;
  o.n_ctx = 512;
  o.max_batch = max_batch;
  o.prefill_chunk = 16;
  o.max_stall_ms = 0;  // exactly that many per step
  auto e = load_engine(o);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e.value()) : nullptr;
}

// Three greedy turns of one conversation, each answer and a new user message added: every turn
// after the first must find all the previous ones in the cache (their prompt and the tokens
// fed of their answer). Returns the tokens the last turn fed.
int expect_turns_reuse_everything(Engine& e, std::vector<tok::Message> m,
                                  const std::string& conversation, int max_tokens,
                                  const std::function<std::string(int)>& next_user) {
  Results r;
  int fed = 0;
  for (int turn = 0; turn < 3; ++turn) {
    const std::string id = conversation + std::to_string(turn);
    Request q = greedy(id, m, max_tokens);
    q.conversation = conversation;
    const Status st = e.submit(q, r.sink());
    if (!st.ok() || !r.wait(id) || r.done[id].type != EventType::kDone) {
      ADD_FAILURE() << id << ": " << st.to_string() << " " << r.done[id].error.to_string();
      return fed;
    }
    const Event& d = r.done[id];
    if (turn > 0) {
      EXPECT_EQ(r.start[id].usage.cached_tokens, fed) << id;
    }
    fed = d.usage.prompt_tokens + d.usage.completion_tokens -
          (d.finish_reason == FinishReason::kLength ? 1 : 0);
    m.push_back({"assistant", r.text[id]});
    m.push_back({"user", next_user(turn)});
  }
  return fed;
}

TEST(EngineReal, BatchedGreedyOutputIsIdenticalToEachRequestAlone) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  const std::vector<std::string> prompts = {"hello", "What is the capital of France?",
                                            "写一首关于秋天的诗", "1 2 3 4 5 6 7 8 9 10 11 12"};
  std::vector<std::string> alone;
  {
    auto e = load(1);
    ASSERT_NE(e, nullptr);
    Results r;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string id = "a" + std::to_string(i);
      ASSERT_TRUE(e->submit(greedy(id, {{"user", prompts[i]}}, 12), r.sink()).ok());
      ASSERT_TRUE(r.wait(id));
      alone.push_back(r.text[id]);
    }
  }
  auto e = load(4);
  ASSERT_NE(e, nullptr);
  Results r;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(
        e->submit(greedy("b" + std::to_string(i), {{"user", prompts[i]}}, 12), r.sink()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = "b" + std::to_string(i);
    ASSERT_TRUE(r.wait(id));
    EXPECT_EQ(r.text[id], alone[i]) << "prompt " << i;
    EXPECT_GT(r.done[id].usage.completion_tokens, 0);
  }
}

TEST(EngineReal, NextTurnCachesThePreviousTurnsPromptAndReply) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  auto e = load(2);
  ASSERT_NE(e, nullptr);
  expect_turns_reuse_everything(*e, {{"system", "You are a helpful assistant."}, {"user", "hi"}},
                                "c", 8,
                                [](int turn) { return "and then? " + std::to_string(turn); });
}

// A chat page's "regenerate": the same messages again in the same conversation, whose saved turn
// (with the answer) no longer matches the history. Every prompt token comes from the cache, the
// first token from the logits kept when the prompt last ran (no forward pass before it); the
// greedy answer is the first one, the timings say so, and the next turn still reuses all.
TEST(EngineReal, ARegenerateTakesItsWholePromptFromTheCacheAndAnswersAlike) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  auto e = load(1);
  ASSERT_NE(e, nullptr);
  const std::vector<tok::Message> m = {{"system", "You are a helpful assistant."},
                                       {"user", "Tell me about the sea, in a few words"}};
  Results r;
  for (const char* id : {"first", "regenerate", "again"}) {
    Request q = greedy(id, m, 12);
    q.conversation = "c";
    ASSERT_TRUE(e->submit(q, r.sink()).ok());
    ASSERT_TRUE(r.wait(id));
    ASSERT_EQ(r.done[id].type, EventType::kDone) << r.done[id].error.to_string();
  }
  const int n_prompt = r.done["first"].usage.prompt_tokens;
  EXPECT_EQ(r.start["first"].usage.cached_tokens, 0);
  for (const char* id : {"regenerate", "again"}) {
    EXPECT_EQ(r.text[id], r.text["first"]) << id;
    EXPECT_EQ(r.done[id].usage.prompt_tokens, n_prompt) << id;
    EXPECT_EQ(r.start[id].usage.cached_tokens, n_prompt) << id;
  }
  // The next turn after a regenerate reuses its prompt and answer, as after any turn.
  std::vector<tok::Message> next = m;
  next.push_back({"assistant", r.text["again"]});
  next.push_back({"user", "and the sky?"});
  Request q = greedy("next", next, 4);
  q.conversation = "c";
  ASSERT_TRUE(e->submit(q, r.sink()).ok());
  ASSERT_TRUE(r.wait("next"));
  const Event& again = r.done["again"];
  EXPECT_EQ(r.start["next"].usage.cached_tokens,
            again.usage.prompt_tokens + again.usage.completion_tokens -
                (again.finish_reason == FinishReason::kLength ? 1 : 0));
}

// A turn that calls a tool is sent back by the client as the call (its name and arguments) and
// an observation: the engine tags the saved conversation with that history, so the next turn
// reuses every token (before, the tag was the raw answer text's and the turn fell back to the
// prefix cache). ChatGLM3 writes a Python block the client gets as JSON, and the call is forced
// (a random-weight model would rarely call one by itself).
TEST(EngineReal, TheTurnAfterAToolCallReusesTheCallsTokens) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  auto e = load(1);
  ASSERT_NE(e, nullptr);
  Results r;
  const std::string tools =
      R"([{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object",)"
      R"("properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}}])";
  std::vector<tok::Message> m = {{"user", "What is the weather in Paris?"}};
  Request first = greedy("call", m, 64);
  first.conversation = "agent";
  first.tools = nlohmann::ordered_json::parse(tools);
  first.constraint = {Constraint::Kind::kToolCall, tools};
  // The tools arrive parsed: submitting writes them into the prompt and reads their names
  // without parsing them again; the forced call's constraint is parsed once, to compile it.
  const int64_t parses = json_parses();
  ASSERT_TRUE(e->submit(first, r.sink()).ok());
  EXPECT_EQ(json_parses() - parses, 1);
  ASSERT_TRUE(r.wait("call"));
  const Event& d = r.done["call"];
  ASSERT_EQ(d.type, EventType::kDone) << d.error.to_string();
  ASSERT_EQ(d.finish_reason, FinishReason::kStop);
  const tok::ToolAnswer a = tok::read_tool_answer({"get_weather"}, r.text["call"]);
  ASSERT_EQ(a.calls.size(), 1u) << r.text["call"];
  ASSERT_EQ(a.calls[0].name, "get_weather") << r.text["call"];
  // The events carry the engine's reading of the answer (read once, as it was generated): the
  // same content and call as the whole text read afterwards.
  const tok::ToolAnswer pieces = tok::join_tool_deltas(r.tool["call"]);
  ASSERT_EQ(pieces.calls.size(), 1u);
  EXPECT_EQ(pieces.calls[0].name, a.calls[0].name);
  EXPECT_EQ(pieces.calls[0].arguments, a.calls[0].arguments);
  EXPECT_EQ(pieces.content, a.content);
  // The history as an OpenAI client sends it back: the call, then the tool's result.
  tok::Message call{"assistant", "", "get_weather"};
  call.arguments = a.calls[0].arguments;
  m.push_back(call);
  m.push_back({"observation", R"({"temperature": 21})"});
  Request next = greedy("after", m, 4);
  next.conversation = "agent";
  next.tools = nlohmann::ordered_json::parse(tools);
  ASSERT_TRUE(e->submit(next, r.sink()).ok());
  ASSERT_TRUE(r.wait("after"));
  ASSERT_EQ(r.done["after"].type, EventType::kDone) << r.done["after"].error.to_string();
  // Every token of the first turn is in the cache: its prompt and the whole call.
  EXPECT_EQ(r.start["after"].usage.cached_tokens,
            d.usage.prompt_tokens + d.usage.completion_tokens);
}

// A reasoning answer (a grammar makes the random-weight model write "<think>...</think>..."):
// with --reasoning-format think its thinking comes in the events' reasoning, all of it before
// any text, and the two put back together with their markers are the answer the same model
// writes with none (where the thinking stays in the text). auto splits nothing here: ChatGLM3's
// template is not a reasoning model's.
TEST(EngineReal, AReasoningAnswersThinkingComesApart) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  std::map<tok::ReasoningFormat, Results> results;
  for (tok::ReasoningFormat f :
       {tok::ReasoningFormat::kThink, tok::ReasoningFormat::kNone, tok::ReasoningFormat::kAuto}) {
    auto e = load(1, "", f);
    ASSERT_NE(e, nullptr);
    Request r = greedy("r", {{"user", "2+2?"}}, 64);
    r.constraint = {Constraint::Kind::kGbnf, R"(root ::= "<think>" w " " w "</think>" "\n" w ".")"
                                             "\n"
                                             R"(w ::= [a-z] [a-z]? [a-z]?)"};
    ASSERT_TRUE(e->submit(r, results[f].sink()).ok());
    ASSERT_TRUE(results[f].wait("r"));
    ASSERT_EQ(results[f].done["r"].type, EventType::kDone);
  }
  Results& think = results[tok::ReasoningFormat::kThink];
  const std::string whole = results[tok::ReasoningFormat::kNone].text["r"];
  ASSERT_EQ(whole.rfind("<think>", 0), 0u) << whole;
  EXPECT_FALSE(think.reasoning["r"].empty());
  EXPECT_FALSE(think.text_before_reasoning["r"]);
  EXPECT_EQ("<think>" + think.reasoning["r"] + "</think>\n" + think.text["r"], whole);
  EXPECT_TRUE(results[tok::ReasoningFormat::kNone].reasoning["r"].empty());
  EXPECT_EQ(results[tok::ReasoningFormat::kAuto].text["r"], whole);
}

// A model without a chat template (stories260K: the raw template joins the messages with "\n")
// keeps its turns' tokens too: the next turn runs the tokens it actually generated plus the
// new text, so every token of the previous turn is cached (before, the re-rendered text
// diverged from the generated tokens at the first answer token and nothing was reused).
// Token-granular prefix reuse (kv_cache.h): a prompt shorter than a block, sent again, runs
// only its last token; a prompt that leaves a cached one inside a block reuses the tokens
// before the divergence from a copy of that block. Either way the greedy answer is the one a
// cold engine gives.
TEST(EngineReal, APartialBlockReusedGivesIdenticalGreedyOutput) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  const std::vector<std::string> users = {
      "hi",  // a prompt shorter than one 16-token block
      "Tell me a story about a cat who lives in a small house by the sea, please",
      "Tell me a story about a cat who lives in a big city with many dogs"};
  auto file = gguf::File::open(kChatglm3);
  ASSERT_TRUE(file.ok());
  auto tokenizer = tok::Tokenizer::from_gguf(*file.value());
  ASSERT_TRUE(tokenizer.ok());
  auto tmpl = tok::ChatTemplate::for_model(*file.value(), **tokenizer);
  ASSERT_TRUE(tmpl.ok());
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& u : users) {
    auto plan = plan_chat_prompt(**tmpl, **tokenizer, {{"user", u}}, 8, 512, false);
    ASSERT_TRUE(plan.ok());
    ids.push_back(plan->prompt);
  }
  ASSERT_LT(ids[0].size(), 16u);
  size_t common = 0;  // of the story prompts: they part inside their second block
  while (ids[1][common] == ids[2][common]) ++common;
  ASSERT_GT(common, 16u);
  ASSERT_NE(common % 16, 0u);

  std::vector<std::string> cold;
  for (size_t i = 0; i < users.size(); ++i) {
    auto e = load(1);
    ASSERT_NE(e, nullptr);
    Results r;
    ASSERT_TRUE(e->submit(greedy("cold", {{"user", users[i]}}, 8), r.sink()).ok());
    ASSERT_TRUE(r.wait("cold"));
    ASSERT_EQ(r.start["cold"].usage.cached_tokens, 0);
    cold.push_back(r.text["cold"]);
  }
  auto e = load(1);
  ASSERT_NE(e, nullptr);
  Results r;
  auto run = [&](const std::string& id, size_t i) {
    EXPECT_TRUE(e->submit(greedy(id, {{"user", users[i]}}, 8), r.sink()).ok());
    EXPECT_TRUE(r.wait(id));
    EXPECT_EQ(r.done[id].type, EventType::kDone) << id;
    EXPECT_EQ(r.text[id], cold[i]) << id;
  };
  run("short", 0);
  run("short again", 0);
  // Seen whole before: its K/V all from the cache, its first token from the logits kept.
  EXPECT_EQ(r.start["short again"].usage.cached_tokens, static_cast<int>(ids[0].size()));
  run("story", 1);
  run("other story", 2);
  EXPECT_EQ(r.start["other story"].usage.cached_tokens, static_cast<int>(common));
}

TEST(EngineReal, ARawTemplateModelsNextTurnReusesTheTokensItGenerated) {
  const std::string model = std::string(GLM_SHARED_DATA) + "/models/stories260K.gguf";
  if (access(model.c_str(), R_OK) != 0) GTEST_SKIP() << model << " is absent";
  Options o;
  o.model_path = model;
  o.n_threads = 1;
  o.n_ctx = 256;
  auto e = load_engine(o);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  const int fed = expect_turns_reuse_everything(
      **e, {{"user", "Once upon a time there was a little girl."}}, "story", 24,
      [](int turn) { return "Then she went to the park " + std::to_string(turn) + " times."; });
  EXPECT_GT(fed, 60);
}

// The acceptance of logprobs: at temperature 0 each chosen token is the first alternative, and
// every reported log-probability equals the log-softmax of the logits that `glmserve eval`'s
// procedure (model::evaluate, f16 KV like the server's) computes for the same tokens, although
// the engine prefilled in chunks and batched the request with another.
TEST(EngineReal, LogprobsAreTheModelsLogSoftmaxOfTheSameTokens) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  const std::vector<tok::Message> messages = {{"user",
                                               "What is the capital of France? Answer in "
                                               "one long sentence, please."}};
  auto e = load(2);
  ASSERT_NE(e, nullptr);
  Results r;
  Request req = greedy("lp", messages, 10);
  req.params.top_logprobs = 5;
  ASSERT_TRUE(e->submit(greedy("other", {{"user", "hello"}}, 10), r.sink()).ok());
  ASSERT_TRUE(e->submit(req, r.sink()).ok());
  ASSERT_TRUE(r.wait("lp"));
  ASSERT_TRUE(r.wait("other"));
  ASSERT_EQ(r.done["lp"].type, EventType::kDone);
  const auto& got = r.logprobs["lp"];
  ASSERT_EQ(static_cast<int>(got.size()), r.done["lp"].usage.completion_tokens);
  ASSERT_GE(got.size(), 2u);
  EXPECT_TRUE(r.logprobs["other"].empty());  // not asked for

  auto file = gguf::File::open(kChatglm3);
  ASSERT_TRUE(file.ok());
  std::shared_ptr<const gguf::File> shared(std::move(file.value()));
  auto model = model::load_model(shared, model::LoadOptions{});
  ASSERT_TRUE(model.ok());
  auto tokenizer = tok::Tokenizer::from_gguf(*shared);
  ASSERT_TRUE(tokenizer.ok());
  auto tmpl = tok::ChatTemplate::for_model(*shared, **tokenizer);
  ASSERT_TRUE(tmpl.ok());
  auto plan = plan_chat_prompt(**tmpl, **tokenizer, messages, 10, 512, false);
  ASSERT_TRUE(plan.ok());
  std::vector<int32_t> decode;
  std::string bytes;
  for (size_t i = 0; i + 1 < got.size(); ++i) decode.push_back(got[i].chosen.id);
  for (const auto& g : got) bytes += g.chosen.bytes;
  // The tokens' bytes spell the answer (random weights give stray bytes: U+FFFD in the text).
  EXPECT_EQ(utf8_sanitize(bytes), r.text["lp"]);
  model::EvalOptions eo;
  eo.kv_type = DType::kF16;
  auto rows = model::evaluate(**model, plan->prompt, decode, eo);
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  const size_t first = plan->prompt.size() - 1;  // the row that predicts the first answer token
  ASSERT_EQ(rows->size(), first + got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float>& logits = (*rows)[first + i].values;
    double m = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (float v : logits) z += std::exp(v - m);
    auto log_softmax = [&](int32_t id) { return logits[id] - m - std::log(z); };
    SCOPED_TRACE("token " + std::to_string(i));
    EXPECT_NEAR(got[i].chosen.logprob, log_softmax(got[i].chosen.id), 1e-4);
    ASSERT_EQ(got[i].top.size(), 5u);
    EXPECT_EQ(got[i].top[0].id, got[i].chosen.id);
    for (size_t k = 0; k < got[i].top.size(); ++k) {
      EXPECT_NEAR(got[i].top[k].logprob, log_softmax(got[i].top[k].id), 1e-4);
      if (k > 0) {
        EXPECT_LE(got[i].top[k].logprob, got[i].top[k - 1].logprob);
      }
    }
  }
}

// n > 1 on the real model: the choices continue from one prefill through the KV pool's
// copied partial block and equal single requests with their seeds.
TEST(EngineReal, ChoicesFromOnePrefillEqualSingleRequestsWithTheirSeeds) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  auto e = load(4);
  ASSERT_NE(e, nullptr);
  auto request = [](const std::string& id, uint64_t seed) {
    Request r = greedy(id, {{"user", "Tell me a story about a small robot."}}, 20);
    r.params.temperature = 0.9f;
    r.params.top_p = 0.95f;
    r.params.seed = seed;
    return r;
  };
  Results res;
  std::vector<std::string> alone;
  for (int i = 0; i < 3; ++i) {
    const std::string id = "alone" + std::to_string(i);
    ASSERT_TRUE(e->submit(request(id, 4000 + i), res.sink()).ok());
    ASSERT_TRUE(res.wait(id));
    alone.push_back(res.text[id]);
  }
  EXPECT_NE(alone[0], alone[1]);
  // The prompt's length is not a multiple of the 16-token block: the fork copies a block.
  EXPECT_NE(res.done["alone0"].usage.prompt_tokens % 16, 0);
  const Stats before = e->stats();
  Request r = request("n3", 4000);
  r.n = 3;
  ASSERT_TRUE(e->submit(r, res.sink()).ok());
  ASSERT_TRUE(res.wait("n3"));
  ASSERT_EQ(res.done["n3"].type, EventType::kDone) << res.done["n3"].error.to_string();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(res.choice_text["n3"][i], alone[i]) << "choice " << i;
  EXPECT_EQ(e->stats().prompt_tokens_total - before.prompt_tokens_total,
            res.done["alone0"].usage.prompt_tokens);
}

// The KV disk cache on the real model: after a restart the next turn reuses as many tokens as
// without one, and at temperature 0 its text is the same (K/V restored wrong, or into the
// wrong positions, would change it). Prints the turn's TTFT with and without the disk cache
// (docs/operations.md has figures measured outside tests).
TEST(EngineReal, TheNextTurnAfterARestartReadsTheKvCacheFromDisk) {
  if (access(kChatglm3.c_str(), R_OK) != 0) GTEST_SKIP() << kChatglm3 << " is absent";
  char tmpl[] = "/tmp/glm-real-kvdisk-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::vector<tok::Message> m1 = {
      {"system", "You are a helpful assistant who answers in one short sentence."},
      {"user", "Which planet is the largest in the solar system, and why is it so big?"}};
  Results res;
  auto turn = [&](Engine* e, const std::string& id, const std::vector<tok::Message>& m) {
    Request q = greedy(id, m, 12);
    q.conversation = "c";
    EXPECT_TRUE(e->submit(q, res.sink()).ok());
    EXPECT_TRUE(res.wait(id));
    EXPECT_EQ(res.done[id].type, EventType::kDone) << res.done[id].error.to_string();
  };
  std::vector<tok::Message> m2 = m1;
  {
    auto e = load(1, dir + "/a");
    ASSERT_NE(e, nullptr);
    turn(e.get(), "same1", m1);
    m2.push_back({"assistant", res.text["same1"]});
    m2.push_back({"user", "And the smallest one?"});
    turn(e.get(), "same2", m2);
  }
  {
    auto e = load(1, dir + "/b");
    ASSERT_NE(e, nullptr);
    turn(e.get(), "b1", m1);
    EXPECT_EQ(res.text["b1"], res.text["same1"]);
  }
  auto e = load(1, dir + "/b");  // restarted: memory empty, the disk as the last one left it
  ASSERT_NE(e, nullptr);
  turn(e.get(), "b2", m2);
  const int want = res.start["same2"].usage.cached_tokens;
  EXPECT_GT(want, res.done["same1"].usage.prompt_tokens);
  EXPECT_EQ(res.start["b2"].usage.cached_tokens, want);
  EXPECT_EQ(res.text["b2"], res.text["same2"]);
  auto cold = load(1);  // restarted without a disk cache
  ASSERT_NE(cold, nullptr);
  turn(cold.get(), "cold2", m2);
  EXPECT_LT(res.start["cold2"].usage.cached_tokens, want);
  std::printf(
      "[ kv-disk  ] turn 2 (%d prompt tokens) TTFT: no restart %.1f ms, restart + disk "
      "%.1f ms, restart without disk %.1f ms\n",
      res.done["b2"].usage.prompt_tokens, res.done["same2"].timings.ttft_ms,
      res.done["b2"].timings.ttft_ms, res.done["cold2"].timings.ttft_ms);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace glm::engine
