#!/usr/bin/env bash
# Writes the random-weight model files of the side-by-side benchmarks (docs/performance.md):
# a ChatGLM3-6B-shaped F16 file from glmserve gen-model, the Q4_0 / Q8_0 files gen-model writes
# itself (their output.weight Q6_K, as llama.cpp's quantizer does), and Q4_K_M / Q5_K_M / Q6_K
# made from the F16 file by llama.cpp's own quantizer (mixed types per tensor, as people
# download them). Files that exist are kept.
#
#   scripts/make-bench-models.sh DIR [--arch chatglm3|glm4] [TYPE ...]
#   LLAMA_QUANTIZE=/path/to/llama-quantize (default /work/ext/llama.cpp/build/bin/llama-quantize)
# TYPEs: f16 q4_0 q8_0 q4_k_m q5_k_m q6_k (default: all). --arch glm4 writes the GLM-4-9B shape.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
glmserve="${GLMSERVE:-$here/build/glmserve}"
quantize="${LLAMA_QUANTIZE:-/work/ext/llama.cpp/build/bin/llama-quantize}"
dir="${1:?usage: $0 DIR [--arch chatglm3|glm4] [TYPE ...]}"
shift
arch=chatglm3
if [[ "${1:-}" == --arch ]]; then arch="$2"; shift 2; fi
types=("$@")
((${#types[@]})) || types=(f16 q4_0 q8_0 q4_k_m q5_k_m q6_k)
prefix="$dir/6b"
[[ "$arch" == chatglm3 ]] || prefix="$dir/$arch-6b"
mkdir -p "$dir"
[[ -x "$glmserve" ]] || { echo "build glmserve first (scripts/build.sh)" >&2; exit 1; }

gen() {  # gen TYPE: straight from gen-model
  local out="$prefix-$1.gguf"
  [[ -f "$out" ]] || "$glmserve" gen-model --arch "$arch" --preset 6b --type "$1" -o "$out"
  echo "$out"
}
for t in "${types[@]}"; do
  case "$t" in
    f16 | q4_0 | q8_0) gen "$t" ;;
    q4_k_m | q5_k_m | q6_k)
      out="$prefix-$t.gguf"
      if [[ ! -f "$out" ]]; then
        [[ -x "$quantize" ]] || { echo "llama-quantize not found at $quantize (set LLAMA_QUANTIZE)" >&2; exit 1; }
        src="$(gen f16)"
        "$quantize" "$src" "$out" "${t^^}" >/dev/null
      fi
      echo "$out"
      ;;
    *) echo "unknown type $t (f16 q4_0 q8_0 q4_k_m q5_k_m q6_k)" >&2; exit 2 ;;
  esac
done
