#include <cstring>

#include "cli/commands.h"

namespace glm::cli {

bool wants_help(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  }
  return false;
}

}  // namespace glm::cli
