#include "serve/model_manager.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/log.h"
#include "serve/engine_probe.h"

namespace glm::serve {
namespace {

using json = nlohmann::json;

constexpr int kProbeTimeoutMs = 200;
constexpr auto kStatsEvery = std::chrono::seconds(1);
// An engine asked for this recently is not chosen to make room: its request may be on its way.
constexpr auto kRecentUse = std::chrono::seconds(2);

}  // namespace

const char* model_state_name(ModelState s) {
  switch (s) {
    case ModelState::kUnloaded:
      return "unloaded";
    case ModelState::kLoading:
      return "loading";
    case ModelState::kLoaded:
      return "loaded";
    case ModelState::kStopping:
      return "stopping";
  }
  return "unloaded";
}

std::string control_error_json(const Status& status) {
  return dump_json(
      json{{"ok", false}, {"code", error_code_name(status.code())}, {"message", status.message()}});
}

namespace {

// The reply to an ensure once the model's engine answers.
std::string ready_reply(const std::string& name, const std::string& socket,
                        const std::string& adapter) {
  json j = {{"ok", true}, {"model", name}, {"socket", socket}};
  if (!adapter.empty()) j["adapter"] = adapter;
  return dump_json(j);
}

}  // namespace

ModelManager::ModelManager(std::vector<ManagedModel> models, ManagerOptions options,
                           Supervisor* supervisor)
    : options_(std::move(options)), supervisor_(supervisor) {
  for (auto& spec : models) {
    Model m;
    m.spec = std::move(spec);
    models_.push_back(std::move(m));
  }
}

ModelManager::Model* ModelManager::find(const std::string& name) {
  if (name.empty()) return models_.empty() ? nullptr : &models_[0];
  for (Model& m : models_) {
    if (m.spec.name == name) return &m;
  }
  return nullptr;
}

std::pair<ModelManager::Model*, std::string> ModelManager::resolve(const std::string& name) {
  if (Model* m = find(name)) return {m, ""};  // a model's own name first (store names hold ':')
  for (Model& m : models_) {
    for (const std::string& a : m.spec.adapters) {
      if (name == m.spec.name + ":" + a) return {&m, a};
    }
  }
  for (Model& m : models_) {  // "NAME": the first model serving it
    for (const std::string& a : m.spec.adapters) {
      if (name == a) return {&m, a};
    }
  }
  return {nullptr, ""};
}

int ModelManager::models_serving(const std::string& adapter) const {
  int n = 0;
  for (const Model& m : models_) {
    for (const std::string& a : m.spec.adapters) n += a == adapter ? 1 : 0;
  }
  return n;
}

ModelManager::Model* ModelManager::by_child(size_t child) {
  for (Model& m : models_) {
    if (m.spec.child == child) return &m;
  }
  return nullptr;
}

std::string ModelManager::names() const {
  std::string out;
  for (const Model& m : models_) out += (out.empty() ? "'" : ", '") + m.spec.name + "'";
  return out;
}

void ModelManager::ensure(const std::string& name, Reply reply) {
  auto [m, adapter] = resolve(name);
  if (m == nullptr) {
    reply(control_error_json(not_found("model '" + name + "' is not served here; this server " +
                                       "serves " + names() + " (GET /v1/models)")));
    return;
  }
  const auto now = Clock::now();
  m->last_used = now;
  if (m->state == ModelState::kLoaded) {
    reply(ready_reply(m->spec.name, m->spec.socket, adapter));
    return;
  }
  m->waiters.push_back(
      {std::move(reply), now + std::chrono::milliseconds(options_.wait_ms), adapter});
  if (m->state == ModelState::kUnloaded && !m->wanted) {
    m->wanted = true;
    try_start(*m);
  } else if (m->state == ModelState::kStopping) {
    m->wanted = true;  // started again when its engine has exited
  }
}

bool ModelManager::has_room(const Model& m) const {
  int running = 0;
  uint64_t bytes = m.spec.size_bytes;
  for (const Model& o : models_) {
    if (&o == &m || o.state == ModelState::kUnloaded) continue;
    ++running;
    bytes += o.spec.size_bytes;
  }
  if (options_.max_loaded > 0 && running >= options_.max_loaded) return false;
  // A model alone over the budget still loads (alone): refusing it would make it unusable.
  if (options_.max_memory_bytes > 0 && running > 0 && bytes > options_.max_memory_bytes) {
    return false;
  }
  return true;
}

ModelManager::Model* ModelManager::pick_victim(const Model& for_model) {
  const auto now = Clock::now();
  Model* victim = nullptr;
  for (Model& o : models_) {
    if (&o == &for_model || o.state != ModelState::kLoaded || !o.waiters.empty()) continue;
    if (now - o.last_used < kRecentUse) continue;
    poll_stats(o, now);  // fresh: "in flight" must be now, not a second ago
    if (o.busy > 0 || now - o.last_used < kRecentUse) continue;
    if (victim == nullptr || o.last_used < victim->last_used) victim = &o;
  }
  return victim;
}

bool ModelManager::try_start(Model& m) {
  if (m.state != ModelState::kUnloaded) return false;
  if (!has_room(m)) {
    for (const Model& o : models_) {
      if (o.state == ModelState::kStopping) return false;  // room is being made already
    }
    if (Model* victim = pick_victim(m)) {
      GLM_LOG_INFO("serve: unloading %s (least recently used) to make room for %s",
                   victim->spec.name.c_str(), m.spec.name.c_str());
      victim->state = ModelState::kStopping;
      supervisor_->stop(victim->spec.child);
    }
    return false;
  }
  m.wanted = false;
  m.load_done = m.load_total = 0;
  ++starts_;
  GLM_LOG_INFO("serve: loading model %s (%s)", m.spec.name.c_str(), m.spec.path.c_str());
  supervisor_->start(m.spec.child);  // on_start marks it loading
  return true;
}

void ModelManager::reply_all(Model& m, const std::string& line) {
  std::vector<Waiter> waiters;
  waiters.swap(m.waiters);
  for (Waiter& w : waiters) w.reply(line);
}

void ModelManager::reply_ready(Model& m) {
  std::vector<Waiter> waiters;
  waiters.swap(m.waiters);
  for (Waiter& w : waiters) w.reply(ready_reply(m.spec.name, m.spec.socket, w.adapter));
}

void ModelManager::poll_stats(Model& m, Clock::time_point now) {
  m.last_stats = now;
  auto ev = probe_engine(m.spec.socket, protocol::RequestType::kStats, kProbeTimeoutMs);
  if (!ev.ok() || ev->type != protocol::EventType::kStats) return;
  m.busy = ev->stats.running + ev->stats.queued;
  if (m.busy > 0 || (m.requests_total >= 0 && ev->stats.requests_total != m.requests_total)) {
    m.last_used = now;
  }
  m.requests_total = ev->stats.requests_total;
}

void ModelManager::on_start(size_t child) {
  Model* m = by_child(child);
  if (m == nullptr) return;
  // A first start, or a restart after a crash: loading until its health says ready.
  m->state = ModelState::kLoading;
  m->requests_total = -1;
  m->busy = 0;
}

void ModelManager::on_exit(size_t child, const std::string& how) {
  Model* m = by_child(child);
  if (m == nullptr) return;
  const ModelState was = m->state;
  m->state = ModelState::kUnloaded;
  if (was == ModelState::kLoading) {
    m->wanted = false;
    reply_all(*m, control_error_json(
                      Status(ErrorCode::kInternal,
                             "model '" + m->spec.name + "' failed to load: its engine " + how +
                                 " (see serve's log; check the file " + m->spec.path + ")")));
  } else {
    GLM_LOG_INFO("serve: model %s unloaded", m->spec.name.c_str());
  }
  // Room was freed: the model itself (asked for while it stopped) or another one waiting.
  if (m->wanted && try_start(*m)) return;
  for (Model& o : models_) {
    if (o.wanted && try_start(o)) return;
  }
}

void ModelManager::on_tick() {
  const auto now = Clock::now();
  for (Model& m : models_) {
    if (m.state == ModelState::kLoading) {
      auto ev = probe_engine(m.spec.socket, protocol::RequestType::kHealth, kProbeTimeoutMs);
      if (ev.ok() && ev->type == protocol::EventType::kHealth &&
          ev->instance == options_.instance) {
        m.load_done = ev->load_done_bytes;
        m.load_total = ev->load_total_bytes;
        if (ev->health == generation::Health::kReady) {
          m.state = ModelState::kLoaded;
          m.last_used = now;
          supervisor_->mark_up(m.spec.child);
          GLM_LOG_INFO("serve: model %s ready on %s", m.spec.name.c_str(), m.spec.socket.c_str());
          reply_ready(m);
        }
      }
    } else if (m.state == ModelState::kLoaded) {
      if (now - m.last_stats >= kStatsEvery) poll_stats(m, now);
      // Never sooner than kRecentUse after a use, whatever --keep-alive says: the request that
      // asked for it may not have reached its engine yet.
      const auto keep =
          std::max<Clock::duration>(std::chrono::seconds(options_.keep_alive_s), kRecentUse);
      if (options_.keep_alive_s >= 0 && m.busy == 0 && m.waiters.empty() &&
          now - m.last_used >= keep) {
        GLM_LOG_INFO("serve: unloading %s (idle for %d s, --keep-alive)", m.spec.name.c_str(),
                     options_.keep_alive_s);
        m.state = ModelState::kStopping;
        supervisor_->stop(m.spec.child);
      }
    }
    if (m.wanted) try_start(m);
    // Waiters past their bound get an answer that says why.
    for (auto it = m.waiters.begin(); it != m.waiters.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      std::string why =
          m.state == ModelState::kLoading
              ? "is still loading (" +
                    std::to_string(protocol::load_percent(m.load_done, m.load_total)) + "%)"
              : "is waiting for room (--max-loaded " + std::to_string(options_.max_loaded) +
                    ": every loaded model is busy)";
      it->reply(control_error_json(
          Status(ErrorCode::kUnavailable, "model '" + m.spec.name + "' " + why + "; retry soon")));
      it = m.waiters.erase(it);
    }
  }
}

std::string ModelManager::list_json() const {
  json models = json::array();
  const auto now = Clock::now();
  for (const Model& m : models_) {
    json j = {{"name", m.spec.name},
              {"state", model_state_name(m.state)},
              {"size_bytes", m.spec.size_bytes},
              {"socket", m.spec.socket}};
    if (m.state == ModelState::kLoading && m.load_total > 0) {
      j["load"] = {{"done_bytes", m.load_done},
                   {"total_bytes", m.load_total},
                   {"percent", protocol::load_percent(m.load_done, m.load_total)}};
    }
    if (!m.spec.adapters.empty()) {
      json adapters = json::array();
      for (const std::string& a : m.spec.adapters) {
        adapters.push_back(
            {{"name", models_serving(a) > 1 ? m.spec.name + ":" + a : a}, {"adapter", a}});
      }
      j["adapters"] = std::move(adapters);
    }
    if (m.state == ModelState::kLoaded) {
      j["idle_s"] = std::chrono::duration_cast<std::chrono::seconds>(now - m.last_used).count();
      const pid_t pid = supervisor_->pid(m.spec.child);
      if (pid > 0) j["pid"] = pid;
    }
    models.push_back(std::move(j));
  }
  return dump_json(json{{"ok", true},
                        {"default", models_.empty() ? "" : models_[0].spec.name},
                        {"models", std::move(models)}});
}

}  // namespace glm::serve
