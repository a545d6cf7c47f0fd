#include "cli/line_reader.h"

// libedit's readline-compatible interface (Debian libedit-dev).
#include <editline/readline.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <system_error>

namespace glm::cli {

namespace {
constexpr int kHistoryLines = 1000;
}  // namespace

std::string default_chat_history_path() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/glmserve/chat_history";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
    return std::string(h) + "/.local/state/glmserve/chat_history";
  }
  return "";
}

LineReader::LineReader(bool edit, std::string history_path)
    : edit_(edit), history_path_(std::move(history_path)) {
  if (!edit_) return;
  // Our SIGINT handler stays in charge: libedit restores the terminal on its way out.
  rl_catch_signals = 0;
  using_history();
  stifle_history(kHistoryLines);
  if (!history_path_.empty()) read_history(history_path_.c_str());  // absent at first: fine
}

LineReader::~LineReader() {
  if (!edit_ || history_path_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(history_path_).parent_path(), ec);
  // The history holds what the user typed: the owner's only.
  const mode_t old = umask(077);
  write_history(history_path_.c_str());
  umask(old);
}

std::optional<std::string> LineReader::read(const char* prompt) {
  if (!edit_) {
    std::fputs(prompt, stdout);
    std::fflush(stdout);
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  char* raw = readline(prompt);
  if (raw == nullptr) return std::nullopt;
  std::string line(raw);
  std::free(raw);
  if (!line.empty() && (history_length == 0 || line != history_get(history_length)->line)) {
    add_history(line.c_str());
  }
  return line;
}

}  // namespace glm::cli
