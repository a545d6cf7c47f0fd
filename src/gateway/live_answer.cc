#include "gateway/live_answer.h"

#include "core/json.h"

namespace glm::gateway {
namespace {

using Clock = std::chrono::steady_clock;

void append_frame(std::string* out, size_t id, const std::string& payload) {
  *out += "id: ";
  *out += std::to_string(id);
  *out += "\ndata: ";
  *out += payload;
  *out += "\n\n";
}

}  // namespace

LiveAnswer::LiveAnswer(std::string conversation_id, std::string request_id, int64_t answer_id)
    : conversation_id_(std::move(conversation_id)),
      request_id_(std::move(request_id)),
      answer_id_(answer_id) {}

LiveAnswer::Event LiveAnswer::make_event(const nlohmann::json& payload) {
  Event e;
  e.payload = dump_json(payload);
  const auto type = payload.find("type");
  if (type != payload.end() && *type == "token") {
    e.token = true;
    e.token_text = payload.value("text", "");
  }
  return e;
}

void LiveAnswer::publish(const nlohmann::json& payload) {
  Event e = make_event(payload);
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
  cv_.notify_all();
}

void LiveAnswer::end(const nlohmann::json& last) {
  Event e = make_event(last);
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
  ended_ = true;
  cv_.notify_all();
}

LiveAnswer::Read LiveAnswer::read_from(size_t from, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
               [&] { return ended_ || events_.size() > from; });
  Read r;
  size_t i = from;
  while (i < events_.size()) {
    if (!events_[i].token) {
      append_frame(&r.frames, i, events_[i].payload);
      ++i;
      continue;
    }
    // A run of tokens goes out as one token event with the id of its last.
    size_t j = i;
    std::string text;
    while (j < events_.size() && events_[j].token) text += events_[j++].token_text;
    append_frame(&r.frames, j - 1,
                 j - i == 1 ? events_[i].payload
                            : dump_json(nlohmann::json{{"type", "token"}, {"text", text}}));
    i = j;
  }
  r.next = std::max(from, events_.size());
  r.ended = ended_;
  return r;
}

size_t LiveAnswer::published() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

bool LiveAnswer::ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

void LiveAnswer::attach() {
  std::lock_guard<std::mutex> lock(mu_);
  ++subscribers_;
}

void LiveAnswer::detach() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--subscribers_ == 0) detached_at_ = Clock::now();
}

int LiveAnswer::followers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subscribers_;
}

double LiveAnswer::detached_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (subscribers_ > 0) return 0;
  return std::chrono::duration<double, std::milli>(Clock::now() - detached_at_).count();
}

LiveAnswers::~LiveAnswers() { join_all(); }

Status LiveAnswers::start(const std::shared_ptr<LiveAnswer>& answer,
                          std::function<void()> generate) {
  std::vector<std::thread> finished;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reap_locked(&finished);
    status = add_locked(answer, std::move(generate));
  }
  for (std::thread& t : finished) t.join();  // outside the lock: their last act takes it
  return status;
}

Status LiveAnswers::add_locked(const std::shared_ptr<LiveAnswer>& answer,
                               std::function<void()> generate) {
  if (closed_) return Status(ErrorCode::kUnavailable, "the gateway is stopping; retry in a moment");
  auto [it, inserted] = by_conversation_.emplace(answer->conversation_id(), answer);
  // One that ended (its thread is finishing) gives its place to the next turn.
  if (!inserted && it->second->ended()) {
    it->second = answer;
    inserted = true;
  }
  if (!inserted) {
    return invalid_argument("conversation " + answer->conversation_id() +
                            " is being answered; stop that answer first or wait for it");
  }
  runners_.emplace_back();
  Runner* runner = &runners_.back();
  runner->thread = std::thread([this, runner, answer, generate = std::move(generate)]() mutable {
    generate();
    generate = nullptr;  // what it holds (the engine stream, the session) goes now
    std::lock_guard<std::mutex> lock(mu_);
    auto found = by_conversation_.find(answer->conversation_id());
    if (found != by_conversation_.end() && found->second == answer) by_conversation_.erase(found);
    runner->done = true;
    cv_.notify_all();
  });
  return Status::Ok();
}

std::shared_ptr<LiveAnswer> LiveAnswers::find(const std::string& conversation_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_conversation_.find(conversation_id);
  return it == by_conversation_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<LiveAnswer>> LiveAnswers::all() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LiveAnswer>> out;
  for (const auto& [id, a] : by_conversation_) out.push_back(a);
  return out;
}

size_t LiveAnswers::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_conversation_.size();
}

void LiveAnswers::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

bool LiveAnswers::wait_idle(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return by_conversation_.empty(); });
}

void LiveAnswers::join_all() {
  std::list<Runner> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.splice(all.end(), runners_);
  }
  for (Runner& r : all) {
    if (r.thread.joinable()) r.thread.join();
  }
}

void LiveAnswers::reap_locked(std::vector<std::thread>* finished) {
  for (auto it = runners_.begin(); it != runners_.end();) {
    if (it->done) {
      finished->push_back(std::move(it->thread));
      it = runners_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace glm::gateway
