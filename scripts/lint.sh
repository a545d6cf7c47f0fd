#!/usr/bin/env bash
# Style checks of the C++ sources, run by scripts/test.sh (CI):
#   clang-format (Google base, 100 columns: .clang-format) must leave every file unchanged;
#   clang-tidy with the checks in .clang-tidy over every translation unit of build/
#   (compile_commands.json from scripts/build.sh), warnings as errors.
# Fix formatting with: git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
# The tracked sources; a copy without .git (an exported tree) lists them with find instead.
list() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files "$@"
  else
    local args=() p
    for p in "$@"; do args+=(-path "$p" -o); done
    find src tests \( "${args[@]}" -false \) -type f | sort
  fi
}
mapfile -t sources < <(list 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h')
[[ ${#sources[@]} -gt 0 ]] || { echo "lint: no sources found" >&2; exit 1; }
clang-format --dry-run --Werror "${sources[@]}"
echo "clang-format: ${#sources[@]} files formatted"
# Modules include only the modules they list; docs name only flags a command parses.
python3 scripts/check-structure.py
[[ "${1:-}" == "--format-only" ]] && exit 0
# The libraries' translation units. Not linted: tests and benchmarks (gtest's macros cost most
# of the time and the checks target product code), and src/kernels (intrinsics written for GCC:
# clang rejects GCC's cpu-feature names and non-constant lane indices that GCC folds).
mapfile -t units < <(list 'src/*.cc' | grep -v -E '_(test|fuzz|bench)\.cc$|^src/kernels/')
# run-clang-tidy runs one clang-tidy per core over the compilation database.
run-clang-tidy -quiet -p build -j "$(nproc)" -extra-arg=-Wno-unknown-warning-option \
  "${units[@]/#/$PWD/}" >/tmp/glm-clang-tidy.log 2>&1 ||
  { grep -E "warning:|error:" /tmp/glm-clang-tidy.log | sort -u | head -50; exit 1; }
echo "clang-tidy: ${#units[@]} files clean"
