#!/usr/bin/env bash
# Configures and builds glmserve into build/ (Release-like, warnings as errors).
set -euo pipefail
cd "$(dirname "$0")/.."
# Paths relative to the checkout, so ccache hits across clones of the repository.
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLM_WERROR=ON "$@" >/dev/null
cmake --build build
