#include "cli/secret.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/log.h"

namespace glm::cli {

StatusOr<std::string> read_secret(const Args& args, const SecretSource& source) {
  const bool flag = source.flag != nullptr && args.has(source.flag);
  const bool file = source.file_flag != nullptr && args.has(source.file_flag);
  if (flag && file) {
    return invalid_argument(std::string("give --") + source.flag + " or --" + source.file_flag +
                            ", not both");
  }
  if (flag) return args.get(source.flag);
  if (file) {
    const std::string path = args.get(source.file_flag);
    std::ifstream in(path);
    if (!in) {
      return invalid_argument(std::string("--") + source.file_flag + ": cannot read '" + path +
                              "' (" + std::strerror(errno) + ")");
    }
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    if (line.empty()) {
      return invalid_argument(std::string("--") + source.file_flag + ": '" + path +
                              "' is empty (put the key on its first line)");
    }
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0044) != 0) {
      GLM_LOG_WARN("--%s: %s is readable by other users (chmod 600 %s)", source.file_flag,
                   path.c_str(), path.c_str());
    }
    return line;
  }
  const char* env = source.env != nullptr ? std::getenv(source.env) : nullptr;
  return std::string(env != nullptr ? env : "");
}

void blank_flag_value(int argc, char** argv, const char* name) {
  const std::string flag = std::string("--") + name;
  for (int i = 1; i < argc; ++i) {
    char* value = nullptr;
    if (flag == argv[i] && i + 1 < argc) {
      value = argv[i + 1];
    } else if (std::strncmp(argv[i], flag.c_str(), flag.size()) == 0 &&
               argv[i][flag.size()] == '=') {
      value = argv[i] + flag.size() + 1;
    }
    if (value != nullptr) std::memset(value, 'x', std::strlen(value));
  }
}

}  // namespace glm::cli
