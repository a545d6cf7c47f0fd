#!/usr/bin/env bash
# chat_tty_test.sh GLMSERVE MODEL: `glmserve chat` on a real terminal (tmux's pseudo-terminal),
# typed at as a person would: an answer stopped with Ctrl-C keeps the session, a line edited with
# the arrow keys is sent as edited and answered in the same session, a line typed while an answer
# streams is kept in the history (Up), not glued into the answer, /save writes the whole conversation (twice: /reset starts another), the history
# file keeps the lines (0600), Ctrl-D at the prompt quits with status 0.
# No MODEL file: exit 77 (ctest: skipped).
set -euo pipefail
bin="$1"
model="$2"
[[ -f "$model" ]] || { echo "chat_tty_test: $model is absent; skipped"; exit 77; }
work="$(mktemp -d)"
sock="glmchat$$"
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
fail() {
  echo "chat_tty_test: $*" >&2
  tmux -L "$sock" capture-pane -t chat -p -S -50 >&2 2>/dev/null || true
  exit 1
}
# -J: lines the pane wrapped are joined back.
screen() { tmux -L "$sock" capture-pane -t chat -p -J -S -200; }
# wait_for REGEX [SECONDS]: until the screen matches.
wait_for() {
  local i
  for ((i = 0; i < ${2:-30} * 10; ++i)); do
    screen | grep -qE "$1" && return 0
    sleep 0.1
  done
  fail "timed out waiting for /$1/"
}
# wait_answer LINE: until at least 10 characters of answer follow the line "> LINE".
wait_answer() {
  local i
  for ((i = 0; i < 300; ++i)); do
    (($(screen | awk -v l="> $1" '$0 == l {f = 1; next} f' | tr -d '\n ' | wc -c) >= 10)) && return 0
    sleep 0.1
  done
  fail "no answer to '$1'"
}
# wait_count REGEX N: until N lines match.
wait_count() {
  local i
  for ((i = 0; i < 300; ++i)); do
    (($(screen | grep -cE "$1") >= $2)) && return 0
    sleep 0.1
  done
  fail "fewer than $2 lines match /$1/"
}
keys() { tmux -L "$sock" send-keys -t chat "$@"; }
tmux -L "$sock" new-session -d -s chat -x 100 -y 30 \
  "XDG_STATE_HOME='$work/state' '$bin' chat --model '$model' --temp 0 -n 2000 --ctx-size 8192 \
   -t 1; echo EXIT=\$?; sleep 60"
wait_for '^> ?$' 60
keys hello Enter
# The answer streams, then Ctrl-C stops it and a new prompt (an empty "> " line) comes.
wait_answer hello
keys C-c
wait_count '\[stopped\]' 1
wait_for '^> ?$'
# Edited with the arrows: "abc", Left, "X" -> "abXc", answered in the same session (to its
# end: at most 2000 tokens; the first answer, at temperature 0, is longer than that). 2000, not
# 400: chatglm3-small writes ~4000 tokens/s on one thread, so 400 could end before Ctrl-C came.
keys abc Left X Enter
wait_for '^> abXc$'
wait_for '^> ?$' 60
keys "/save $work/conv1.json" Enter
wait_for 'saved 4 messages to .*conv1'
# A line typed while an answer streams is neither glued into the answer nor sent nor lost: the
# page says so after the answer, and Up brings it back at the prompt, where Enter sends it. In a
# new conversation (/reset): the answer it is typed during must be long every run, and what the
# first conversation says after its stopped answer depends on when Ctrl-C came (a short answer
# there let the typing land at the prompt: 1 of 6 runs on a loaded machine).
keys /reset Enter
wait_for 'new conversation'
wait_for '^> ?$'
keys why Enter
wait_answer why
keys "later words" Enter
wait_for 'typed during the answer, not sent: "later words"' 60
wait_for '^> ?$'
keys Up Enter
wait_answer "later words"
wait_for '^> ?$' 60
keys "/save $work/conv2.json" Enter
wait_for 'saved 4 messages to .*conv2'
keys C-d
wait_for '^EXIT=0$'
# The saved conversations: the questions as typed, the (partial) answers non-empty, and the
# line typed during an answer not in it.
python3 - "$work/conv1.json" "$work/conv2.json" <<'PY' || fail "saved conversation"
import json, sys
for path, asked in zip(sys.argv[1:], (["hello", "abXc"], ["why", "later words"])):
    m = json.load(open(path))["messages"]
    assert [x["role"] for x in m] == ["user", "assistant"] * 2, m
    assert [m[i]["content"] for i in (0, 2)] == asked, m
    assert all(m[i]["content"] for i in (1, 3)), m
    assert "later" not in m[1]["content"], m
PY
hist="$work/state/glmserve/chat_history"
[[ "$(stat -c %a "$hist")" == 600 ]] || fail "history file mode $(stat -c %a "$hist")"
# (libedit writes a space in the history file as \040)
grep -qx hello "$hist" && grep -qx abXc "$hist" && grep -qxE 'later( |\\040)words' "$hist" ||
  fail "history lacks the typed lines"
echo "chat_tty_test: ok"
