#include "serve/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/log.h"

extern char** environ;

namespace glm::serve {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPassedFd = 3;  // ChildSpec::pass_fd arrives as this descriptor

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "stopped (status " + std::to_string(status) + ")";
}

}  // namespace

Supervisor::Supervisor(std::vector<ChildSpec> children, SupervisorOptions options)
    : options_(options) {
  for (auto& spec : children) {
    Child c;
    c.spec = std::move(spec);
    c.backoff = options_.initial_backoff;
    c.wanted = !c.spec.on_demand;
    children_.push_back(std::move(c));
  }
}

bool Supervisor::spawn(Child& child) {
  // Everything the child needs is prepared before fork(): after it, only async-signal-safe calls.
  std::vector<char*> argv;
  for (auto& a : child.spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The supervisor's environment, less the names the spec sets, then the spec's entries.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool replaced = std::any_of(child.spec.env.begin(), child.spec.env.end(), [&](auto& x) {
      const size_t eq = x.find('=');
      return entry.size() > eq && entry.compare(0, eq + 1, x, 0, eq + 1) == 0;
    });
    if (!replaced) envp.push_back(*e);
  }
  for (auto& x : child.spec.env) envp.push_back(const_cast<char*>(x.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    GLM_LOG_ERROR("serve: cannot start %s: fork: %s", child.spec.name.c_str(),
                  std::strerror(errno));
    return false;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the supervisor died before prctl
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (child.spec.pass_fd == kPassedFd) {
      ::fcntl(kPassedFd, F_SETFD, 0);  // keep it across exec
    } else if (child.spec.pass_fd >= 0 && ::dup2(child.spec.pass_fd, kPassedFd) < 0) {
      ::_exit(127);
    }
    ::execve(child.spec.path.c_str(), argv.data(), envp.data());
    static const char kMsg[] = "glmserve serve: exec failed\n";
    ssize_t ignored = ::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    ::_exit(127);
  }
  child.pid = pid;
  child.started = Clock::now();
  GLM_LOG_INFO("serve: started %s (pid %d)", child.spec.name.c_str(), static_cast<int>(pid));
  if (on_start) on_start(static_cast<size_t>(&child - children_.data()), pid);
  return true;
}

void Supervisor::mark_up(size_t index) {
  if (index < children_.size()) children_[index].came_up = true;
}

void Supervisor::start(size_t index) {
  Child& c = children_[index];
  if (c.wanted) return;
  c.wanted = true;
  c.came_up = false;
  c.quick_failures = 0;
  c.backoff = options_.initial_backoff;
  if (c.pid < 0 && !spawn(c)) c.restart_at = Clock::now() + c.backoff;
}

void Supervisor::stop(size_t index) {
  Child& c = children_[index];
  if (!c.wanted) return;
  c.wanted = false;
  if (c.pid > 0) {
    GLM_LOG_INFO("serve: stopping %s (pid %d)", c.spec.name.c_str(), static_cast<int>(c.pid));
    ::kill(c.pid, SIGTERM);
  } else if (on_exit) {
    on_exit(index, "was not running");
  }
}

void Supervisor::watch(int fd, std::function<void()> on_readable) {
  watched_.emplace_back(fd, std::move(on_readable));
}

void Supervisor::unwatch(int fd) {
  for (auto it = watched_.begin(); it != watched_.end(); ++it) {
    if (it->first == fd) {
      watched_.erase(it);
      return;
    }
  }
}

void Supervisor::signal_all(int sig) {
  for (const Child& c : children_) {
    if (c.pid > 0) ::kill(c.pid, sig);
  }
}

bool Supervisor::any_alive() const {
  for (const Child& c : children_) {
    if (c.pid > 0) return true;
  }
  return false;
}

void Supervisor::reap(bool stopping, int* rc, bool* give_up) {
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (Child& c : children_) {
      if (c.pid != pid) continue;
      c.pid = -1;
      const auto now = Clock::now();
      const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(now - c.started);
      const bool clean = (WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
                         (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
      if (stopping) {
        if (!clean) *rc = 1;
        GLM_LOG_INFO("serve: %s %s", c.spec.name.c_str(), describe_status(status).c_str());
        break;
      }
      const size_t index = static_cast<size_t>(&c - children_.data());
      if (!c.wanted || (c.spec.on_demand && !c.came_up)) {
        if (c.wanted) {
          GLM_LOG_ERROR(
              "serve: %s %s before it was ready; not restarted (see its messages "
              "above)",
              c.spec.name.c_str(), describe_status(status).c_str());
        } else {
          GLM_LOG_INFO("serve: %s %s", c.spec.name.c_str(), describe_status(status).c_str());
        }
        c.wanted = false;
        if (on_exit) on_exit(index, describe_status(status));
        break;
      }
      if (ran >= options_.stable_after) {
        c.backoff = options_.initial_backoff;
        c.quick_failures = 0;
      }
      c.quick_failures = ran < options_.quick_failure ? c.quick_failures + 1 : 0;
      if (!c.came_up && WIFEXITED(status) && WEXITSTATUS(status) == kExitNoRetry) {
        GLM_LOG_ERROR(
            "serve: %s %s: its error will not change on retry (its message is above); "
            "stopping",
            c.spec.name.c_str(), describe_status(status).c_str());
        *give_up = true;
        break;
      }
      if (!c.came_up && c.quick_failures >= options_.max_quick_failures) {
        GLM_LOG_ERROR(
            "serve: %s %s; it failed %d times in a row right after starting, giving "
            "up (see its messages above)",
            c.spec.name.c_str(), describe_status(status).c_str(), c.quick_failures);
        *give_up = true;
        break;
      }
      GLM_LOG_WARN("serve: %s %s after %.1f s; restarting in %lld ms", c.spec.name.c_str(),
                   describe_status(status).c_str(), ran.count() / 1000.0,
                   static_cast<long long>(c.backoff.count()));
      c.restart_at = now + c.backoff;
      c.backoff = std::min(c.backoff * 2, options_.max_backoff);
      break;
    }
  }
}

int Supervisor::run() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  const int sfd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) {
    GLM_LOG_ERROR("serve: signalfd: %s", std::strerror(errno));
    return 1;
  }

  for (Child& c : children_) {
    if (c.wanted && !spawn(c)) c.restart_at = Clock::now() + c.backoff;
  }
  bool stopping = false;
  int rc = 0;
  Clock::time_point kill_at{};
  auto next_tick = Clock::now();
  for (;;) {
    const auto now = Clock::now();
    if (now >= next_tick) {
      if (on_tick && !stopping) on_tick();
      next_tick = now + options_.tick;
    }
    auto wake = next_tick;
    for (const Child& c : children_) {
      if (c.pid < 0 && c.wanted && !stopping && c.restart_at < wake) wake = c.restart_at;
    }
    if (stopping && kill_at < wake) wake = kill_at;
    const auto wait_ms = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count() + 1);
    std::vector<pollfd> fds = {{sfd, POLLIN, 0}};
    if (!stopping) {  // stopping: only signals and children matter
      for (const auto& w : watched_) fds.push_back({w.first, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(wait_ms, 60000)));
    // A callback may watch or unwatch: the ready ones are collected first.
    std::vector<std::function<void()>> ready;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      for (const auto& w : watched_) {
        if (w.first == fds[i].fd) ready.push_back(w.second);
      }
    }
    for (auto& cb : ready) cb();
    std::vector<int> sigs;  // each stop signal counts: a second one kills at once
    signalfd_siginfo si;
    while (::read(sfd, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
      if (si.ssi_signo != SIGCHLD) sigs.push_back(static_cast<int>(si.ssi_signo));
    }
    for (const int sig : sigs) {
      if (!stopping) {
        GLM_LOG_INFO("serve: %s received; stopping the children gracefully", strsignal(sig));
        stopping = true;
        kill_at = Clock::now() + options_.stop_timeout;
        signal_all(SIGTERM);
      } else {
        GLM_LOG_WARN("serve: second signal; killing the children");
        signal_all(SIGKILL);
        rc = 1;
      }
    }
    bool give_up = false;
    reap(stopping, &rc, &give_up);
    if (give_up && !stopping) {
      stopping = true;
      rc = 1;
      kill_at = Clock::now() + options_.stop_timeout;
      signal_all(SIGTERM);
    }
    if (stopping) {
      if (!any_alive()) break;
      if (Clock::now() >= kill_at) {
        GLM_LOG_WARN("serve: children still running after %lld ms; killing them",
                     static_cast<long long>(options_.stop_timeout.count()));
        signal_all(SIGKILL);
        rc = 1;
        kill_at = Clock::now() + std::chrono::seconds(5);
      }
      continue;
    }
    for (Child& c : children_) {
      if (c.pid < 0 && c.wanted && Clock::now() >= c.restart_at) {
        if (!spawn(c)) c.restart_at = Clock::now() + c.backoff;
      }
    }
  }
  ::close(sfd);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  return rc;
}

}  // namespace glm::serve
