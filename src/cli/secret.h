// Secrets on the command line of `web` and `serve` (the API key, the /metrics key): read from a
// flag, a file or the environment, and kept off every command line, since /proc/PID/cmdline
// (what `ps` shows) is readable by every local user.
//   --api-key K          accepted for compatibility; blanked in this process's own argv once
//                        read (as the MySQL client does with its password), so `ps` shows
//                        --api-key xxxx from then on (it was visible until then, and stays in
//                        shell history: prefer the file or the environment)
//   --api-key-file F     the first line of F (a trailing newline and spaces dropped)
//   GLMSERVE_API_KEY     the environment (readable only by the same user)
// Not thread-safe (writes argv): call from main's thread before starting others. Cost: one
// small file read.
#pragma once

#include <string>

#include "cli/args.h"
#include "core/status.h"

namespace glm::cli {

struct SecretSource {
  const char* flag;       // "api-key" (a value on the command line), or nullptr: none
  const char* file_flag;  // "api-key-file"
  const char* env;        // "GLMSERVE_API_KEY"
};

// The secret from the first source given: the flag, the file, the environment; "" when none is.
// A flag and a file both given, an unreadable or empty file, are an error naming the flag.
StatusOr<std::string> read_secret(const Args& args, const SecretSource& source);

// Overwrites the value of `--NAME V` / `--NAME=V` in argv with 'x's (the same length), so the
// process's command line no longer shows it.
void blank_flag_value(int argc, char** argv, const char* name);

}  // namespace glm::cli
