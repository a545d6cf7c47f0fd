#include "cli/line_reader.h"

// libedit's readline-compatible interface (Debian libedit-dev).
#include <editline/readline.h>
#include <sys/stat.h>
#include <unistd.h>

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

TypeAhead::TypeAhead(bool tty) {
  if (!tty || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
  termios quiet = saved_;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON);
  quiet.c_cc[VMIN] = 0;
  quiet.c_cc[VTIME] = 0;
  active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet) == 0;
}

TypeAhead::~TypeAhead() { restore(); }

void TypeAhead::restore() {
  if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  active_ = false;
}

std::string TypeAhead::take() {
  if (!active_) return "";
  std::string raw;
  char buf[4096];
  for (;;) {  // VMIN = VTIME = 0: returns what is there, 0 when nothing is
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    if (n <= 0 || raw.size() > (1 << 16)) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  restore();
  std::string line;
  for (size_t i = 0; i < raw.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == 0x1b) {  // ESC [ ... final byte, or ESC x: a key we do not replay
      if (i + 1 < raw.size() && (raw[i + 1] == '[' || raw[i + 1] == 'O')) {
        i += 2;
        while (i < raw.size() && !(raw[i] >= 0x40 && raw[i] <= 0x7e)) ++i;
      } else {
        ++i;
      }
    } else if (c == 0x7f || c == 0x08) {  // Backspace: one UTF-8 character back
      while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xc0) == 0x80) {
        line.pop_back();
      }
      if (!line.empty()) line.pop_back();
    } else if (c == '\n' || c == '\r' || c == '\t') {
      if (!line.empty() && line.back() != ' ') line += ' ';
    } else if (c >= 0x20) {
      line += static_cast<char>(c);
    }
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

void LineReader::remember(const std::string& line) {
  if (edit_ && !line.empty()) add_history(line.c_str());
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
