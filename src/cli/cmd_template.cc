// Placeholder until this command lands; it fails loudly rather than pretending.
#include <cstdio>

#include "cli/commands.h"

namespace glm::cli {

int cmd_template(int argc, char** argv) {
  std::fprintf(stderr, "glmserve: 'template' is not built yet in this version\n");
  return 1;
}

}  // namespace glm::cli
