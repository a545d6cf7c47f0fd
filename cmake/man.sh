#!/usr/bin/env bash
# man.sh GLMSERVE OUT: writes the glmserve(1) man page from the binary's own help texts
# (`glmserve --help`, then `glmserve CMD --help` for every command it lists), at build time.
set -euo pipefail
bin="$1"
out="$2"
# roff: a backslash is \e; a line starting with . or ' is a request unless escaped with \&.
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
version="$("$bin" --version)"
commands="$("$bin" --help | sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p')"
[[ -n "$commands" ]] || { echo "man.sh: no commands in '$bin --help'" >&2; exit 1; }
{
  echo ".TH GLMSERVE 1 \"\" \"$version\" \"User Commands\""
  echo ".SH NAME"
  echo "glmserve \\- serve ChatGLM models on your own machine"
  echo ".SH SYNOPSIS"
  echo ".B glmserve"
  echo ".I command"
  echo "[flags]"
  echo ".SH COMMANDS"
  echo ".nf"
  "$bin" --help | sed -n '/^  [a-z]/p' | esc
  echo ".fi"
  for c in $commands; do
    echo ".SS $c"
    echo ".nf"
    "$bin" "$c" --help 2>&1 | esc
    echo ".fi"
  done
  echo ".SH FILES"
  echo "Documentation: README.md and docs/*.md in /usr/share/doc/glmserve (or the install"
  echo "prefix's share/doc/glmserve); systemd units glmserve-engine.service, glmserve-web.service."
  echo ".SH SEE ALSO"
  echo ".BR systemctl (1),"
  echo ".BR supervisord (1)"
} >"$out.tmp"
mv "$out.tmp" "$out"
