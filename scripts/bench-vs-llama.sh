#!/usr/bin/env bash
# Side-by-side engine benchmark against llama.cpp's llama-bench on the same GGUF file
# (docs/performance.md). Rounds alternate A, B, C: glmserve, llama-bench with its default
# mmap, llama-bench with --mmap 0 (its faster setting for repacked types); each run reports
# its median over -r repetitions; this script prints every run and the median over rounds, and
# the ratios of glmserve to llama.cpp's better setting.
#
#   scripts/bench-vs-llama.sh MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3] [--rounds 3] [-d 0]
#                             [--kv f16|q8_0] [--isa scalar|avx2|avx512] [--no-mmap0 | --only-mmap0]
#                             [--fa]
#   LLAMA_BENCH=/path/to/llama-bench (default /work/ext/llama.cpp/build/bin/llama-bench)
# --isa runs glmserve with GLMSERVE_ISA set (compare with a llama.cpp built for that ISA only,
# e.g. LLAMA_BENCH=/work/ext/llama.cpp-avx2/build/bin/llama-bench); --no-mmap0 skips run C,
# --only-mmap0 skips run B (each llama-bench run of a 6B model takes minutes on 2 cores).
# -d N runs both programs' tests after N tokens already in the KV cache (llama-bench -d,
# glmserve bench engine -d): generation and prefill deep into a long conversation. --kv sets
# both programs' KV cache type (glmserve --kv, llama-bench -ctk/-ctv). --fa makes runs B and C
# llama-bench --mmap 0 with flash attention off (-fa off) and on (-fa on): at depth, its better one.
# Files of each type: scripts/make-bench-models.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
glmserve="${GLMSERVE:-$here/build/glmserve}"
llama="${LLAMA_BENCH:-/work/ext/llama.cpp/build/bin/llama-bench}"
model="${1:?usage: $0 MODEL.gguf [-p N] [-n N] [-t N] [-r N] [--rounds N]}"
shift
p=512 n=128 t=2 r=3 rounds=3 d=0 kv=f16 isa="" mmap0=1 mmap1=1 fa=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -p) p="$2"; shift 2 ;;
    -n) n="$2"; shift 2 ;;
    -t) t="$2"; shift 2 ;;
    -r) r="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -d) d="$2"; shift 2 ;;
    --kv) kv="$2"; shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    --no-mmap0) mmap0=0; shift ;;
    --only-mmap0) mmap1=0; shift ;;
    --fa) fa=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$glmserve" ]] || { echo "build glmserve first (scripts/build.sh)" >&2; exit 1; }
[[ -x "$llama" ]] || { echo "llama-bench not found at $llama (set LLAMA_BENCH)" >&2; exit 1; }

# Prints "pp tg" t/s medians of one run (0 for a skipped test).
ours() {
  local depth=()
  ((d > 0)) && depth=(-d "$d")
  GLMSERVE_ISA="$isa" "$glmserve" bench engine --model "$model" -p "$p" -n "$n" -t "$t" -r "$r" \
    "${depth[@]}" --kv "$kv" --bw-mb 0 2>/dev/null |
    awk -F'|' -v p="pp$p" -v n="tg$n" '
      # Columns by the header'"'"'s names (the table gained a kv column in session 9).
      /^\| model / { for (i = 1; i <= NF; i++) { h = $i; gsub(/ /, "", h); col[h] = i }; next }
      ("test" in col) { t = $col["test"]; gsub(/ /, "", t); split($col["t/s(median)"], a, " ") }
      t ~ "^" p "(@|$)" { pp = a[1] } t ~ "^" n "(@|$)" { tg = a[1] }
      END { printf "%s %s\n", pp + 0, tg + 0 }'
}
theirs() {
  "$llama" -m "$model" -p "$p" -n "$n" -t "$t" -r "$r" -d "$d" -ctk "$kv" -ctv "$kv" "$@" -o csv \
    2>/dev/null |
    awk -F',' 'NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i }; next }
      { gsub(/"/, ""); if ($col["n_gen"] == 0) pp = $col["avg_ts"]; else tg = $col["avg_ts"] }
      END { printf "%s %s\n", pp + 0, tg + 0 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "$(basename "$model"): glmserve isa=${isa:-best}; llama-bench $llama; depth $d; kv $kv; load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -a a_pp a_tg b_pp b_tg c_pp c_tg
printf '%-6s %-28s %10s %10s\n' round run "pp$p" "tg$n"
for ((i = 1; i <= rounds; i++)); do
  read -r x y < <(ours); a_pp+=("$x"); a_tg+=("$y")
  printf '%-6s %-28s %10s %10s\n' "$i" glmserve "$x" "$y"
  if ((fa)); then
    read -r x y < <(theirs -mmp 0 -fa off); b_pp+=("$x"); b_tg+=("$y")
    printf '%-6s %-28s %10s %10s\n' "$i" "llama.cpp (-fa off)" "$x" "$y"
    read -r x y < <(theirs -mmp 0 -fa on); c_pp+=("$x"); c_tg+=("$y")
    printf '%-6s %-28s %10s %10s\n' "$i" "llama.cpp (-fa on)" "$x" "$y"
    continue
  fi
  if ((mmap1)); then
    read -r x y < <(theirs); b_pp+=("$x"); b_tg+=("$y")
    printf '%-6s %-28s %10s %10s\n' "$i" "llama.cpp (mmap)" "$x" "$y"
  else
    b_pp+=(0); b_tg+=(0)
  fi
  if ((mmap0)); then
    read -r x y < <(theirs -mmp 0); c_pp+=("$x"); c_tg+=("$y")
    printf '%-6s %-28s %10s %10s\n' "$i" "llama.cpp (--mmap 0)" "$x" "$y"
  else
    c_pp+=(0); c_tg+=(0)
  fi
done
m() { printf '%s\n' "$@" | median; }
app=$(m "${a_pp[@]}") atg=$(m "${a_tg[@]}") bpp=$(m "${b_pp[@]}") btg=$(m "${b_tg[@]}")
cpp=$(m "${c_pp[@]}") ctg=$(m "${c_tg[@]}")
printf '%-6s %-28s %10s %10s\n' median glmserve "$app" "$atg"
if ((fa)); then
  printf '%-6s %-28s %10s %10s\n' median "llama.cpp (-fa off)" "$bpp" "$btg"
  printf '%-6s %-28s %10s %10s\n' median "llama.cpp (-fa on)" "$cpp" "$ctg"
else
  printf '%-6s %-28s %10s %10s\n' median "llama.cpp (mmap)" "$bpp" "$btg"
  printf '%-6s %-28s %10s %10s\n' median "llama.cpp (--mmap 0)" "$cpp" "$ctg"
fi
awk -v a="$app" -v b="$bpp" -v c="$cpp" -v x="$atg" -v y="$btg" -v z="$ctg" 'BEGIN {
  best_pp = b > c ? b : c; best_tg = y > z ? y : z
  if (best_pp > 0) printf "ratio pp: %.2fx llama.cpp best setting\n", a / best_pp
  if (best_tg > 0) printf "ratio tg: %.2fx llama.cpp best setting\n", x / best_tg }'
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
