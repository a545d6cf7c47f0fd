// Helpers of the integration tests that run the glmserve binary (GLMSERVE_BIN) through the shell.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

// A file of ../shared/data (rel: its path there) and whether it can be read.
inline std::string shared(const std::string& rel) {
  return std::string(GLM_SHARED_DATA) + "/" + rel;
}
inline bool exists(const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }

// What a glmserve run wrote, stdout and stderr apart.
struct CliOutput {
  int code = -1;  // -1 if it did not exit normally
  std::string out, err;
};

// Runs glmserve with `args` (no shell) and `input` on stdin, capturing stdout and stderr.
inline CliOutput run_glmserve(const std::vector<std::string>& args, const std::string& input = "") {
  const std::string base = "/tmp/glm_cli_run_" + std::to_string(::getpid());
  const std::string in_path = base + ".in", out_path = base + ".out", err_path = base + ".err";
  std::ofstream(in_path, std::ios::binary) << input;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int i = ::open(in_path.c_str(), O_RDONLY);
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(i, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv{const_cast<char*>(GLMSERVE_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(GLMSERVE_BIN, argv.data());
    ::_exit(127);
  }
  auto slurp = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  };
  CliOutput r;
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  ::unlink(in_path.c_str());
  ::unlink(out_path.c_str());
  ::unlink(err_path.c_str());
  return r;
}

}  // namespace glm::testing
