#include "testing/echo_engine.h"

#include <algorithm>

#include "core/utf8.h"

namespace glm::testing {
namespace {

std::vector<std::string> split_chars(const std::string& text) {
  const std::string s = utf8_sanitize(text);
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

EchoEngine::EchoEngine(const EchoOptions& options) : options_(options) {
  thread_ = std::thread([this] { loop(); });
}

EchoEngine::~EchoEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status EchoEngine::submit(engine::Request request, engine::EventSink sink) {
  auto job = std::make_unique<Job>();
  if (request.raw) {
    job->chars = split_chars(options_.reply.empty() ? request.prompt : options_.reply);
    job->prompt_tokens = static_cast<int>(request.prompt.size());
  } else {
    if (request.messages.empty()) return invalid_argument("no messages");
    for (const auto& m : request.messages)
      job->prompt_tokens += static_cast<int>(m.content.size()) + 1;
    job->chars =
        split_chars(options_.reply.empty() ? request.messages.back().content : options_.reply);
    if (options_.reasoning == tok::ReasoningFormat::kThink) {
      job->reasoning = std::make_unique<tok::ReasoningSplitter>();
    }
  }
  // Resume: a token's id is its character's index in the reply, so the ids sent back are the
  // characters already delivered.
  if (request.resume.size() > job->chars.size()) {
    return invalid_argument("resume: more tokens than the reply has");
  }
  job->next = request.resume.size();
  if (!request.raw && !request.tools.empty()) {
    job->tools = std::make_unique<tok::ToolCallStream>(
        generation::tool_names(*request.tools),
        tok::tool_reading(*request.tools, request.parallel_tool_calls));
    for (size_t i = 0; i < job->next; ++i) job->tools->feed(job->chars[i]);  // sent before
  }
  if (job->prompt_tokens > options_.n_ctx) {
    return Status(ErrorCode::kContextOverflow,
                  "prompt is " + std::to_string(job->prompt_tokens) + " tokens; the context is " +
                      std::to_string(options_.n_ctx) + " (shorten the history)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (health_ != engine::Health::kReady) {
    return Status(ErrorCode::kUnavailable, "engine is draining; retry on the restarted engine");
  }
  if (static_cast<int>(waiting_.size()) >= options_.max_queue) {
    return Status(ErrorCode::kQueueFull, "queue is full (" + std::to_string(options_.max_queue) +
                                             " waiting); retry shortly");
  }
  if (!in_flight_.insert(request.id).second) {
    return invalid_argument("request id '" + request.id + "' is already in flight");
  }
  if (!request.conversation.empty()) {
    auto it = conversation_tokens_.find(request.conversation);
    if (it != conversation_tokens_.end())
      job->cached_tokens = std::min(it->second, job->prompt_tokens);
  }
  job->request = std::move(request);
  job->sink = std::move(sink);
  job->submitted = Clock::now();
  waiting_.push_back(std::move(job));
  stats_.requests_total++;
  cv_.notify_all();
  return Status::Ok();
}

void EchoEngine::cancel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  // Jobs may be outside waiting_/running_ while the loop calls a sink: mark by id.
  if (in_flight_.count(id) != 0) cancel_ids_.insert(id);
  cv_.notify_all();
}

engine::Stats EchoEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  engine::Stats s = stats_;
  s.queued = static_cast<int>(waiting_.size());
  s.running = admitted_;
  return s;
}

engine::Health EchoEngine::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

std::vector<int32_t> EchoEngine::tokenize(const std::string& text) const {
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string EchoEngine::detokenize(const std::vector<int32_t>& ids, bool) const {
  std::string text;
  for (int32_t id : ids) text.push_back(static_cast<char>(id & 0xff));
  return text;
}

StatusOr<std::vector<int32_t>> EchoEngine::prompt_tokens(engine::Request request) const {
  if (request.raw) return tokenize(request.prompt);
  if (request.messages.empty()) return invalid_argument("no messages");
  std::string text;
  for (const auto& m : request.messages) text += m.content + "\n";
  return tokenize(text);
}

bool EchoEngine::drain(std::chrono::milliseconds bound) {
  std::unique_lock<std::mutex> lock(mu_);
  if (health_ == engine::Health::kReady) health_ = engine::Health::kDraining;
  const bool finished = idle_cv_.wait_for(lock, bound, [&] { return in_flight_.empty(); });
  if (!finished) {
    cancel_all_ = true;
    cv_.notify_all();
    idle_cv_.wait(lock, [&] { return in_flight_.empty(); });
  }
  health_ = engine::Health::kStopped;
  stop_ = true;
  lock.unlock();
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  return finished;
}

void EchoEngine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !waiting_.empty() || !running_.empty(); });
    if (stop_ && waiting_.empty() && running_.empty()) break;
    if (stop_) cancel_all_ = true;  // destroyed with work in flight: end it as cancelled
    step(lock);
    if (in_flight_.empty()) idle_cv_.notify_all();
    if (options_.token_delay_ms > 0 && !running_.empty()) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.token_delay_ms), [&] {
        if (stop_) return true;
        return !cancel_ids_.empty();
      });
    }
  }
  idle_cv_.notify_all();
}

