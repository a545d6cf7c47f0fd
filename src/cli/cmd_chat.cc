// glmserve chat: terminal chat, multi-turn. Reads one message per line from stdin (a terminal or
// a pipe); each turn reuses the KV cache of the previous ones (the engine's conversation reuse),
// so only the new message is prefilled. Ctrl-C stops the answer being written (its partial text
// stays in the conversation, as llama-cli keeps it); at the prompt it ends the session.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "core/log.h"
#include "engine/engine.h"

namespace glm::cli {
namespace {

constexpr const char* kHelp =
    "usage: glmserve chat --model M.gguf [flags]\n"
    "Terminal chat. Type a message and press Enter; /reset starts a new conversation, /exit\n"
    "(or end of input, or Ctrl-C at the prompt) quits; Ctrl-C during an answer stops it.\n"
    "Works with a pipe: one message per line.\n"
    "  --system TEXT        system prompt\n"
    "  --verbose            timings of each turn on stderr (cached tokens, ttft, speed)\n";

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted.store(true); }

// SIGINT sets g_interrupted instead of killing the process; a blocked read returns (no
// SA_RESTART), so Ctrl-C at the prompt ends the input.
void catch_sigint() {
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

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

  // On a terminal the engine's progress lines would interleave with the chat: only warnings
  // and errors are shown (--verbose keeps them all).
  if (tty && !verbose && log_level() < LogLevel::kWarn) set_log_level(LogLevel::kWarn);
  if (tty) {
    std::printf("loading %s ...\n", options->model_path.c_str());
    std::fflush(stdout);
  }
  auto loaded = engine::load_engine(*options);
  if (!loaded.ok()) return fail(loaded.status());
  engine::Engine& engine = **loaded;
  catch_sigint();

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
    g_interrupted.store(false);
    if (!std::getline(std::cin, line) || g_interrupted.load()) break;
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
    const std::string request_id = request.id;
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
    bool stopped = false;
    while (!gen.wait_for(50)) {
      if (g_interrupted.exchange(false) && !stopped) {
        engine.cancel(request_id);  // the answer ends with finish_reason cancelled
        stopped = true;
      }
    }
    const engine::Event done = gen.wait();
    if (stopped && tty) std::fputs(" [stopped]", stdout);
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
  if (tty) std::fputc('\n', stdout);
  engine.drain(std::chrono::milliseconds(0));
  return 0;
}

}  // namespace glm::cli
