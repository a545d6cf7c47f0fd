// glmserve chat: terminal chat, multi-turn. Reads one message per line from stdin (a terminal or
// a pipe); each turn reuses the KV cache of the previous ones (the engine's conversation reuse),
// so only the new message is prefilled.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "engine/engine.h"

namespace glm::cli {
namespace {

constexpr const char* kHelp =
    "usage: glmserve chat --model M.gguf [flags]\n"
    "Terminal chat. Type a message and press Enter; /reset starts a new conversation, /exit\n"
    "(or end of input) quits. Works with a pipe: one message per line.\n"
    "  --system TEXT        system prompt\n"
    "  --verbose            timings of each turn on stderr (cached tokens, ttft, speed)\n";

}  // namespace

int cmd_chat(int argc, char** argv) {
  if (wants_help(argc, argv)) {
    std::fputs(kHelp, stdout);
    std::fputs(kGenerateFlagsHelp, stdout);
    return 0;
  }
  std::set<std::string> flags = kGenerateFlags;
  flags.insert("system");
  StatusOr<Args> args = Args::parse(argc, argv, flags, {"verbose"}, kGenerateAliases);
  if (!args.ok()) return fail(args.status());
  StatusOr<engine::Options> options = engine_options(*args);
  if (!options.ok()) return fail(options.status());
  StatusOr<engine::SamplingParams> params = sampling_params(*args, 1024);
  if (!params.ok()) return fail(params.status());
  const bool verbose = args->has("verbose");
  const bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);

  auto loaded = engine::load_engine(*options);
  if (!loaded.ok()) return fail(loaded.status());
  engine::Engine& engine = **loaded;

  std::vector<tok::Message> history;
  if (args->has("system")) history.push_back({"system", args->get("system")});
  const size_t n_fixed = history.size();
  int conversation = 0, turn = 0;
  if (tty) std::printf("glmserve chat with %s (/reset, /exit)\n", engine.model_name().c_str());
  std::string line;
  for (;;) {
    if (tty) {
      std::printf("> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(n_fixed);
      ++conversation;
      if (tty) std::printf("(new conversation)\n");
      continue;
    }
    history.push_back({"user", line});
    engine::Request request;
    request.id = "turn-" + std::to_string(++turn);
    request.conversation = "chat-" + std::to_string(conversation);
    request.messages = history;
    request.params = *params;
    Generation gen(stdout);
    const Status st = engine.submit(std::move(request), gen.sink());
    if (!st.ok()) {
      history.pop_back();
      std::fprintf(stderr, "glmserve: %s\n", st.message().c_str());
      continue;
    }
    const engine::Event done = gen.wait();
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (done.type == engine::EventType::kError) {
      history.pop_back();
      std::fprintf(stderr, "glmserve: %s\n", done.error.message().c_str());
      continue;
    }
    if (!gen.notice().empty()) std::fprintf(stderr, "glmserve: %s\n", gen.notice().c_str());
    history.push_back({"assistant", gen.text()});
    if (verbose) std::fprintf(stderr, "[%s]\n", summary_line(done).c_str());
  }
  engine.drain(std::chrono::milliseconds(0));
  return 0;
}

}  // namespace glm::cli
