#!/usr/bin/env bash
# The GPU benchmark (docs/gpu.md, docs/performance.md "On a GPU"): glmserve's Vulkan backend
# against llama.cpp's (llama-bench -ngl 99) on the same random-weight 6B files, alternated A, B,
# A, B, medians, on a machine with a GPU and nothing else: it reaches no registry, so everything
# it runs is prepared here and carried.
#
#   scripts/bench-gpu.sh prepare [LLAMA_BUILD_DIR]
#       (here, on Debian 12) packs into .gpu-bench/ a glmserve built here (and, given
#       GLMSERVE_ALT=PATH, a second glmserve built from another commit, as glmserve-alt), every
#       shared library it needs with the loader that runs them, Debian's Vulkan loader
#       (libvulkan1), and, given the build directory of a llama.cpp built with -DGGML_VULKAN=ON
#       outside this repository,
#       its llama-bench / llama-quantize with their libraries (kept in .gpu-peer/, and packed
#       from there when no directory is given); where build/ has them, the GPU
#       tests (gpu_test, model_test) and the ../shared/data files their goldens read.
#       .gpu-bench/ and .gpu-bench.tar.xz (the pack compressed: what travels) are ignored by git.
#   scripts/bench-gpu.sh run [--preset 6b|small|tiny] [--rounds 2] [--types "q4_0 f16 q4_k_m"]
#                            (types also moe_q4_0, moe_q8_0, moe_f16: GLM-4.5's MoE, small preset;
#                            flash_q4_0, flash_q8_0, flash_f16: GLM-4.7-Flash's widths in 3
#                            layers, its latent attention and experts)
#                            [--serve-runs 10] [--kernels REGEX|none]
#                            [--settings "2,2,16 2,2,16,0 ... submit=0 submit=16" | none]
#                            [--only "tests table serve profile shaders rolled alt settings
#                                     kernels moe"]
#       (there) lists the devices, then runs these sections, in this order (what matters most
#       first, since the machine's time may end the run; --only: some of them; each says in the
#       report how long it took):
#       tests     the carried GPU tests on that device (every shader against its CPU reference,
#                 the goldens, GPU = CPU);
#       table     bench engine --device vulkan and llama-bench -ngl 99 alternated on each file
#                 (written first with gen-model; Q4_K_M with the carried llama-quantize): the
#                 issue's decode and prefill targets;
#       serve     the time to first token of the latency study's question through the whole
#                 HTTP stack (serve --device vulkan), then 1, 4 and 8 users at once;
#       profile   one profiled bench engine a file, decode and prefill apart
#                 (GLMSERVE_VULKAN_PROFILE);
#       shaders   what the driver compiles each shader into in both builds (glmserve devices
#                 --shaders: registers, spills);
#       rolled    the shaders' unrolled build against their rolled one (GLMSERVE_VULKAN_ROLLED=0
#                 and 1), alternated on each dense file;
#       alt       where the pack has glmserve-alt, its bench engine against this one's likewise;
#       settings  on the first file, bench engine -p 32 -n 64 under each matmul setting
#                 (GLMSERVE_VULKAN_MATMUL=ONE,FEW,TILED_MIN[,DOT[,SPLIT[,COOP[,FUSE]]]]: rows a
#                 team for one token and for a few, the tokens from which the tiled shader runs,
#                 8-bit activations with integer dot products (absent: where accelerated; 0:
#                 never), the tiled shader's split of a short prompt's rows (0: never), its tensor
#                 cores (absent: where checked; 0: never), the norms (and the 8-bit path's
#                 quantization) and the activations inside the decode matmuls (absent: both; 2:
#                 the activations alone; 0: dispatches of their own); docs/gpu.md), and under
#                 each submit=N (GLMSERVE_VULKAN_SUBMIT=N: dispatches a step's part holds before
#                 it goes to the queue, 0: a step whole);
#       kernels   gpu_bench: each op alone at the 6B shapes on the device (--kernels: a filter of
#                 its benchmarks, default all; none: skipped);
#       moe       GLM-4.5 (the moe_* types): its MTP block, its experts in host memory.
#       Writes $OUT/bench-gpu.md (or ./bench-gpu.md) and the raw outputs beside it. --preset
#       tiny checks the script itself on lavapipe in minutes; its timings are no GPU speed.
# The device call: carry [".gpu-bench.tar.xz", ".gl"], command "scripts/bench-gpu.sh run
# --rounds 1 --types 'q4_0 f16 q4_k_m' --serve-runs 3 --only 'tests table serve profile'",
# timeout_s about 360, so that the machine's 15 minutes leave time to run it again; then, if
# time is left, at once (the machine stays warm 30 s; the files are kept in BENCH_GPU_DIR) the
# same with --only 'shaders rolled settings kernels' (run unpacks .gpu-bench.tar.xz, the pack
# compressed to fit what travels).
# .gl/ holds Debian's Vulkan and GL dispatch libraries (the device tool's README: that machine has
# the NVIDIA driver but no loader); run unpacks them into / there when it has no libvulkan.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
pack="$here/.gpu-bench"
cmd="${1:?usage: $0 prepare [LLAMA_BUILD_DIR] | run [--preset P] [--rounds N] [--types T]}"
shift

