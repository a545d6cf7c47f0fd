// glmserve: one binary, many subcommands (the contract: docs/cli.md).
#include <cstdio>
#include <cstring>

#include "cli/commands.h"
#include "kernels/isa.h"

namespace {

struct Command {
  const char* name;
  int (*fn)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"serve", glm::cli::cmd_serve, "engine + web gateway, supervised: the one-command server"},
    {"chat", glm::cli::cmd_chat, "terminal chat with a model, multi-turn"},
    {"run", glm::cli::cmd_run, "one generation streamed to stdout"},
    {"engine", glm::cli::cmd_engine, "model service on a Unix socket (newline-delimited JSON)"},
    {"web", glm::cli::cmd_web, "HTTP gateway: web chat page and OpenAI-compatible API"},
    {"bench", glm::cli::cmd_bench, "engine and serving benchmarks"},
    {"eval", glm::cli::cmd_eval, "print logits or hidden states for given tokens (JSON lines)"},
    {"tokenize", glm::cli::cmd_tokenize, "text to token ids, or ids back to text"},
    {"template", glm::cli::cmd_template, "chat prompt ids for a list of messages"},
    {"gen-model", glm::cli::cmd_gen_model, "write a random-weight model (GGUF) for tests"},
    {"convert", glm::cli::cmd_convert, "HuggingFace checkpoint directory to GGUF"},
    {"quantize", glm::cli::cmd_quantize, "re-quantize a GGUF file to another weight type"},
    {"pull", glm::cli::cmd_pull, "download a model from a Hugging Face-compatible hub"},
    {"list", glm::cli::cmd_list, "list the models of the local store"},
    {"devices", glm::cli::cmd_devices, "list the compute devices (CPU, Vulkan GPUs)"},
    {"rm", glm::cli::cmd_rm, "remove a model from the local store"},
};

void print_usage() {
  std::printf("glmserve %s: serve ChatGLM models on your own machine\n\n", GLMSERVE_VERSION);
  std::printf("usage: glmserve <command> [flags]   (glmserve <command> --help for its flags)\n\n");
  for (const Command& c : kCommands) std::printf("  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "version") == 0) {
    std::printf("glmserve %s\n", GLMSERVE_VERSION);
    return 0;
  }
  // The kernels' instruction set, chosen once for the process (GLMSERVE_ISA or the CPU's best).
  if (const glm::Status s = glm::kernels::init_isa_from_env(); !s.ok()) {
    std::fprintf(stderr, "glmserve: %s\n", s.message().c_str());
    return 2;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.fn(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "glmserve: unknown command '%s' (run glmserve --help for the list)\n",
               argv[1]);
  return 2;
}
