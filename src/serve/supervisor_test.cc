// Supervisor with /bin/sh children: a child that exits with kExitNoRetry before it came up is
// not restarted (serve stops at once), another failure is retried until the quick-failure bound,
// and ChildSpec::env reaches the child's environment (how serve passes secrets, not in argv).
#include "serve/supervisor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace glm::serve {
namespace {

// Runs one child `sh -c SCRIPT` with `env`; returns run()'s code and counts the starts.
int run_child(const std::string& script, std::vector<std::string> env, int* starts) {
  ChildSpec c{"child", "/bin/sh", {"sh", "-c", script}};
  c.env = std::move(env);
  SupervisorOptions o;
  o.initial_backoff = std::chrono::milliseconds(1);
  o.max_backoff = std::chrono::milliseconds(2);
  o.tick = std::chrono::milliseconds(5);
  Supervisor s({c}, o);
  *starts = 0;
  s.on_start = [&](size_t, pid_t) { ++*starts; };
  return s.run();
}

TEST(Supervisor, AChildThatExitsWithNoRetryIsNotRestarted) {
  int starts = 0;
  EXPECT_EQ(run_child("exit 3", {}, &starts), 1);
  EXPECT_EQ(starts, 1);
  // Any other quick failure is retried up to the bound (5 in a row) before giving up.
  EXPECT_EQ(run_child("exit 1", {}, &starts), 1);
  EXPECT_EQ(starts, 5);
}

TEST(Supervisor, EnvReachesTheChildAndReplacesTheSupervisorsOwn) {
  ::setenv("GLM_SUPERVISOR_TEST_KEY", "old", 1);
  int starts = 0;
  // Exits kExitNoRetry (one start) only when it sees the spec's value, not the inherited one.
  const std::string script = "[ \"$GLM_SUPERVISOR_TEST_KEY\" = new ] && exit 3; exit 1";
  EXPECT_EQ(run_child(script, {"GLM_SUPERVISOR_TEST_KEY=new"}, &starts), 1);
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(run_child(script, {}, &starts), 1);
  EXPECT_EQ(starts, 5);
  ::unsetenv("GLM_SUPERVISOR_TEST_KEY");
}

}  // namespace
}  // namespace glm::serve