# Copies an executable and the shared libraries it loads (ldd) into $pack/bin and $pack/lib.
pack_exe() {
  local exe="$1"
  cp -L "$exe" "$pack/bin/"
  ldd "$exe" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }' | while read -r lib; do
    cp -Ln "$lib" "$pack/lib/" 2>/dev/null || true
  done
}

if [[ "$cmd" == prepare ]]; then
  rm -rf "$pack"
  mkdir -p "$pack/bin" "$pack/lib"
  [[ -x "$here/build/glmserve" ]] || "$here/scripts/build.sh"
  pack_exe "$here/build/glmserve"
  strip "$pack/bin/glmserve"
  git -C "$here" log -1 --format=%h >"$pack/commit"
  if [[ -n "${GLMSERVE_ALT:-}" ]]; then
    cp -L "$GLMSERVE_ALT" "$pack/bin/glmserve-alt"
    strip "$pack/bin/glmserve-alt"
    git -C "$(dirname "$GLMSERVE_ALT")" log -1 --format=%h >"$pack/alt_commit" 2>/dev/null ||
      echo "$GLMSERVE_ALT" >"$pack/alt_commit"
  fi
  getconf GNU_LIBC_VERSION | awk '{ print $2 }' >"$pack/glibc"
  # The GPU tests, run there first on that device, and the shared data their goldens read (at
  # the path they were built with: $here/../shared/data).
  for t in src/gpu/gpu_test src/gpu/gpu_bench src/model/model_test; do
    if [[ -x "$here/build/$t" ]]; then
      pack_exe "$here/build/$t"
      strip "$pack/bin/$(basename "$t")"
    fi
  done
  if [[ -d "$here/../shared/data" ]]; then
    mkdir -p "$pack/data"
    for d in oracle models reference; do cp -rL "$here/../shared/data/$d" "$pack/data/"; done
    chmod -R u+w "$pack/data"
    echo "$here" >"$pack/built_at"
  fi
  # patchelf points the carried programs at the carried loader there (serve starts its children
  # as /proc/self/exe, so glmserve must run as itself, not through ld.so).
  command -v patchelf >/dev/null || apt-get install -y -qq --no-install-recommends patchelf
  pack_exe "$(command -v patchelf)"
  # The Vulkan loader glmserve dlopens, and the loader's own dependencies.
  cp -Ln /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$pack/lib/"
  # The peer, kept in .gpu-peer/ (ignored by git, beside build/) when a build directory is given,
  # and packed from there by a later prepare without one: a session lent a GPU then need not
  # spend the peer's 25-minute build first (docs/performance.md, "For the GPU comparison").
  peer="$here/.gpu-peer"
  if [[ -n "${1:-}" ]]; then
    rm -rf "$peer"
    mkdir -p "$peer/bin" "$peer/lib"
    for t in llama-bench llama-quantize; do (pack="$peer" && pack_exe "$1/bin/$t"); done
    { git -C "$1" log -1 --format=%h 2>/dev/null || echo "built in $1"; } >"$peer/commit"
  fi
  if [[ -x "$peer/bin/llama-bench" ]]; then
    cp -L "$peer"/bin/* "$pack/bin/"
    cp -Ln "$peer"/lib/* "$pack/lib/" 2>/dev/null || true
    cp "$peer/commit" "$pack/peer_commit"
    echo "the peer: llama.cpp $(cat "$peer/commit") from $peer"
  fi
  strip --strip-unneeded "$pack"/lib/*.so* 2>/dev/null || true
  # Debian's Vulkan loader and GL dispatch libraries as packages, unpacked into / there.
  mkdir -p "$here/.gl" /tmp/amd64/partial
  apt_o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
  apt-get "${apt_o[@]}" update >/dev/null
  (cd "$here/.gl" && apt-get "${apt_o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 \
    libgl1 libglx0 libgles2 >/dev/null)
  # What travels to the GPU machine is at most 64 MiB: the pack goes compressed.
  tar -C "$here" -I 'xz -T0' -cf "$here/.gpu-bench.tar.xz" .gpu-bench
  du -sh "$pack" "$here/.gpu-bench.tar.xz" "$here/.gl"
  exit 0
fi

[[ "$cmd" == run ]] || { echo "unknown command $cmd" >&2; exit 2; }
preset=6b rounds=2 types="q4_0 f16 q4_k_m" serve_runs=10 kernels=.
sections="tests table serve profile shaders rolled alt settings kernels moe"  # in this order
only="$sections"
settings="4,2,16 4,2,16,-1,1,-1,2 4,2,16,-1,1,-1,0 4,2,16,0 4,2,16,0,1,-1,2 4,2,16,0,1,-1,0 4,2,16,-1,0 4,2,16,-1,1,0 1,2,16 2,2,16 2,2,16,-1,1,-1,2 4,2,32 submit=0 submit=16"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --types) types="$2"; shift 2 ;;
    --serve-runs) serve_runs="$2"; shift 2 ;;
    --kernels) kernels="$2"; shift 2 ;;
    --settings) settings="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for s in $only; do
  [[ " $sections " == *" $s "* ]] || { echo "--only: unknown section $s (sections: $sections)" >&2; exit 2; }
done
out="${OUT:-$PWD}"
mkdir -p "$out"
report="$out/bench-gpu.md"
# The raw outputs are appended to as the run goes: a run starts them afresh (a folder reused here
# would otherwise report an earlier run's profile beside this one's).
rm -f "$out"/{tests.log,kernels.txt,ours.log,ours.jsonl,theirs.csv,theirs.log,settings.log} \
  "$out"/{profile.log,serve.log}
work="${BENCH_GPU_DIR:-/tmp/glm-bench-gpu}"
mkdir -p "$work"
if [[ ! -x "$pack/bin/glmserve" && -f "$here/.gpu-bench.tar.xz" ]]; then
  tar -C "$here" -I 'xz -T0' -xf "$here/.gpu-bench.tar.xz"
fi
# The carried programs run through the carried dynamic loader and libraries, whatever the
# machine's own are; without a pack (here), the build tree's.
if [[ -x "$pack/bin/glmserve" ]]; then
  # Where the machine's C library is as new as the pack's or newer (the GPU machine's is), the
  # programs run on it with the pack's other libraries: the NVIDIA driver that the Vulkan loader
  # loads, and what it needs, are built for the machine's. Else (an older machine) they run
  # through the pack's own dynamic loader and C library. BENCH_GPU_LOADER=system|pack chooses.
  ver() { printf '%s\n' "$@" | sort -V | head -1; }
  sys_glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')"
  pack_glibc="$(cat "$pack/glibc" 2>/dev/null || echo 2.36)"
  loader="${BENCH_GPU_LOADER:-}"
  if [[ -z "$loader" ]]; then
    loader=pack
    [[ -n "$sys_glibc" && "$(ver "$sys_glibc" "$pack_glibc")" == "$pack_glibc" ]] && loader=system
  fi
  if [[ "$loader" == system ]]; then
    libs="$pack/lib-system"
    rm -rf "$libs" && mkdir -p "$libs"
    for l in "$pack"/lib/*; do
      case "$(basename "$l")" in
        ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libresolv.so* | \
          libutil.so* | libstdc++.so* | libgcc_s.so*) ;;
        *) ln -s "$l" "$libs/" ;;
      esac
    done
  else
    libs="$pack/lib"
    ldso="$pack/lib/ld-linux-x86-64.so.2"
    for exe in "$pack"/bin/*; do
      [[ "$exe" == */patchelf ]] && continue
      "$ldso" --library-path "$pack/lib" "$pack/bin/patchelf" --set-interpreter "$ldso" \
        --set-rpath "$pack/lib" "$exe"
    done
  fi
  echo "carried programs: the $loader's C library (machine ${sys_glibc:-?}, pack $pack_glibc)"
  # The carried libraries for the carried programs alone (the machine's own programs need its
  # own): the Vulkan loader glmserve dlopens, and what the drivers it loads need.
  glmserve() { LD_LIBRARY_PATH="$libs" "$pack/bin/glmserve" "$@"; }
  alt_exe="$pack/bin/glmserve-alt"
  glmserve_alt() { LD_LIBRARY_PATH="$libs" "$alt_exe" "$@"; }
  glmserve_exec() { LD_LIBRARY_PATH="$libs" exec "$pack/bin/glmserve" "$@"; }
  llama_bench="$pack/bin/llama-bench" llama_quantize="$pack/bin/llama-quantize"
