// Helpers shared by the engine's tests: the models of ../shared/data they load, and what a
// request's events said (an EventSink that records them).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "generation/tool_delta.h"

namespace glm::engine::testing {

// ChatGLM3's architecture, real vocabulary and template, random weights.
inline const std::string kChatglm3 =
    std::string(GLM_SHARED_DATA) + "/reference/chatglm3-small.gguf";
// A real tiny trained llama (Karpathy's stories260K).
inline const std::string kStories = std::string(GLM_SHARED_DATA) + "/models/stories260K.gguf";

// A greedy request of n tokens at most.
inline Request greedy(const std::string& id, std::vector<tok::Message> m, int n = 40) {
  Request r;
  r.id = id;
  r.messages = std::move(m);
  r.params.temperature = 0.0f;
  r.params.max_tokens = n;
  return r;
}

// What each request's events said, by request id: the text, reasoning and tool-call pieces as
// they streamed, each choice's text (Event::index), the logprobs, and the start and final events.
struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> text;
  std::map<std::string, std::string> reasoning;
  std::map<std::string, bool> text_before_reasoning;
  std::map<std::string, std::map<int, std::string>> choice_text;  // by Event::index
  std::map<std::string, std::vector<generation::GeneratedLogprobs>> logprobs;
  std::map<std::string, std::vector<generation::ToolDelta>> tool;  // token and done events' pieces
  std::map<std::string, Event> start, done;

  EventSink sink() {
    return [this](const Event& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (e.type == EventType::kToken) {
        if (!e.reasoning.empty() && !text[e.id].empty()) text_before_reasoning[e.id] = true;
        text[e.id] += e.text;
        reasoning[e.id] += e.reasoning;
        choice_text[e.id][e.index] += e.text;
        auto& lp = logprobs[e.id];
        lp.insert(lp.end(), e.logprobs.begin(), e.logprobs.end());
      }
      if (e.type == EventType::kToken || e.type == EventType::kDone) {
        tool[e.id].insert(tool[e.id].end(), e.tool.begin(), e.tool.end());
      }
      if (e.type == EventType::kStart) start[e.id] = e;
      if (e.type == EventType::kDone || e.type == EventType::kError) done[e.id] = e;
      cv.notify_all();
    };
  }
  // Waits for the request's final event (bounded, so that a bug fails rather than hangs).
  bool wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(300), [&] { return done.count(id) > 0; });
  }
  // Submits r and waits for it: true when it ended with kDone.
  bool run(Engine* e, const Request& r) {
    if (!e->submit(r, sink()).ok()) return false;
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(300), [&] { return done.count(r.id) > 0; }) &&
           done[r.id].type == EventType::kDone;
  }
};

// Every event of each request, in order: for the tests of the events themselves.
struct EventLog {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::vector<Event>> events;

  EventSink sink() {
    return [this](const Event& e) {
      std::lock_guard<std::mutex> lock(mu);
      events[e.id].push_back(e);
      cv.notify_all();
    };
  }
  static bool final(const Event& e) {
    return e.type == EventType::kDone || e.type == EventType::kError;
  }
  // Waits for the final event (bounded so that a bug fails rather than hangs).
  bool wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] {
      auto it = events.find(id);
      return it != events.end() && !it->second.empty() && final(it->second.back());
    });
  }
  bool wait_for_type(const std::string& id, EventType type) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] {
      for (const Event& e : events[id]) {
        if (e.type == type) return true;
      }
      return false;
    });
  }
  std::vector<Event> of(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    return events[id];
  }
  std::string text(const std::string& id) {
    std::string s;
    for (const Event& e : of(id)) {
      if (e.type == EventType::kToken) s += e.text;
    }
    return s;
  }
  Event first(const std::string& id, EventType type) {
    for (const Event& e : of(id)) {
      if (e.type == type) return e;
    }
    return Event{};
  }
  Event last(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    return events[id].back();
  }
};

}  // namespace glm::engine::testing
