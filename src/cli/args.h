// Args: the small command-line parser shared by every subcommand.
//   glmserve run --model m.gguf --prompt "hi" -n 32 --raw
// Flags are "--name value" or "--name=value"; boolean flags take no value; "-x" is an alias
// declared by the command. Unknown flags are an error that names the flag and the help command.
// A command that knows --model also takes --models-dir, and its --model (and --draft) may be a
// model name of the local store ("chatglm3-6b:q4_0"), resolved to the file here (hub/store.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace glm::cli {

// llama.cpp's short names of the flags its users type first (llama-cli's, llama-server's and
// llama-bench's -m, -c, -ngl, -t), with the command's own `extra`. A command that does not know
// a name's flag refuses it as an unknown flag, named as typed.
std::map<std::string, std::string> llama_cpp_aliases(std::map<std::string, std::string> extra = {});

class Args {
 public:
  // `bool_flags`: names (without dashes) that take no value. `aliases`: {"n", "max-tokens"}.
  static StatusOr<Args> parse(int argc, char** argv, const std::set<std::string>& known_flags,
                              const std::set<std::string>& bool_flags = {},
                              const std::map<std::string, std::string>& aliases = {});

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  // A clear error ("--threads: expected an integer, got 'x'") on a malformed value.
  StatusOr<int64_t> get_int(const std::string& name, int64_t def) const;
  StatusOr<double> get_float(const std::string& name, double def) const;
  // Comma-separated integers: "1,2,3".
  StatusOr<std::vector<int32_t>> get_int_list(const std::string& name) const;
  // Required flag: invalid_argument "missing --model (see glmserve CMD --help)".
  StatusOr<std::string> require(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // For a command that takes no other argument: a lone argument is its --model ("glmserve serve
  // M.gguf", as Ollama's and llama.cpp's users type it), resolved as --model is. Any other
  // argument, or one beside --model, is an error that names it.
  Status model_from_positional();
  // Every value of a flag given several times, in order, as typed (get() has the last, and a
  // --model there is resolved to its file; these are not). Empty when absent.
  std::vector<std::string> get_all(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_;  // every value of each flag
  std::vector<std::string> positional_;
};

// Prints "glmserve: <message>" to stderr and returns the exit code 1 (or 2 for usage errors).
int fail(const Status& status);

}  // namespace glm::cli