else
  libs=""
  glmserve() { "$here/build/glmserve" "$@"; }
  alt_exe="${GLMSERVE_ALT:-}"
  glmserve_alt() { "$alt_exe" "$@"; }
  glmserve_exec() { exec "$here/build/glmserve" "$@"; }
  llama_bench="${LLAMA_BENCH:-}" llama_quantize="${LLAMA_QUANTIZE:-}"
fi
# The GPU machine has no Vulkan loader of its own: Debian's, carried in .gl/ with the GL
# dispatch library NVIDIA's driver needs, unpacked into / (the device tool's README).
if [[ -d "$here/.gl" && "$(id -u)" == 0 ]] &&
  ! { ldconfig -p | grep -q 'libvulkan.so.1 ' && ldconfig -p | grep -q 'libGLdispatch.so.0 '; }; then
  for f in "$here"/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# NVIDIA's Vulkan driver (its README: the ICD file may not be where the loader looks).
if [[ -z "${VK_DRIVER_FILES:-}" ]]; then
  for d in /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d \
    /usr/local/share/vulkan/icd.d /usr/local/nvidia/etc/vulkan/icd.d; do
    for f in "$d"/nvidia_icd*.json; do
      if [[ -f "$f" ]]; then export VK_DRIVER_FILES="$f"; break 2; fi
    done
  done
