// LineReader: the terminal chat's input. On a terminal, libedit: line editing (arrows, Home/End,
// Ctrl-W...), and history (Up/Down, Ctrl-R) kept across sessions in
// $XDG_STATE_HOME/glmserve/chat_history (else ~/.local/state/glmserve/chat_history, 1,000
// lines, 0600). From a pipe, plain lines. Ctrl-C while reading ends the input, as Ctrl-D does
// (the caller's SIGINT handler records it); Ctrl-C during an answer is the caller's.
#pragma once

#include <termios.h>

#include <optional>
#include <string>

namespace glm::cli {

class LineReader {
 public:
  // `edit`: use libedit (stdin and stdout are terminals). `history_path` empty: no history file.
  LineReader(bool edit, std::string history_path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // One line without its end of line; nullopt at end of input (Ctrl-D, Ctrl-C, EOF).
  std::optional<std::string> read(const char* prompt);
  // Puts `line` into the history (editing only): Up brings it back at the next prompt.
  void remember(const std::string& line);

 private:
  bool edit_;
  std::string history_path_;
};

// What is typed while an answer is being written: on a terminal, from construction until
// take(), stdin neither echoes (the keys would land inside the answer's text) nor waits for a
// line end (ICANON off; Ctrl-C still signals), and take() returns what was typed meanwhile as
// one line (for the history: LineReader::remember): line ends become spaces, escape sequences
// and other control keys are dropped, Backspace deletes. The terminal's settings come back in
// take() or the destructor. Not a terminal: does nothing. Not thread-safe. Cost: one read of stdin.
class TypeAhead {
 public:
  explicit TypeAhead(bool tty);
  ~TypeAhead();
  TypeAhead(const TypeAhead&) = delete;
  TypeAhead& operator=(const TypeAhead&) = delete;
  std::string take();

 private:
  void restore();
  bool active_ = false;
  termios saved_{};
};

// $XDG_STATE_HOME/glmserve/chat_history, else $HOME/.local/state/glmserve/chat_history, else "".
std::string default_chat_history_path();

}  // namespace glm::cli
