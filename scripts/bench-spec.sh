#!/usr/bin/env bash
# Speculative decoding A/B (docs/performance.md#speculative-decoding): `glmserve run` with
# --spec off and --spec ngram alternated ROUNDS times on one prompt, greedy; prints each run's
# tokens/s and acceptance, then the medians and their ratio. With DRAFT=D.gguf, the modes are off
# and draft (--draft D.gguf) instead (MODES="off ngram draft" runs all three).
# usage: [DRAFT=D.gguf] [MODES=...] scripts/bench-spec.sh MODEL.gguf PROMPT [MAX_TOKENS=200]
#        [ROUNDS=5] [extra run flags...]
set -euo pipefail
model=$1 prompt=$2 n=${3:-200} rounds=${4:-5}
shift $(($# < 4 ? $# : 4))
bin=${GLMSERVE:-build/glmserve}
draft=${DRAFT:-}
modes=${MODES:-$([[ -n $draft ]] && echo "off draft" || echo "off ngram")}
declare -A tps
for ((r = 0; r < rounds; ++r)); do
  for mode in $modes; do
    extra=()
    [[ $mode == draft ]] && extra=(--draft "$draft")
    line=$("$bin" run --model "$model" --raw --prompt "$prompt" -n "$n" --temp 0 --spec "$mode" \
      "${extra[@]}" "$@" 2>&1 >/dev/null | grep 'tokens generated')
    t=$(sed -E 's/.*\(([0-9.]+) tokens\/s\).*/\1/' <<<"$line")
    tps[$mode]+="$t "
    echo "round $r $mode: $line"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
off=$(median <<<"${tps[off]}")
for mode in $modes; do
  [[ $mode == off ]] && continue
  m=$(median <<<"${tps[$mode]}")
  echo "median tokens/s: off $off, $mode $m, $mode/off $(awk -v a="$m" -v b="$off" 'BEGIN {printf "%.2f", a / b}')"
done