fi
# A step that hangs fails in 20 s rather than the default 120 (no step of these runs takes 1 s
# on a GPU): the machine's time is short.
export GLMSERVE_VULKAN_TIMEOUT_MS="${GLMSERVE_VULKAN_TIMEOUT_MS:-20000}"

{
  echo "# glmserve on the GPU: $(date -u +%F)"
  echo
  echo '```'
  glmserve devices || true
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,clocks.max.mem --format=csv || true
  echo '```'
} | tee "$report"
if ! glmserve devices 2>/dev/null | grep -q '^vulkan:'; then
  # No GPU: say why (the Vulkan loader's own account) and stop: CPU timings are not this report's.
  {
    echo
    echo "No Vulkan device. VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}; the loader's log:"
    echo '```'
    VK_LOADER_DEBUG=error,warn,driver glmserve devices 2>&1 | tail -40
    ls -la /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>&1
    ldconfig -p | grep -iE 'vulkan|GLX_nvidia|GLdispatch' || true
    echo '```'
  } | tee -a "$report"
  exit 1
fi

# The run is in sections, in the order of what matters most if the machine's time runs out
# (--only picks some; each says in the report how long it took): the GPU tests, the
# comparison with llama.cpp (table), the time to first token through HTTP (serve), where the
# device's time goes (profile), then what the shaders compile to (shaders), the rolled
# build (rolled), another build (alt), the matmul settings (settings), each op alone
# (kernels) and GLM-4.5's MTP block and experts in host memory (moe). The model files are
# written before the first section that needs them.

# The GPU tests on this device, first: a speed is only worth reporting for right answers.
section_tests() {
  if [[ -x "$pack/bin/gpu_test" ]]; then
    built_at="$(cat "$pack/built_at" 2>/dev/null || echo /nonexistent)"
    if [[ ! -e "$built_at/../shared/data" && -d "$pack/data" ]]; then
      mkdir -p "$built_at" "$(dirname "$built_at")/shared"
      ln -s "$pack/data" "$(dirname "$built_at")/shared/data"
    fi
    {
      # GpuValidation.* needs Khronos' validation layer, which that machine lacks.
      timeout 60 env LD_LIBRARY_PATH="$libs" "$pack/bin/gpu_test" --gtest_filter='-GpuValidation.*' ||
        echo "gpu_test: exit $?"
      timeout 90 env LD_LIBRARY_PATH="$libs" "$pack/bin/model_test" --gtest_filter='*Gpu*' || echo "model_test: exit $?"
    } >"$out/tests.log" 2>&1
    {
      echo
      echo "GPU tests on this device (gpu_test; model_test --gtest_filter='*Gpu*'):"
      echo '```'
      grep -E '^\[  (PASSED|FAILED)  \]|^\[==========\] [0-9]+ tests|exit [0-9]+$' "$out/tests.log" || true
      echo '```'
    } | tee -a "$report"
  fi
}

