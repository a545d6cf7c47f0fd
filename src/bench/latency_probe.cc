#include "bench/latency_probe.h"

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/unix_socket.h"
#include "daemon/daemon.h"
#include "protocol/line_buffer.h"
#include "protocol/sampling_json.h"

namespace glm::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kReadTimeoutMs = 600000;  // one generation on a slow CPU may take minutes

double ms_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

// Token arrival times -> ttft, tpot, e2e.
void finish_sample(Clock::time_point t0, const std::vector<Clock::time_point>& token_times,
                   Clock::time_point end, Sample* s) {
  s->tokens = static_cast<int>(token_times.size());
  s->e2e_ms = ms_since(t0, end);
  if (!token_times.empty()) s->ttft_ms = ms_since(t0, token_times.front());
  if (token_times.size() >= 2) {
    s->tpot_ms = ms_since(token_times.front(), token_times.back()) / (token_times.size() - 1);
  }
}

// Reads from `fd` into `in` until a line is available; false on timeout, EOF or error.
bool read_line(int fd, protocol::LineBuffer* in, std::string* line) {
  char buf[65536];
  for (;;) {
    if (in->next(line) == protocol::LineBuffer::Next::kLine) return true;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kReadTimeoutMs) <= 0) return false;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return false;
    in->append(std::string_view(buf, static_cast<size_t>(n)));
  }
}

}  // namespace

StatusOr<Sample> run_in_process(engine::Engine& engine, const protocol::Request& request) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  Status error;
  Sample s;
  std::vector<Clock::time_point> token_times;
  token_times.reserve(1024);
  const auto t0 = Clock::now();
  Clock::time_point end;
  Status st = engine.submit(
      daemon::to_engine_request(request,
                                request.id.empty() ? protocol::make_request_id() : request.id),
      [&](const engine::Event& ev) {
        const auto now = Clock::now();
        std::lock_guard<std::mutex> lock(mu);
        switch (ev.type) {
          case engine::EventType::kToken:
            if (!ev.text.empty()) token_times.push_back(now);  // text seen, as HTTP's chunks
            s.text += ev.text;
            break;
          case engine::EventType::kStart:
            s.prompt_tokens = ev.usage.prompt_tokens;
            s.cached_tokens = ev.usage.cached_tokens;
            break;
          case engine::EventType::kError:
            error = ev.error.ok() ? Status(ErrorCode::kInternal, "error event") : ev.error;
            [[fallthrough]];
          case engine::EventType::kDone:
            end = now;
            finished = true;
            cv.notify_all();
            break;
          default:
            break;
        }
      });
  if (!st.ok()) return st;
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  if (!error.ok()) return error;
  finish_sample(t0, token_times, end, &s);
  return s;
}

StatusOr<Sample> run_socket(const std::string& socket_path, const protocol::Request& request) {
  const auto t0 = Clock::now();
  auto fd = connect_unix(socket_path);
  if (!fd.ok()) return fd.status();
  Sample s;
  std::vector<Clock::time_point> token_times;
  Status result = write_all(*fd, protocol::serialize_request(request) + "\n");
  protocol::LineBuffer in(64 << 20);
  std::string line;
  Clock::time_point end;
  while (result.ok()) {
    if (!read_line(*fd, &in, &line)) {
      result = Status(ErrorCode::kUnavailable, "the engine closed the connection mid-stream");
      break;
    }
    const auto now = Clock::now();
    auto ev = protocol::parse_event(line);
    if (!ev.ok()) {
      result = ev.status();
      break;
    }
    if (ev->type == protocol::EventType::kToken) {
      if (!ev->text.empty()) token_times.push_back(now);  // text seen, as HTTP's chunks
      s.text += ev->text;
    } else if (ev->type == protocol::EventType::kStart) {
      s.prompt_tokens = ev->usage.prompt_tokens;
      s.cached_tokens = ev->usage.cached_tokens;
    } else if (ev->type == protocol::EventType::kError) {
      result = Status(ev->code, ev->message);
    } else if (ev->type == protocol::EventType::kDone) {
      end = now;
      break;
    }
  }
  ::close(*fd);
  if (!result.ok()) return result;
  finish_sample(t0, token_times, end, &s);
  return s;
}

StatusOr<Sample> run_http(const std::string& url, const protocol::Request& request) {
  using json = nlohmann::json;
  json body = {{"model", "default"}, {"stream", true}, {"messages", json::array()}};
  for (const auto& m : request.messages) {
    body["messages"].push_back({{"role", m.role}, {"content", m.content}});
  }
  nlohmann::ordered_json sampling = nlohmann::ordered_json::object();
  protocol::write_sampling(request.params, &sampling);
  for (auto& [key, value] : sampling.items()) body[key] = value;

  httplib::Client client(url);
  if (!client.is_valid()) return invalid_argument("--http: expected http://HOST:PORT, got " + url);
  client.set_read_timeout(kReadTimeoutMs / 1000, (kReadTimeoutMs % 1000) * 1000);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  if (const char* key = std::getenv("GLMSERVE_API_KEY")) {
    req.set_header("Authorization", std::string("Bearer ") + key);
  }
  Sample s;
  std::vector<Clock::time_point> token_times;
  std::string pending;  // body bytes not yet split into lines
  bool done = false;
  // SSE "data: {...}" lines as they arrive; a token is timed when its chunk is received.
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const auto now = Clock::now();
    pending.append(data, n);
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (line.rfind("data: ", 0) != 0) continue;
      line.erase(0, 6);
      if (line.rfind("[DONE]", 0) == 0) {
        done = true;
        continue;
      }
      auto j = parse_json(line, "an SSE event");
      if (!j.ok() || !j->contains("choices") || !(*j)["choices"].is_array() ||
          (*j)["choices"].empty()) {
        continue;
      }
      const json& delta = (*j)["choices"][0].value("delta", json::object());
      if (delta.is_object() && delta.contains("content") && delta["content"].is_string() &&
          !delta["content"].get<std::string>().empty()) {
        token_times.push_back(now);
        s.text += delta["content"].get<std::string>();
      }
    }
    return true;
  };
  const auto t0 = Clock::now();
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  const auto end = Clock::now();
  if (!sent) {
    return Status(ErrorCode::kUnavailable,
                  "cannot reach the gateway at " + url + ": " + httplib::to_string(error));
  }
  if (res.status != 200) {
    return Status(ErrorCode::kUnavailable, "gateway answered HTTP " + std::to_string(res.status));
  }
  if (!done) return Status(ErrorCode::kUnavailable, "the stream ended without [DONE]");
  finish_sample(t0, token_times, end, &s);
  return s;
}

Summary summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  std::vector<double> kept = values;
  if (n >= 3) kept = std::vector<double>(values.begin() + 1, values.end() - 1);
  s.n = static_cast<int>(kept.size());
  double sum = 0;
  for (double v : kept) sum += v;
  s.mean = sum / kept.size();
  double sq = 0;
  for (double v : kept) sq += (v - s.mean) * (v - s.mean);
  s.stddev = kept.size() > 1 ? std::sqrt(sq / (kept.size() - 1)) : 0;
  return s;
}

}  // namespace glm::bench
