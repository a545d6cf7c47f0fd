#!/usr/bin/env bash
# Configures and builds glmserve into build/ (Release-like, warnings as errors).
set -euo pipefail
cd "$(dirname "$0")/.."
# Paths relative to the checkout, so ccache hits across clones of the repository.
export CCACHE_BASEDIR="$PWD"
# Test binaries use a precompiled header (cmake/glm.cmake): ccache caches their files only
# when told the header's timestamps and macros do not matter.
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLM_WERROR=ON "$@" >/dev/null
cmake --build build