# The model files: gen-model writes F16 / Q4_0 / Q8_0; the k-quant mixes come from llama-quantize.
declare -A file
make_files() {
  for t in $types; do
    f="$work/$preset-$t.gguf"
    case "$t" in
      f16 | q4_0 | q8_0)
        [[ -f "$f" ]] || glmserve gen-model --arch chatglm3 --preset "$preset" --type "$t" -o "$f" >/dev/null ;;
      q4_k_m | q5_k_m | q6_k)
        if [[ ! -f "$f" ]]; then
          [[ -n "$llama_quantize" && -x "$llama_quantize" ]] || { echo "no llama-quantize: $t skipped" | tee -a "$report"; continue; }
          src="$work/$preset-f16.gguf"
          [[ -f "$src" ]] || glmserve gen-model --arch chatglm3 --preset "$preset" --type f16 -o "$src" >/dev/null
          LD_LIBRARY_PATH="$libs" "$llama_quantize" "$src" "$f" "${t^^}" >/dev/null
        fi ;;
      moe_q4_0 | moe_q8_0 | moe_f16)
        # GLM-4.5's mixture of experts at the small preset's shape (32 experts, top-4, 1 shared;
        # the tiny one under --preset tiny).
        [[ -f "$f" ]] || glmserve gen-model --arch glm4moe --preset "$([[ $preset == tiny ]] && echo tiny || echo small)" \
          --type "${t#moe_}" -o "$f" >/dev/null ;;
      flash_q4_0 | flash_q8_0 | flash_f16)
        # GLM-4.7-Flash (latent attention, 64 experts top-4) at its widths in 3 layers (its
        # attention's widths on the tiny trunk under --preset tiny); no MTP block, as the CPU
        # comparison in docs/performance.md.
        [[ -f "$f" ]] || glmserve gen-model --arch glm47-flash --preset "$([[ $preset == tiny ]] && echo tiny-wide || echo flash)" \
          --type "${t#flash_}" --seed 1 --no-mtp -o "$f" >/dev/null ;;
      *) echo "unknown type $t" >&2; exit 2 ;;
    esac
    file[$t]="$f"
  done
  {
    echo
    echo '```'
    ls -l "$work"/*.gguf | awk '{ print $5, $NF }'
    echo '```'
  } | tee -a "$report"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# "pp tg" t/s of one glmserve run (the medians of its JSON; $2: glmserve_alt for the other
# build) and of one llama-bench run (its CSV).
ours() {
  "${2:-glmserve}" bench engine --model "$1" -p 512 -n 128 -r 3 --bw-mb 0 --device vulkan --json 2>>"$out/ours.log" |
    tee -a "$out/ours.jsonl" | tail -1 |
    python3 -c 'import json, sys; j = json.loads(sys.stdin.read() or "{}"); print("%.2f T%.2f" % (j.get("pp", {}).get("tps_median", 0), j.get("tg", {}).get("tps_median", 0)))'
}
theirs() {
  [[ -n "$llama_bench" && -x "$llama_bench" ]] || return 0
  LD_LIBRARY_PATH="$libs" "$llama_bench" -m "$1" -p 512 -n 128 -r 3 -ngl 99 -o csv 2>>"$out/theirs.log" | tee -a "$out/theirs.csv" |
    awk -F',' 'NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); col[$i] = i }; next }
      { gsub(/"/, ""); if ($col["n_gen"] == 0) pp = $col["avg_ts"]; else tg = $col["avg_ts"] }
      END { printf "%s T%s", pp + 0, tg + 0 }'
}
# Runs A then B on a file, $rounds times ($2, $3: commands printing "pp Ttg", as ours and theirs
# do); sets app atg (A's medians of rounds) and bpp btg (B's).
alternate() {
  : >"$work/a_pp" && : >"$work/a_tg" && : >"$work/b_pp" && : >"$work/b_tg"
  local i a_pp a_tg b_pp b_tg
  for ((i = 0; i < rounds; i++)); do
    read -r a_pp a_tg <<<"$("$2" "$1")"
    echo "${a_pp:-0}" >>"$work/a_pp"; echo "${a_tg#T}" >>"$work/a_tg"
    read -r b_pp b_tg <<<"$("$3" "$1")"
    echo "${b_pp:-0}" >>"$work/b_pp"; echo "${b_tg#T}" >>"$work/b_tg"
  done
  app=$(median <"$work/a_pp") atg=$(median <"$work/a_tg") bpp=$(median <"$work/b_pp") btg=$(median <"$work/b_tg")
}
# a / b as "1.23x" (digits: $3, default 2), "-" where b is 0.
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (b > 0) printf "%.*fx", d, a / b; else print "-" }'; }
# The GPU's peak memory bandwidth in GB/s by its name (NVIDIA's figures), 0 where unknown.
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
case "$gpu_name" in
  *H200*) peak_gbs=4800 ;;
  *H100*HBM3* | *H100*SXM*) peak_gbs=3350 ;;
  *H100*PCIe*) peak_gbs=2000 ;;
  *) peak_gbs=0 ;;
esac
# "GB/s (P% of the peak)" of $1 bytes read $2 times a second.
gbs() {
  awk -v b="$1" -v r="$2" -v p="$peak_gbs" 'BEGIN { g = b * r / 1e9; if (p > 0) printf "%.0f (%.0f%%)", g, 100 * g / p; else printf "%.0f", g }'
}
# The comparison with llama.cpp: the issue's speed targets (decode and prefill).
section_table() {
  {
    echo
    echo "Alternated: glmserve bench engine --device vulkan, llama-bench -ngl 99 (llama.cpp"
    echo "$(cat "$pack/peer_commit" 2>/dev/null || echo "of unknown commit")); -p 512 -n 128 -r 3, $rounds rounds, medians of"
    echo "rounds (t/s). Decode's bandwidth: the file's bytes x tg128 t/s (each token reads every"
    if [[ "$peak_gbs" -gt 0 ]]; then
      echo "weight once), and its share of the GPU's peak ($gpu_name: $peak_gbs GB/s, NVIDIA's figure)."
    else
      echo "weight once); no peak known for this device (${gpu_name:-no nvidia-smi})."
    fi
    echo
    echo "| file | glmserve pp512 | llama.cpp pp512 | ratio | glmserve tg128 | llama.cpp tg128 | ratio | glmserve GB/s | llama.cpp GB/s |"
    echo "|---|---|---|---|---|---|---|---|---|"
  } | tee -a "$report"
  for t in $types; do
    [[ -n "${file[$t]:-}" ]] || continue
    alternate "${file[$t]}" ours theirs
    local bytes
    bytes=$(stat -c %s "${file[$t]}")
    echo "| $preset $t | $app | $bpp | $(ratio "$app" "$bpp") | $atg | $btg | $(ratio "$atg" "$btg") | $(gbs "$bytes" "$atg") | $(gbs "$bytes" "$btg") |" | tee -a "$report"
  done
  # llama.cpp's Vulkan backend passes over CPU devices (lavapipe) and then runs on its CPU backend
  # with nothing but a line in its log: such figures are no GPU's, and the table must say so.
  if grep -q "ggml_vulkan: No devices found" "$out/theirs.log" 2>/dev/null; then
    {
      echo
      echo "**llama.cpp found no Vulkan device here** (theirs.log: \"ggml_vulkan: No devices found\"): its"
      echo "figures above are its CPU backend's, and the ratios are not the GPU comparison."
    } | tee -a "$report"
  fi
}

# Time to first token of the latency study's question through the whole stack (HTTP, gateway,
# socket, engine), FP16, with the seed study's method: bench serve measures its in-process
# engine, serve's engine over its socket, and serve's gateway over HTTP, alternated; then 1, 4
# and 8 users at once through the socket (a batch's decode steps, its samplers in parallel on
# the host).
section_serve() {
  if [[ -n "${file[f16]:-}" ]]; then
    {
      echo
      echo "Serving: bench serve --device vulkan --socket (serve's engine) --http (serve's gateway),"
      echo "${preset} f16, the seed study's prompts and method:"
      echo '```'
    } | tee -a "$report"
    # Port 0: serve picks a free one and names it in its ready line. No KV disk cache: a second
    # run on the same machine would otherwise find the first run's prompts (the bench numbers its
    # requests from 1 each run) on disk and time their reuse, not their prefill, where the
    # in-process engine (no disk cache) prefills.
    (glmserve_exec serve --model "${file[f16]}" --port 0 --device vulkan --db "$work/c.db" \
      --kv-disk off --socket "$work/e.sock" >"$out/serve.log" 2>&1) &
    serve_pid=$!
    port=""
    # At most 2 minutes for serve to be ready (a 6B F16 load is seconds on a GPU machine): a
    # serve that fails must not take the rest of the machine's time.
    for _ in $(seq 1 120); do
      port=$(sed -n 's|.*open http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$out/serve.log" | head -1)
      [[ -n "$port" ]] && break
      kill -0 "$serve_pid" 2>/dev/null || break
      sleep 1
    done
    if [[ -n "$port" ]]; then
      glmserve bench serve --model "${file[f16]}" --device vulkan --socket "$work/e.sock" \
        --http "http://127.0.0.1:$port" --runs "$serve_runs" --warmup 3 --concurrency 1,4,8 \
        --no-turns 2>>"$out/serve.log" |
        tee -a "$report" || true
    else
      echo "serve was not ready (serve.log):" | tee -a "$report"
      tail -20 "$out/serve.log" | tee -a "$report"
    fi
    kill "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
    echo '```' | tee -a "$report"
  fi
}

# Where the device's time goes: one profiled run a file (the timestamps cost a little, so apart
# from the timed runs above), the table of each shader's time in profile.log.
# Decode (a 16-token prompt, 128 tokens) and prefill (512 tokens, one generated) apart.
section_profile() {
  for t in $types; do
    [[ -n "${file[$t]:-}" ]] || continue
    for pn in "16 128" "512 1"; do
      read -r pp tg <<<"$pn"
      echo "== $t -p $pp -n $tg" >>"$out/profile.log"
      GLMSERVE_VULKAN_PROFILE=1 glmserve bench engine --model "${file[$t]}" -p "$pp" -n "$tg" -r 1 \
        --bw-mb 0 --device vulkan >>"$out/profile.log" 2>&1 || true
    done
  done
  {
    echo
    echo "Profile (GLMSERVE_VULKAN_PROFILE=1, bench engine -r 1, the ten largest a run):"
    echo '```'
    awk '/^== / { print; n = 0; next } /vulkan profile/ { p = 1; print; next }
      p && /^  / { if (n++ < 10) print; next } { p = 0 }' "$out/profile.log"
    echo '```'
  } | tee -a "$report"
}

# What the driver compiles each shader into, in both builds (glmserve devices --shaders: the
# driver's registers, spills and local memory, as it names them; docs/gpu.md): a spill is a
# thread's value in memory, and an answer to which build to run before any timing.
section_shaders() {
  for build in unrolled rolled; do
    rolled=0
    [[ "$build" == rolled ]] && rolled=1
    GLMSERVE_VULKAN_ROLLED=$rolled glmserve devices --shaders >"$out/shaders-$build.txt" 2>&1 ||
      echo "glmserve devices --shaders: exit $?" >>"$out/shaders-$build.txt"
  done
  {
    echo
    echo "What the driver compiles the shaders into (glmserve devices --shaders, the decode,"
    echo "few-token, prefill and attention shaders; every shader: shaders-unrolled.txt,"
    echo "shaders-rolled.txt):"
    echo '```'
    for build in unrolled rolled; do
      echo "$build:"
      grep -E '^vulkan|^  (matvec_(q4_0|f16|q6_k|dot_q4_0|dot_q4_k)|matmul_(q4_0|dot_q4_0|tiled_q4_0|tiled_f16|coop_q4_0|coop_f16)|attention_(f16|rows_f16)) |spilling:|exit [0-9]+$|gives no' \
        "$out/shaders-$build.txt" | cut -c1-240 || true
    done
    echo '```'
  } | tee -a "$report"
}

# A run against another ($3: a command printing "pp Ttg", as ours does; $2 its label; $4 the
# first, ours by default) on each dense file, alternated: A, B, A, B, medians of rounds; $1 the
# table's title.
against() {
  {
    echo
    echo "$1: bench engine --device vulkan"
    echo "-p 512 -n 128 -r 3 each, alternated, $rounds rounds, medians of rounds (t/s)."
    echo
    echo "| file | pp512 | $2 pp512 | $2/this | tg128 | $2 tg128 | $2/this |"
    echo "|---|---|---|---|---|---|---|"
  } | tee -a "$report"
  local t
  for t in $types; do
    [[ -n "${file[$t]:-}" && "$t" != moe_* ]] || continue
    alternate "${file[$t]}" "${4:-ours}" "$3"
    echo "| $preset $t | $app | $bpp | $(ratio "$bpp" "$app" 3) | $atg | $btg | $(ratio "$btg" "$atg" 3) |" |
      tee -a "$report"
  done
}
# The shaders' two builds (docs/gpu.md, "Two builds of each shader"), each named: a driver's
# default is either (gpu::default_shader_build).
section_rolled() {
  ours_unrolled() { GLMSERVE_VULKAN_ROLLED=0 ours "$1"; }
  ours_rolled() { GLMSERVE_VULKAN_ROLLED=1 ours "$1"; }
  against "Unrolled shaders (GLMSERVE_VULKAN_ROLLED=0) against rolled ones (=1)" rolled ours_rolled \
    ours_unrolled
}

# The other build (GLMSERVE_ALT at prepare).
section_alt() {
  if [[ -n "${alt_exe:-}" && -x "$alt_exe" ]]; then
    ours_alt() { ours "$1" glmserve_alt; }
    against "This build ($(cat "$pack/commit" 2>/dev/null || git -C "$here" log -1 --format=%h)) against glmserve-alt ($(cat "$pack/alt_commit" 2>/dev/null || echo "$alt_exe"))" alt ours_alt
  fi
}

# The matmul settings (GLMSERVE_VULKAN_MATMUL) on the first file: a 32-token prompt (the tiled
# shader or the few-token one, by TILED_MIN) and generation (rows a team).
section_settings() {
  first=""
  for t in $types; do [[ -n "${file[$t]:-}" ]] && { first="$t"; break; }; done
  if [[ "$settings" != none && -n "$first" ]]; then
    {
      echo
      echo "Matmul settings on $preset $first (GLMSERVE_VULKAN_MATMUL=ONE,FEW,TILED_MIN[,DOT[,SPLIT[,COOP[,FUSE]]]];"
      echo "submit=N: GLMSERVE_VULKAN_SUBMIT=N, default 48; bench engine -p 32 -n 64 -r 3, medians, t/s):"
      echo
      echo "| setting | pp32 | tg64 |"
      echo "|---|---|---|"
    } | tee -a "$report"
    for st in $settings; do
      # submit=N: the default matmuls, steps submitted in parts of N dispatches.
      var="GLMSERVE_VULKAN_MATMUL=$st"
      [[ "$st" == submit=* ]] && var="GLMSERVE_VULKAN_SUBMIT=${st#submit=}"
      r="$(export "$var"; glmserve bench engine --model "${file[$first]}" -p 32 -n 64 -r 3 \
        --bw-mb 0 --device vulkan --json 2>>"$out/settings.log" | tail -1 |
        python3 -c 'import json, sys; j = json.loads(sys.stdin.read() or "{}"); print("%.2f | %.2f" % (j.get("pp", {}).get("tps_median", 0), j.get("tg", {}).get("tps_median", 0)))')"
      echo "| $st | $r |" | tee -a "$report"
    done
  fi
}

# Each op alone on the device at the 6B shapes (src/gpu/gpu_bench.cc): the decode matmul with
# each count of rows a team, the tiled one (with and without tensor cores; a 17-token prompt with
# and without its split), norms, rotary, attention; and the upload of a mapped file (BM_Upload).
section_kernels() {
  if [[ "$kernels" != none ]]; then
    gpu_bench="$pack/bin/gpu_bench"
    [[ -x "$gpu_bench" ]] || gpu_bench="$here/build/src/gpu/gpu_bench"
    if [[ -x "$gpu_bench" ]]; then
      timeout 240 env LD_LIBRARY_PATH="$libs" "$gpu_bench" --benchmark_min_time=0.02 \
        --benchmark_filter="$kernels" --benchmark_format=console >"$out/kernels.txt" 2>&1 ||
        echo "gpu_bench: exit $?" >>"$out/kernels.txt"
      {
        echo
        echo "Ops alone (gpu_bench --benchmark_min_time=0.02; time = device time a call;"
        echo "BM_Upload/MiB/0|1: the wall time of a freshly mapped file's upload, memcpy from the"
        echo "mapping (0) or read from the file (1)):"
        echo '```'
        awk '/manual_time|real_time/ { n = split($0, f, "bytes_per_second="); bw = (n > 1) ? f[2] : "";
          printf "%-48s %10s %s %s\n", $1, $2, $3, bw }' "$out/kernels.txt"
        grep -E '^gpu_bench' "$out/kernels.txt" || true
        echo '```'
      } | tee -a "$report"
    fi
  fi
}

# GLM-4.5 (the moe_* types): its MTP block, and its experts in host memory.
section_moe() {
  # GLM-4.5's MTP block on the device (--spec mtp): the cost of its pass against a decode step
  # (r) and of verifying k drafted tokens (c(k)), from which the scheduler picks draft lengths.
  for t in $types; do
    [[ "$t" == moe_* && -n "${file[$t]:-}" ]] || continue
    {
      echo
      echo "MTP block on the GPU, $t: glmserve bench engine -p 0 -n 64 -r 3 --device vulkan --spec mtp"
      echo '```'
      glmserve bench engine --model "${file[$t]}" -p 0 -n 64 -r 3 --bw-mb 0 --device vulkan --spec mtp 2>>"$out/ours.log" || echo "(failed: $out/ours.log)"
      echo '```'
    } | tee -a "$report"
  done

  # GLM-4.5 with its routed experts in host memory (--cpu-moe all: what a GPU smaller than the
  # model runs): the same file whole on the device, then with every layer's experts on the CPU
  # (a submission and two row copies a layer; the CPU's share is the chosen experts' bytes).
  for t in $types; do
    [[ "$t" == moe_* && -n "${file[$t]:-}" ]] || continue
    {
      echo
      echo "Experts in host memory, $t: glmserve bench engine -p 512 -n 64 -r 3 --device vulkan --cpu-moe 0, then all"
      echo '```'
      for moe in 0 all; do
        glmserve bench engine --model "${file[$t]}" -p 512 -n 64 -r 3 --bw-mb 0 --device vulkan --cpu-moe "$moe" 2>>"$out/ours.log" || echo "(failed: $out/ours.log)"
      done
      echo '```'
    } | tee -a "$report"
  done
}

t_start=$(date +%s)
# Runs section $1 where --only names it (all by default), and says how long it took.
run_section() {
  [[ " $only " == *" $1 "* ]] || return 0
  local t0
  t0=$(date +%s)
  "section_$1"
  echo "($1: $(($(date +%s) - t0)) s, $(($(date +%s) - t_start)) s since the start)" | tee -a "$report"
}
run_section tests
case " $only " in *" table "* | *" serve "* | *" profile "* | *" rolled "* | *" alt "* | *" settings "* | *" moe "*) make_files ;; esac
for s in $sections; do [[ "$s" == tests ]] || run_section "$s"; done
echo "report: $report"
