// Helpers of the integration tests that run the glmserve binary (GLMSERVE_BIN) through the shell.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace glm::testing {

struct CliRun {
  int exit_code = -1;  // -1 if the command could not run or did not exit normally
  std::string out;     // stdout and stderr, merged
};

// Runs `cmd` with /bin/sh; returns its exit status and everything it wrote to stdout.
inline CliRun run_shell(const std::string& cmd) {
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `glmserve ARGS` (ARGS as shell words), stdout and stderr merged.
inline CliRun run_cli(const std::string& args) {
  return run_shell(std::string(GLMSERVE_BIN) + " " + args + " 2>&1");
}

}  // namespace glm::testing