void EchoEngine::finish(Job& job, engine::FinishReason reason, std::unique_lock<std::mutex>& lock) {
  const auto now = Clock::now();
  engine::Event done;
  done.type = engine::EventType::kDone;
  done.id = job.request.id;
  done.finish_reason = reason;
  done.usage.prompt_tokens = job.prompt_tokens;
  done.usage.cached_tokens = job.cached_tokens;
  done.usage.completion_tokens = static_cast<int>(job.next);
  if (job.tools) done.tool = job.tools->finish();
  const bool started = job.started != Clock::time_point();
  done.timings.queue_ms = ms_between(job.submitted, started ? job.started : now);
  if (job.first_token != Clock::time_point()) {
    done.timings.ttft_ms = ms_between(job.submitted, job.first_token);
    done.timings.prefill_ms = ms_between(job.started, job.first_token);
  }
  if (job.next > 1)
    done.timings.tpot_ms = ms_between(job.first_token, job.last_token) / (job.next - 1);
  done.timings.total_ms = ms_between(job.submitted, now);
  if (!job.request.conversation.empty()) {
    conversation_tokens_[job.request.conversation] = job.prompt_tokens + static_cast<int>(job.next);
  }
  if (started) --admitted_;
  in_flight_.erase(job.request.id);
  cancel_ids_.erase(job.request.id);
  lock.unlock();
  job.sink(done);
  lock.lock();
}

void EchoEngine::step(std::unique_lock<std::mutex>& lock) {
  // Announce and admit waiting jobs.
  for (size_t i = 0; i < waiting_.size(); ++i) {
    Job& j = *waiting_[i];
    if (!j.queued_sent) {
      j.queued_sent = true;
      engine::Event q;
      q.type = engine::EventType::kQueued;
      q.id = j.request.id;
      q.position = static_cast<int>(i);
      lock.unlock();
      j.sink(q);
      lock.lock();
    }
  }
  // Cancelled waiting jobs end at once, wherever they are in the queue.
  std::vector<std::unique_ptr<Job>> dropped;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((*it)->cancelled || cancel_all_ || cancel_ids_.count((*it)->request.id) != 0) {
      dropped.push_back(std::move(*it));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& job : dropped) finish(*job, engine::FinishReason::kCancelled, lock);
  while (!waiting_.empty()) {
    std::unique_ptr<Job>& front = waiting_.front();
    if (cancel_all_ || cancel_ids_.count(front->request.id) != 0) front->cancelled = true;
    if (!front->cancelled && static_cast<int>(running_.size()) >= options_.max_running) break;
    std::unique_ptr<Job> job = std::move(front);
    waiting_.pop_front();
    if (job->cancelled) {
      finish(*job, engine::FinishReason::kCancelled, lock);
      continue;
    }
    job->started = Clock::now();
    ++admitted_;
    engine::Event s;
    s.type = engine::EventType::kStart;
    s.id = job->request.id;
    s.usage.prompt_tokens = job->prompt_tokens;
    s.usage.cached_tokens = job->cached_tokens;
    stats_.prompt_tokens_total += job->prompt_tokens;
    stats_.cached_tokens_total += job->cached_tokens;
    Job& ref = *job;
    running_.push_back(std::move(job));
    lock.unlock();
    ref.sink(s);
    if (options_.prefill_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.prefill_delay_ms));
    }
    lock.lock();
  }
  // One token per running job.
  std::vector<std::unique_ptr<Job>> still;
  std::vector<std::unique_ptr<Job>> current;
  current.swap(running_);
  for (auto& job : current) {
    const int max_tokens = job->request.params.max_tokens;
    if (job->cancelled || cancel_all_ || cancel_ids_.count(job->request.id) != 0) {
      finish(*job, engine::FinishReason::kCancelled, lock);
      continue;
    }
    if (job->next >= job->chars.size()) {
      finish(*job, engine::FinishReason::kStop, lock);
      continue;
    }
    if (max_tokens > 0 && static_cast<int>(job->next) >= max_tokens) {
      finish(*job, engine::FinishReason::kLength, lock);
      continue;
    }
    const bool fail = !job->request.messages.empty() &&
                      job->request.messages.back().content.rfind("__fail__", 0) == 0 &&
                      job->next == 1;
    if (fail) {
      engine::Event e;
      e.type = engine::EventType::kError;
      e.id = job->request.id;
      e.error = Status(ErrorCode::kInternal, "echo engine: scripted failure (__fail__)");
      --admitted_;
      in_flight_.erase(job->request.id);
      cancel_ids_.erase(job->request.id);
      lock.unlock();
      job->sink(e);
      lock.lock();
      continue;
    }
    engine::Event t;
    t.type = engine::EventType::kToken;
    t.id = job->request.id;
    t.tokens = {static_cast<int32_t>(job->next)};
    t.text = job->chars[job->next++];
    if (job->reasoning) {
      tok::ReasoningPiece piece =
          job->reasoning->feed(t.text, /*end=*/job->next == job->chars.size());
      t.text = std::move(piece.content);
      t.reasoning = std::move(piece.reasoning);
    }
    if (job->tools) t.tool = job->tools->feed(t.text);
    job->last_token = Clock::now();
    if (job->first_token == Clock::time_point()) job->first_token = job->last_token;
    stats_.generated_tokens_total++;
    lock.unlock();
    job->sink(t);
    lock.lock();
    still.push_back(std::move(job));
  }
  // Jobs admitted while the lock was released went to running_; keep them after ours.
  for (auto& j : running_) still.push_back(std::move(j));
  running_.swap(still);
}

}  // namespace glm::testing
