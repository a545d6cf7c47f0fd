// ModelManager: which of `serve`'s models have an engine running, for
// `glmserve serve --model A --model B` and `--models-dir D` (docs/operations.md, "Several
// models"). Each model has its own engine child in the Supervisor (on-demand, its own socket);
// the manager starts it on the first request for the model (ensure), answers every request
// waiting for it once its engine says ready (one start, however many wait), stops it after
// `keep_alive_s` idle seconds, and makes room under `max_loaded` / `max_memory_bytes` by stopping
// the least recently used idle engine. An engine with requests in flight is never stopped.
//
// Idle is read from the engines themselves: each loaded engine's stats are polled about every
// second (a request running, queued, or a new one counted since the last poll = used now), and an
// ensure counts as a use, so a request that asked for its engine a moment ago protects it.
//
// The gateway asks through the control socket (control_server.h); replies go to the callback the
// request came with, now or when the model is ready (or failed, or waited too long).
//
// Thread-safety: none; every method runs on the supervisor's loop thread (its callbacks).
// Cost: on_tick() probes loading engines (health) each tick and loaded ones (stats) each second:
// one socket round trip each.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "serve/supervisor.h"

namespace glm::serve {

struct ManagedModel {
  std::string name;         // what requests say: "chatglm3-6b:q4_0", or the file's stem
  std::string path;         // the GGUF file
  std::string socket;       // its engine's socket
  uint64_t size_bytes = 0;  // the file's size: the memory estimate (weights are mmapped)
  size_t child = 0;         // its engine's index in the Supervisor
  // Adapters its engine serves per request (serve --adapter NAME=PATH: each onto every served
  // model it fits); requests name one as "NAME" or "MODEL:NAME" (docs/adapters.md).
  std::vector<std::string> adapters;
};

struct ManagerOptions {
  int keep_alive_s = 300;         // idle seconds before an engine stops; < 0 = never
  int max_loaded = 0;             // engines running at once; 0 = no limit
  uint64_t max_memory_bytes = 0;  // sum of the running models' file sizes; 0 = no limit
  int wait_ms = 300000;           // an ensure waits this long for its engine (load, or room)
  std::string instance;           // serve's token, echoed by its engines' health
};

enum class ModelState { kUnloaded, kLoading, kLoaded, kStopping };
const char* model_state_name(ModelState s);  // "unloaded", "loading", "loaded", "stopping"

class ModelManager {
 public:
  // Reply line (JSON, no newline) for one control request.
  using Reply = std::function<void(const std::string&)>;

  ModelManager(std::vector<ManagedModel> models, ManagerOptions options, Supervisor* supervisor);

  // Control requests. ensure: {"ok":true,"model":..,"socket":..} once `name`'s engine is ready
  // ("" = the first model), or {"ok":false,"code":..,"message":..}: not_found naming the models,
  // internal when its engine failed to load, unavailable after wait_ms. `name` may name an
  // adapter ("MODEL:NAME", or "NAME" = the first model serving it): the reply then carries
  // "adapter":NAME and the socket of its model's engine.
  // models: {"ok":true,"default":..,"models":[{"name","state","size_bytes","socket",
  // "adapters":[{"name","adapter"}]?,"load"?,...}]}, each adapter listed by the name that
  // selects it ("NAME" where one model serves it, else "MODEL:NAME").
  void ensure(const std::string& name, Reply reply);
  std::string list_json() const;

  // Supervisor hooks (cmd_serve wires them).
  void on_tick();
  void on_start(size_t child);
  void on_exit(size_t child, const std::string& how);

  // Engine starts so far (tests read it from the log line each start writes).
  int starts() const { return starts_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiter {
    Reply reply;
    Clock::time_point deadline;
    std::string adapter;  // what it asked for, on this model ("" = the bare model)
  };
  struct Model {
    ManagedModel spec;
    ModelState state = ModelState::kUnloaded;
    bool wanted = false;  // a start is due (waiters, no room yet or its engine still stopping)
    std::vector<Waiter> waiters;
    Clock::time_point last_used{};
    Clock::time_point last_stats{};
    long long requests_total = -1;  // at the last stats poll
    int busy = 0;                   // running + queued at the last stats poll
    uint64_t load_done = 0, load_total = 0;
  };

  Model* find(const std::string& name);
  // The model and adapter a request's name selects (see ensure); model null when none.
  std::pair<Model*, std::string> resolve(const std::string& name);
  int models_serving(const std::string& adapter) const;
  Model* by_child(size_t child);
  std::string names() const;
  // Starts `m`'s engine when there is room; else stops the least recently used idle engine
  // (its exit retries). Returns true when it started.
  bool try_start(Model& m);
  bool has_room(const Model& m) const;
  Model* pick_victim(const Model& for_model);
  void reply_all(Model& m, const std::string& line);
  void reply_ready(Model& m);  // each waiter its model's socket and its adapter
  void poll_stats(Model& m, Clock::time_point now);

  std::vector<Model> models_;
  ManagerOptions options_;
  Supervisor* supervisor_;
  int starts_ = 0;
};

// The reply lines of the control protocol (also used by the tests).
std::string control_error_json(const Status& status);

}  // namespace glm::serve
