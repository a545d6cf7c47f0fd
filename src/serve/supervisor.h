// Supervisor: runs child processes (`glmserve engine`, `glmserve web`) and keeps them running:
// a child that dies is restarted with exponential backoff (reset once it has run stably), and
// the others are left alone: a crash loop of one child never stops another. The supervisor
// gives up (exit 1) only on a child that never came up (see mark_up) and keeps failing right
// after start: a bad model file or flag, which no restart mends. A child that came up once is
// restarted for as long as the supervisor runs (at most max_backoff apart). SIGTERM, SIGINT or
// SIGHUP are forwarded once as SIGTERM (each child drains), children still alive after stop_timeout
// get SIGKILL, and a second signal kills at once. Children run in their own process group (a
// terminal's Ctrl-C reaches only the supervisor, which forwards it once) and get SIGTERM if the
// supervisor dies (PR_SET_PDEATHSIG).
//
// On-demand children (ChildSpec::on_demand: the engines of `serve --model A --model B`) start
// only when start(i) is called and stop for good on stop(i) (SIGTERM: they drain). One that exits
// before it came up is not restarted (a model that fails to load fails the same way again):
// on_exit tells the owner, and the next start(i) tries again. Once up, it is restarted like any
// other child until stop(i).
//
// Thread-safety: run() blocks SIGCHLD/SIGTERM/SIGINT/SIGHUP in the calling thread and reads
// them from a signalfd in its poll loop, beside the descriptors given to watch(); call it from
// the main thread of a process that has started no other threads (signals must be blocked
// process-wide). Every callback runs on that thread, and start/stop/watch are called from them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace glm::serve {

// The exit code of a child whose start failed in a way no retry mends (the engine: a model file
// that cannot load, a bad flag): a child that exits with it before it came up is not restarted,
// and the supervisor stops at once (the child's own last line says why).
constexpr int kExitNoRetry = 3;
// The engine's exit code when its model cannot run any more after it came up (a lost GPU:
// docs/gpu.md#failures): a fresh engine may run again, so it is restarted as any crash is.
constexpr int kExitDeviceLost = 4;

struct ChildSpec {
  std::string name;               // for logs: "engine", "web"
  std::string path;               // executable ("/proc/self/exe")
  std::vector<std::string> argv;  // argv[0] included
  // A descriptor the child inherits as fd 3 (the gateway's listening socket, which the
  // supervisor keeps open, so the port stays its own across restarts); -1 = none. Every
  // other descriptor of the supervisor should be close-on-exec.
  int pass_fd = -1;
  bool on_demand = false;  // not started by run(): start(i) / stop(i)
  // "NAME=VALUE" entries set in the child's environment (replacing the supervisor's own NAME):
  // how secrets reach a child, since a command line is readable by every local user (`ps`) and
  // an environment only by the same user (/proc/PID/environ is 0400).
  std::vector<std::string> env;
};

struct SupervisorOptions {
  std::chrono::milliseconds initial_backoff{100};  // the first restart: soon (answers wait)
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds stable_after{60000};   // a run this long resets the backoff
  std::chrono::milliseconds quick_failure{10000};  // a failure sooner than this is "quick"
  int max_quick_failures = 5;  // in a row, for a child that never came up: give up
  std::chrono::milliseconds stop_timeout{35000};  // SIGTERM -> SIGKILL
  std::chrono::milliseconds tick{200};            // on_tick period
};

class Supervisor {
 public:
  Supervisor(std::vector<ChildSpec> children, SupervisorOptions options);

  // Called about every `tick` while running (readiness checks, logs). May be empty.
  std::function<void()> on_tick;
  // Called after a child (re)started, with its index and pid.
  std::function<void(size_t, pid_t)> on_start;

  // Child `index` came up (its readiness check passed, e.g. from on_tick): from now on its
  // failures are restarted without end instead of counting towards giving up. Call from the
  // thread that runs run() (on_tick, on_start).
  void mark_up(size_t index);

  // On-demand children: start one that is not running (a no-op when it runs or is due to
  // restart), or stop one (SIGTERM once; never restarted until the next start()).
  void start(size_t index);
  void stop(size_t index);
  // The child's pid, or -1 when it is not running.
  pid_t pid(size_t index) const { return children_[index].pid; }
  // Called when a child exited and will not be restarted (stop(), or an on-demand child that
  // never came up), with how it ended ("exited with code 1"). Not called while serve stops.
  std::function<void(size_t, const std::string&)> on_exit;

  // Calls `on_readable` from run()'s loop whenever `fd` is readable (or hung up); unwatch()
  // before closing it.
  void watch(int fd, std::function<void()> on_readable);
  void unwatch(int fd);

  // Runs until stopped by a signal (returns 0 if every child stopped cleanly, else 1) or until
  // a child that never came up keeps failing at startup (returns 1).
  int run();

 private:
  struct Child {
    ChildSpec spec;
    pid_t pid = -1;
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point restart_at;  // when dead and not stopping
    std::chrono::milliseconds backoff{0};
    int quick_failures = 0;
    bool came_up = false;  // mark_up() was called for it once: never given up on
    bool wanted = true;    // runs, or is restarted when it dies (false: on-demand and stopped)
  };

  bool spawn(Child& child);
  void reap(bool stopping, int* rc, bool* give_up);
  void signal_all(int sig);
  bool any_alive() const;

  std::vector<Child> children_;
  SupervisorOptions options_;
  std::vector<std::pair<int, std::function<void()>>> watched_;
};

}  // namespace glm::serve
