// The scheduler tests' harness: a scheduler over a FakeModel with its own KV cache, each
// request's events as its observer saw them (Record), random prompts, and a letter vocabulary
// for constrained decoding with its masked greedy continuation computed apart from the grammar
// engine. Header-only, test use only; not thread-safe (the scheduler loop's thread).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "grammar/vocab.h"
#include "scheduler/fake_model.h"
#include "scheduler/scheduler.h"

namespace glm::scheduler {

// What one request saw, in order.
struct Record {
  std::vector<std::string> events;  // "queued", "start", "finish", "error"
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // each token's own log-probability, where they were asked for
  int queued_position = -1;
  StartInfo start;
  FinishInfo finish;
  Status error;
  int n_final = 0;
  int start_order = -1;
  std::vector<std::pair<int, int>> prefill;  // on_prefill's (prefilled, to_prefill), in order
  // Behaviour knobs.
  int stop_after = -1;  // on_token returns false after this many tokens
  bool save = false;    // save the conversation under `tag`
  uint64_t tag = 0;
};

class Recorder : public SeqObserver {
 public:
  Recorder(Record* r, int* start_counter) : r_(r), start_counter_(start_counter) {}
  void on_queued(int position) override {
    r_->events.push_back("queued");
    r_->queued_position = position;
  }
  void on_start(const StartInfo& info) override {
    r_->events.push_back("start");
    r_->start = info;
    r_->start_order = (*start_counter_)++;
  }
  void on_prefill(int prefilled, int to_prefill) override {
    r_->prefill.emplace_back(prefilled, to_prefill);
  }
  bool on_token(int32_t token, const generation::GeneratedLogprobs* logprobs) override {
    r_->tokens.push_back(token);
    if (logprobs != nullptr) r_->logprobs.push_back(logprobs->chosen.logprob);
    return r_->stop_after < 0 || static_cast<int>(r_->tokens.size()) < r_->stop_after;
  }
  void on_finish(FinishInfo* info) override {
    r_->events.push_back("finish");
    ++r_->n_final;
    info->save_conversation = r_->save;
    info->conversation_tag = r_->tag;
    r_->finish = *info;
  }
  void on_error(const Status& status) override {
    r_->events.push_back("error");
    ++r_->n_final;
    r_->error = status;
  }

 private:
  Record* r_;
  int* start_counter_;
};

// A scheduler over a FakeModel with its own cache, plus bookkeeping of the requests' records.
struct Harness {
  explicit Harness(Options opt = {}, int n_blocks = 256, int block_tokens = 4)
      : model(testing::kVocab, block_tokens),
        cache(n_blocks, block_tokens),
        sched(&model, nullptr, &cache, opt) {}

  Status add(const std::string& id, std::vector<int32_t> prompt, int max_tokens,
             const std::function<void(SeqRequest*)>& edit = nullptr) {
    SeqRequest r;
    r.id = id;
    r.prompt = std::move(prompt);
    r.sampling.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.stop_ids = {testing::kEos};
    auto& rec = records[id];
    rec = std::make_unique<Record>();
    r.observer = std::make_unique<Recorder>(rec.get(), &start_counter);
    if (edit) edit(&r);
    return sched.add(std::move(r));
  }
  // Adds a fork (another choice) to *r, recorded as "ID#k".
  void fork(SeqRequest* r, generation::SamplingParams sampling,
            std::unique_ptr<grammar::Matcher> matcher = nullptr) {
    auto& rec = records[r->id + "#" + std::to_string(r->forks.size() + 1)];
    rec = std::make_unique<Record>();
    SeqRequest::Fork f;
    f.sampling = sampling;
    f.matcher = std::move(matcher);
    f.observer = std::make_unique<Recorder>(rec.get(), &start_counter);
    r->forks.push_back(std::move(f));
  }
  void run_all(int max_steps = 100000) {
    for (int i = 0; i < max_steps && !sched.idle(); ++i) sched.step();
    ASSERT_TRUE(sched.idle());
  }
  Record& rec(const std::string& id) { return *records.at(id); }

  testing::FakeModel model;
  kv::KvCache cache;
  Scheduler sched;
  int start_counter = 0;
  std::map<std::string, std::unique_ptr<Record>> records;
};

inline std::vector<int32_t> random_prompt(std::mt19937* rng, int n) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(2 + (*rng)() % (testing::kVocab - 2));
  return p;
}

// Constrained decoding: token v >= 2 spells one character of kChars; 1 (EOS) is the stop id,
// 0 a control token. The grammar root ::= [a-c]{3,6} allows a, b, c and EOS after 3 letters.
inline const std::string kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

inline std::shared_ptr<const grammar::TokenVocab> letter_vocab() {
  std::vector<std::string> tokens(testing::kVocab);
  for (int v = 2; v < testing::kVocab; ++v) tokens[v] = std::string(1, kChars[v - 2]);
  return grammar::TokenVocab::create(tokens, {testing::kEos}, {0}).value();
}

// The masked greedy continuation, computed independently of the grammar engine.
inline std::vector<int32_t> masked_greedy(std::vector<int32_t> context) {
  std::vector<int32_t> out;
  std::vector<float> logits(testing::kVocab);
  for (;;) {
    const bool can_stop = out.size() >= 3, must_stop = out.size() == 6;
    if (must_stop) return out;  // complete, and nothing else allowed: ends without sampling
    testing::FakeModel::logits_for(context, testing::kVocab, logits.data());
    int32_t best = -1;
    for (int32_t v = 0; v < testing::kVocab; ++v) {
      const bool allowed = (v >= 2 && kChars[v - 2] >= 'a' && kChars[v - 2] <= 'c') ||
                           (v == testing::kEos && can_stop);
      if (allowed && (best < 0 || logits[v] > logits[best])) best = v;
    }
    if (best == testing::kEos) return out;
    out.push_back(best);
    context.push_back(best);
  }
}

}  // namespace glm::scheduler
