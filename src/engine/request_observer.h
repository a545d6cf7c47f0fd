// One request's scheduler callbacks as the engine's Events (RequestObserver), and the choices
// of a request with n > 1 as one answer (ChoiceGroup). Used on the engine's loop thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/prompt.h"
#include "engine/stop_text.h"
#include "generation/speculation.h"
#include "scheduler/scheduler.h"
#include "tokenizer/reasoning.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tool_call_stream.h"

namespace glm::engine {

// What the observers tell the engine about its requests (the engine implements it).
class RequestLedger {
 public:
  virtual ~RequestLedger() = default;
  // Once per request, when it leaves the queue (started, or ended before it started).
  virtual void left_queue() = 0;
  // When a request delivered its final event.
  virtual void finished(const std::string& id) = 0;
  // Whether the model can no longer run (a lost GPU: model::Model::health): a request failing
  // then failed with the engine, not by its own fault (Event::restart). From the first true the
  // engine takes no new request (its health says draining), so that a request sent again at
  // once is refused, to be retried on the engine that comes back, rather than taken here.
  virtual bool model_failed() = 0;
};

// The choices of one request with n > 1: each choice's end goes out as kChoiceDone, and one
// final kDone (or kError) when the last has ended.
class ChoiceGroup {
 public:
  ChoiceGroup(RequestLedger* ledger, std::string id, EventSink sink, int n)
      : ledger_(ledger), id_(std::move(id)), sink_(std::move(sink)), left_(n) {}
  const EventSink& sink() const { return sink_; }
  // True once a choice failed: the others stop at their next token.
  bool failed() const { return !error_.ok(); }
  void choice_done(Event done);
  void choice_failed(const Status& status);

 private:
  void end_one();

  RequestLedger* ledger_;
  std::string id_;
  EventSink sink_;
  int left_;
  Usage usage_;
  generation::Speculation speculation_;  // summed over the choices
  Event last_;
  Status error_;
};

// Turns one request's (or one choice's) scheduler callbacks into Events: the text decoded,
// filtered, cut at stop strings, split into reasoning and answer, read for tool calls.
class RequestObserver : public scheduler::SeqObserver {
 public:
  // group: null for a request with one choice; else choice `index` of it (only choice 0 sends
  // the request's queued/notice/start events; its sink is the group's). resume: the tokens a
  // resumed request already generated (their text was sent then).
  RequestObserver(RequestLedger* ledger, std::string id, EventSink sink, const tok::Tokenizer& tok,
                  std::vector<std::string> stops, const PromptPlan& plan, bool chat,
                  const std::vector<int32_t>& resume, std::unique_ptr<tok::AnswerFilter> filter,
                  std::unique_ptr<tok::ReasoningSplitter> reasoning,
                  std::shared_ptr<ChoiceGroup> group = nullptr, int index = 0);

  // When the prompt opens the thinking (GLM-Z1), the thinking is free and a constraint
  // (grammar, schema, forced tool call) applies to the answer after it; otherwise from the
  // first token (docs/engine.md#reasoning).
  bool constraint_armed() const override { return !thinks_first_ || !reasoning_->in_reasoning(); }
  // Of the resumed tokens, the leading ones sampled in the thinking (SeqRequest).
  int unconstrained_resumed() const { return unconstrained_resumed_; }

  void on_queued(int position) override;
  void on_start(const scheduler::StartInfo& info) override;
  void on_prefill(int prefilled, int to_prefill) override;
  bool on_token(int32_t token, const generation::GeneratedLogprobs* logprobs) override;
  void on_finish(scheduler::FinishInfo* info) override;
  void on_error(const Status& status) override;

 private:
  // The digest of the history the client will send next turn: the request's messages and this
  // answer as the client reads it (a tool call as its name and arguments).
  uint64_t answer_tag() const;
  // The request (choice 0 speaks for all) is no longer waiting: started, or ended first.
  void leave_queue();
  // `text` through the answer filter, if any; `end`: the answer's last text.
  std::string filtered(std::string text, bool end = false);
  Event event(EventType type) const;
  // A token event for `text` with the log-probabilities of the tokens since the last one. Text
  // held back (an unfinished character, a possible stop string, a possible reasoning marker)
  // keeps its tokens' entries pending until it goes out; `force` sends the pending entries
  // without text; `end`: the answer's last text. A reasoning model's thinking goes out as
  // `reasoning`, apart from the text (tok::ReasoningSplitter).
  void emit(std::string text, bool force = false, bool end = false);
  // The sampler's ids with the bytes each token adds to the answer.
  generation::GeneratedLogprobs with_bytes(generation::GeneratedLogprobs lp) const;

  RequestLedger* ledger_;
  std::string id_;
  EventSink sink_;
  std::shared_ptr<ChoiceGroup> group_;
  int index_;
  bool left_queue_ = false;
  const tok::Tokenizer& tok_;
  tok::StreamDecoder decoder_;
  StopText stop_;
  // A chat answer's clean-up as the model's chat() does it (ChatTemplate::answer_filter); null:
  // the text as decoded.
  std::unique_ptr<tok::AnswerFilter> filter_;
  // A reasoning model's answer: its thinking apart from its text (null: all text).
  std::unique_ptr<tok::ReasoningSplitter> reasoning_;
  bool thinks_first_ = false;  // the prompt opened the thinking: the constraint waits for its end
  int unconstrained_resumed_ = 0;
  int dropped_;
  uint64_t messages_digest_;
  std::vector<std::string> tool_names_;  // the request's tools (PromptPlan::tool_names)
  // With tools, the answer's text read for a call, once: the pieces go out with the events
  // (Event::tool) and tag the conversation (answer_tag).
  std::unique_ptr<tok::ToolCallStream> tool_reader_;
  tok::ToolAnswer tool_answer_;  // the pieces so far, joined
  bool chat_;
  std::string text_;              // everything emitted
  std::vector<int32_t> pending_;  // generated ids whose text is not sent yet
  std::vector<generation::GeneratedLogprobs> pending_logprobs_;  // their log-probabilities
};

}  // namespace glm::engine
