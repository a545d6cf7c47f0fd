// RequestObserver and ChoiceGroup: a request's scheduler callbacks as Events.
#include "engine/request_observer.h"

#include <utility>

namespace glm::engine {

RequestObserver::RequestObserver(RequestLedger* ledger, std::string id, EventSink sink,
                                 const tok::Tokenizer& tok, std::vector<std::string> stops,
                                 const PromptPlan& plan, bool chat,
                                 const std::vector<int32_t>& resume,
                                 std::unique_ptr<tok::AnswerFilter> filter,
                                 std::unique_ptr<tok::ReasoningSplitter> reasoning,
                                 std::shared_ptr<ChoiceGroup> group, int index)
    : ledger_(ledger),
      id_(std::move(id)),
      sink_(std::move(sink)),
      group_(std::move(group)),
      index_(index),
      tok_(tok),
      decoder_(tok),
      stop_(std::move(stops)),
      filter_(std::move(filter)),
      reasoning_(std::move(reasoning)),
      thinks_first_(reasoning_ && reasoning_->in_reasoning()),
      dropped_(plan.dropped_messages),
      messages_digest_(plan.messages_digest),
      tool_names_(plan.tool_names),
      tool_reader_(tool_names_.empty()
                       ? nullptr
                       : std::make_unique<tok::ToolCallStream>(tool_names_, plan.tool_reading)),
      chat_(chat) {
  // A raw prompt is continued, not answered: the first generated token keeps its leading
  // space ("Once upon a time" + " there"), so the decoder must not treat it as the start of
  // the text. Feeding it the prompt's last text token (output discarded) does that.
  if (!chat && !plan.prompt.empty() && !tok.is_control(plan.prompt.back())) {
    decoder_.push(plan.prompt.back());
    decoder_.flush();
  }
  // A resumed request: its earlier tokens go through the decoder and the stop matcher as
  // they did the first time (their text was sent then), so the next text continues it.
  for (int32_t t : resume) {
    if (!constraint_armed()) ++unconstrained_resumed_;  // as the first run sampled it
    const std::string text = filtered(stop_.push(decoder_.push(t)));
    text_ += text;
    const std::string content = reasoning_ ? reasoning_->feed(text).content : text;
    if (tool_reader_) {  // read as the first run read it: its pieces were sent then
      tok::add_tool_deltas(tool_reader_->feed(content), &tool_answer_);
    }
  }
}

void RequestObserver::on_queued(int position) {
  if (index_ > 0) return;
  Event e = event(EventType::kQueued);
  e.position = position;
  sink_(e);
  if (dropped_ > 0) {
    Event n = event(EventType::kNotice);
    n.dropped_messages = dropped_;
    n.message = "dropped the " + std::to_string(dropped_) +
                " oldest messages of the history to fit the context (the system prompt is kept)";
    sink_(n);
  }
}

void RequestObserver::on_start(const scheduler::StartInfo& info) {
  if (index_ > 0) return;
  leave_queue();
  Event e = event(EventType::kStart);
  e.usage.prompt_tokens = info.prompt_tokens;
  e.usage.cached_tokens = info.cached_tokens;
  sink_(e);
}

void RequestObserver::on_prefill(int prefilled, int to_prefill) {
  if (index_ > 0) return;
  Event e = event(EventType::kProgress);
  e.prefilled = prefilled;
  e.to_prefill = to_prefill;
  sink_(e);
}

bool RequestObserver::on_token(int32_t token, const generation::GeneratedLogprobs* logprobs) {
  if (group_ && group_->failed()) return false;  // another choice failed: the request ends
  pending_.push_back(token);
  if (logprobs != nullptr) pending_logprobs_.push_back(with_bytes(*logprobs));
  emit(filtered(stop_.push(decoder_.push(token))));
  return !stop_.matched();
}

std::string RequestObserver::filtered(std::string text, bool end) {
  if (!filter_) return text;
  std::string out = filter_->push(text);
  return end ? out + filter_->flush() : out;
}

Event RequestObserver::event(EventType type) const {
  Event e;
  e.type = type;
  e.id = id_;
  e.index = index_;
  return e;
}

void RequestObserver::emit(std::string text, bool force, bool end) {
  text_ += text;
  std::string reasoning;
  if (reasoning_) {
    tok::ReasoningPiece piece = reasoning_->feed(text, end);
    reasoning = std::move(piece.reasoning);
    text = std::move(piece.content);
  }
  std::vector<tok::ToolDelta> tool;
  if (tool_reader_) {
    tool = tool_reader_->feed(text);
    tok::add_tool_deltas(tool, &tool_answer_);
  }
  if (text.empty() && reasoning.empty() && tool.empty() && !(force && !pending_logprobs_.empty())) {
    return;
  }
  Event e = event(EventType::kToken);
  e.tool = std::move(tool);
  e.text = std::move(text);
  e.reasoning = std::move(reasoning);
  e.tokens.swap(pending_);
  e.logprobs = std::move(pending_logprobs_);
  pending_logprobs_.clear();
  sink_(e);
}

generation::GeneratedLogprobs RequestObserver::with_bytes(generation::GeneratedLogprobs lp) const {
  // As the stream decoder does: the first text token drops SentencePiece's space.
  const bool at_start = decoder_.at_start();
  auto bytes = [&](int32_t id) {
    if (tok_.is_control(id)) return std::string();  // adds nothing to the answer
    return at_start ? tok_.token_bytes_at_start(id) : tok_.token_bytes(id);
  };
  lp.chosen.bytes = bytes(lp.chosen.id);
  for (generation::TokenLogprob& t : lp.top) t.bytes = bytes(t.id);
  return lp;
}

void ChoiceGroup::choice_done(Event done) {
  usage_.prompt_tokens = done.usage.prompt_tokens;
  usage_.cached_tokens = done.usage.cached_tokens;
  usage_.completion_tokens += done.usage.completion_tokens;
  speculation_.drafted += done.speculation.drafted;
  speculation_.accepted += done.speculation.accepted;
  done.type = EventType::kChoiceDone;
  if (!failed()) sink_(done);
  last_ = std::move(done);
  end_one();
}

void ChoiceGroup::choice_failed(const Status& status) {
  if (!failed()) error_ = status;
  end_one();
}

void ChoiceGroup::end_one() {
  if (--left_ > 0) return;
  Event e;
  e.id = id_;
  if (failed()) {
    e.type = EventType::kError;
    e.error = error_;
  } else {
    e.type = EventType::kDone;
    e.finish_reason = last_.finish_reason;
    e.timings = last_.timings;
    e.usage = usage_;
    e.speculation = speculation_;
  }
  sink_(e);
  ledger_->finished(id_);
}

void RequestObserver::leave_queue() {
  if (index_ > 0 || left_queue_) return;
  left_queue_ = true;
  ledger_->left_queue();
}

void RequestObserver::on_finish(scheduler::FinishInfo* info) {
  leave_queue();
  const bool cancelled = info->reason == FinishReason::kCancelled;
  // The tokens that completed a stop string are not part of the answer, nor their entries.
  if (stop_.matched()) pending_logprobs_.clear();
  if (!cancelled) {
    emit(filtered(stop_.push(decoder_.flush()) + stop_.flush(), /*end=*/true), /*force=*/true,
         /*end=*/true);
  }
  Event e = event(EventType::kDone);
  if (tool_reader_) {  // what the reader held to the end (of a cancelled answer too: its text went
                       // out)
    e.tool = tool_reader_->finish();
    tok::add_tool_deltas(e.tool, &tool_answer_);
  }
  e.finish_reason = info->reason;
  e.usage = info->usage;
  e.timings = info->timings;
  e.speculation = info->speculation;
  // Keep the KV cache for the next turn unless the tokens and the text the client will send
  // back disagree (a stop string cut the text) or the request did not complete.
  if (chat_ && !cancelled && !stop_.matched() && !group_) {
    info->save_conversation = true;
    info->conversation_tag = answer_tag();
  }
  if (group_) {
    group_->choice_done(std::move(e));
    return;
  }
  sink_(e);
  ledger_->finished(id_);
}

uint64_t RequestObserver::answer_tag() const {
  if (tool_names_.empty()) return digest_append(messages_digest_, tok::Message{"assistant", text_});
  // With tools, the client gets the answer read by the same rule (its text, then its call) and
  // sends it back that way: the text as a message (if any), the call as a message naming the
  // function with its arguments (api/openai.cc read_tool_calls, ChatSession likewise).
  const tok::ToolAnswer& a = tool_answer_;
  uint64_t tag = messages_digest_;
  if (a.calls.empty() || !a.content.empty()) {
    tag = digest_append(tag, tok::Message{"assistant", a.content});
  }
  for (const tok::ToolCall& c : a.calls) {  // one message per call, as clients send them back
    tok::Message call{"assistant", "", c.name};
    call.arguments = c.arguments;
    tag = digest_append(tag, call);
  }
  return tag;
}

void RequestObserver::on_error(const Status& status) {
  leave_queue();
  if (group_) {
    group_->choice_failed(status);
    return;
  }
  Event e = event(EventType::kError);
  e.error = status;
  e.restart = ledger_->model_failed();
  sink_(e);
  ledger_->finished(id_);
}

}  // namespace glm::engine
