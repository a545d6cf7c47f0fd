// EchoEngine: a model-free engine::Engine that streams a scripted reply one UTF-8 character per
// token, with controllable delays, a bounded queue, a batch limit, cancellation and drain. It
// tests the daemon, the gateway and `glmserve serve` without a model (`glmserve engine --echo`),
// the way mlc-llm tests its server with a mock echo engine. It never pretends to be a model:
// health reports model "echo".
//
// Reply: EchoOptions::reply if set, else the content of the last message (or the raw prompt).
// A last message starting with "__fail__" ends with an internal error after the first token
// (to test one request's failure). Prompt "tokens" are bytes; tokenize() returns the bytes.
// A generated token's id is its character's index in the reply; resume skips that many.
// Thread-safety: as engine::Engine. Sinks run on the engine's own loop thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/reasoning.h"
#include "tokenizer/tool_call_stream.h"

namespace glm::testing {

struct EchoOptions {
  std::string reply;         // empty: echo the last message
  int token_delay_ms = 0;    // between tokens of one step
  int prefill_delay_ms = 0;  // before a request's first token
  int max_queue = 64;        // waiting requests; more are refused with kQueueFull
  int max_running = 8;       // requests streamed together
  int n_ctx = 4096;
  // kThink: a chat reply that starts with <think> goes out as reasoning, then text, as the
  // engine splits a reasoning model's answer (the echo engine has no template: kAuto = kNone).
  tok::ReasoningFormat reasoning = tok::ReasoningFormat::kAuto;
};

class EchoEngine : public engine::Engine {
 public:
  explicit EchoEngine(const EchoOptions& options);
  ~EchoEngine() override;

  Status submit(engine::Request request, engine::EventSink sink) override;
  void cancel(const std::string& id) override;
  engine::Stats stats() const override;
  engine::Health health() const override;
  std::vector<int32_t> tokenize(const std::string& text) const override;
  // Bytes back to text; the prompt is the messages' contents, each followed by '\n' (the raw
  // prompt as it is), as bytes: as many "tokens" as submit counts.
  std::string detokenize(const std::vector<int32_t>& ids, bool render_special) const override;
  StatusOr<std::vector<int32_t>> prompt_tokens(engine::Request request) const override;
  int n_ctx() const override { return options_.n_ctx; }
  std::string model_name() const override { return "echo"; }
  bool drain(std::chrono::milliseconds bound) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Job {
    engine::Request request;
    engine::EventSink sink;
    std::vector<std::string> chars;  // the reply, one UTF-8 character each
    size_t next = 0;
    int prompt_tokens = 0;
    int cached_tokens = 0;
    bool queued_sent = false;
    bool cancelled = false;
    std::unique_ptr<tok::ReasoningSplitter> reasoning;  // null: all text
    // With tools: the reply read for a call, as the engine reads its answers (Event::tool).
    std::unique_ptr<tok::ToolCallStream> tools;
    Clock::time_point submitted, started, first_token, last_token;
  };

  void loop();
  // One step: admit waiting jobs, emit one token per running job, retire finished ones.
  // Called with mu_ held; releases it around sink calls.
  void step(std::unique_lock<std::mutex>& lock);
  void finish(Job& job, engine::FinishReason reason, std::unique_lock<std::mutex>& lock);

  const EchoOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // work arrived, cancel, drain, stop
  std::condition_variable idle_cv_;  // queue and running became empty
  std::deque<std::unique_ptr<Job>> waiting_;
  std::vector<std::unique_ptr<Job>> running_;
  std::set<std::string> in_flight_;
  // Admitted and not finished: running_ plus the jobs the step loop holds outside it while a
  // sink runs with the lock released (what stats() reports as running).
  int admitted_ = 0;
  std::set<std::string> cancel_ids_;  // cancelled, not yet finished
  std::map<std::string, int> conversation_tokens_;
  engine::Stats stats_;
  engine::Health health_ = engine::Health::kReady;
  bool stop_ = false;
  // Set when a drain bound passed or the engine is destroyed: every job ends cancelled,
  // including those the step loop holds outside waiting_/running_ while the lock is released.
  bool cancel_all_ = false;
  std::thread thread_;
};

}  // namespace glm::testing
