// glmserve chat: terminal chat, multi-turn. Reads one message per line from stdin (a terminal or
// a pipe); each turn reuses the KV cache of the previous ones (the engine's conversation reuse),
// so only the new message is prefilled. Ctrl-C stops the answer being written (its partial text
// stays in the conversation, as llama-cli keeps it); at the prompt it ends the session.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/generate_common.h"
#include "cli/line_reader.h"
#include "core/log.h"
#include "core/progress.h"
#include "engine/engine.h"

namespace glm::cli {
namespace {

constexpr const char* kHelp =
    "usage: glmserve chat --model M.gguf [flags]\n"
    "Terminal chat. Type a message and press Enter (line editing and history on a terminal,\n"
    "kept in $XDG_STATE_HOME/glmserve/chat_history). Ctrl-C during an answer stops it and keeps\n"
    "the session; Ctrl-C or Ctrl-D at the prompt, or /exit, quits. Works with a pipe: one\n"
    "message per line. Commands:\n"
    "  /reset               a new conversation (the system prompt stays)\n"
    "  /system TEXT         a new conversation with this system prompt (/system alone: none)\n"
    "  /save FILE           write the conversation as JSON ({\"messages\": [...]}, what\n"
    "                       glmserve template --messages reads)\n"
    "  /help, /exit\n"
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

// /save FILE: the conversation as {"messages": [{"role", "content"}...]}.
Status save_conversation(const std::string& path, const std::vector<tok::Message>& history) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const tok::Message& m : history) {
    messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  std::ofstream out(path, std::ios::trunc);
  out << nlohmann::ordered_json{{"messages", messages}}.dump(2) << "\n";
  out.close();
  if (!out) return Status(ErrorCode::kInternal, "cannot write '" + path + "'");
  return Status();
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
  if (Status st = args->model_from_positional(); !st.ok()) return fail(st);
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
  ProgressLine loading = ProgressLine::on_stderr("loading");  // a terminal only
  options->load_progress = loading.fn();
  auto loaded = engine::load_engine(*options);
  loading.finish();
  if (!loaded.ok()) return fail(loaded.status());
  engine::Engine& engine = **loaded;
  catch_sigint();

  std::vector<tok::Message> history;
  std::string system = args->get("system");
  int conversation = -1, turn = 0;
  auto reset = [&] {
    history.clear();
    if (!system.empty()) history.push_back({"system", system});
    ++conversation;
  };
  reset();
  if (tty) {
    std::printf("glmserve chat with %s (/help for commands, Ctrl-D to quit)\n",
                engine.model_name().c_str());
  }
  LineReader reader(tty, default_chat_history_path());  // history only when editing
  for (;;) {
    g_interrupted.store(false);
    std::optional<std::string> read = reader.read(tty ? "> " : "");
    if (!read || g_interrupted.load()) break;
    const std::string& line = *read;
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/help") {
      std::fputs(kHelp, stdout);
      continue;
    }
    if (line == "/reset") {
      reset();
      if (tty) std::printf("(new conversation)\n");
      continue;
    }
    if (line == "/system" || line.rfind("/system ", 0) == 0) {
      system = line.size() > 8 ? line.substr(8) : "";
      reset();
      if (tty) {
        std::printf("(new conversation, %s)\n",
                    system.empty() ? "no system prompt" : "system prompt set");
      }
      continue;
    }
    if (line.rfind("/save", 0) == 0) {
      const std::string path = line.size() > 6 ? line.substr(6) : "";
      const Status st =
          path.empty() ? invalid_argument("usage: /save FILE") : save_conversation(path, history);
      if (!st.ok()) {
        std::fprintf(stderr, "glmserve: %s\n", st.message().c_str());
      } else if (tty) {
        std::printf("(saved %zu messages to %s)\n", history.size(), path.c_str());
      }
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
    TypeAhead type_ahead(tty);  // keys typed now go to the history, not into the answer
    while (!gen.wait_for(50)) {
      if (g_interrupted.exchange(false) && !stopped) {
        engine.cancel(request_id);  // the answer ends with finish_reason cancelled
        stopped = true;
      }
    }
    const engine::Event done = gen.wait();
    const std::string typed = type_ahead.take();
    if (stopped && tty) std::fputs(" [stopped]", stdout);
    std::fputc('\n', stdout);
    if (!typed.empty()) {  // not sent, not lost: Up at the prompt brings it back
      reader.remember(typed);
      std::printf("(typed during the answer, not sent: \"%s\"; press Up to edit and send it)\n",
                  typed.c_str());
    }
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
