#!/usr/bin/env bash
# KV cache type A/B at depth (docs/performance.md#q8_0-kv-cache): `glmserve bench engine -d D`
# with --kv f16 and --kv q8_0 alternated ROUNDS times per depth (the order flips every round),
# tg only; prints each run's median tokens/s, then per depth the medians and q8_0 / f16.
# usage: scripts/bench-kv-depth.sh MODEL.gguf "0 4096" [ROUNDS=3] [N_GEN=64] [extra bench flags]
set -euo pipefail
model=$1 depths=$2 rounds=${3:-3} n=${4:-64}
shift $(($# < 4 ? $# : 4))
bin=${GLMSERVE:-build/glmserve}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for d in $depths; do
  declare -A tps=()
  for ((r = 0; r < rounds; ++r)); do
    order="f16 q8_0"
    ((r % 2 == 1)) && order="q8_0 f16"
    for kv in $order; do
      t=$("$bin" bench engine -m "$model" -p 0 -n "$n" -r 3 -d "$d" --kv "$kv" --bw-mb 0 --json \
        "$@" 2>/dev/null | python3 -c 'import json, sys; print(json.load(sys.stdin)["tg"]["tps_median"])')
      tps[$kv]+="$t "
      echo "d=$d round $r kv=$kv: tg$n $t t/s (load $(cut -d' ' -f1 /proc/loadavg))"
    done
  done
  f16=$(median <<<"${tps[f16]}") q8=$(median <<<"${tps[q8_0]}")
  echo "d=$d median tg$n t/s: f16 $f16, q8_0 $q8, q8_0/f16 $(awk -v a="$q8" -v b="$f16" 'BEGIN {printf "%.3f", a / b}')"
done
