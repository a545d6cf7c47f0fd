#include <cstdio>
#include <cstring>

#include "cli/commands.h"

namespace glm::cli {

int cmd_bench(int argc, char** argv) {
  if (argc >= 1 && std::strcmp(argv[0], "engine") == 0) return cmd_bench_engine(argc - 1, argv + 1);
  if (argc >= 1 && std::strcmp(argv[0], "serve") == 0) return cmd_bench_serve(argc - 1, argv + 1);
  std::fprintf(argc >= 1 && wants_help(argc, argv) ? stdout : stderr,
               "usage: glmserve bench engine --model M [-p 512] [-n 128] [-t T] [--json]\n"
               "       glmserve bench serve ...   (serving latency at each layer)\n");
  return argc >= 1 && wants_help(argc, argv) ? 0 : 2;
}

}  // namespace glm::cli
