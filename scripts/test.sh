#!/usr/bin/env bash
# The whole test suite: install dependencies, check formatting, build (warnings are errors),
# run every ctest test, clang-tidy, then the sanitizer builds, the fuzzers (briefly),
# the browser tests and the client-library tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's wall time, so CI's log says where its minutes go.
last=$SECONDS
took() { echo "test.sh: $1 took $((SECONDS - last)) s (total $SECONDS s)"; last=$SECONDS; }
scripts/install-deps.sh
took "dependencies"
export CCACHE_BASEDIR="$PWD"
# Test binaries use a precompiled header (cmake/glm.cmake): ccache caches their files only
# when told the header's timestamps and macros do not matter.
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
# Formatting first: it fails in a second, before the build.
scripts/lint.sh --format-only
scripts/build.sh
took build
ctest --test-dir build --output-on-failure -j2 --timeout 900
took ctest
# clang-tidy over the libraries (.clang-tidy), on build/'s compilation database.
scripts/lint.sh
took clang-tidy
# ThreadSanitizer over the concurrent core: KV accounting, scheduler, engine, protocol, daemon,
# the HTTP server's worker pool.
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLM_SANITIZE=thread >/dev/null
cmake --build build-tsan --target kv_test sampler_test scheduler_test engine_test protocol_test daemon_test \
  http_test
ctest --test-dir build-tsan --output-on-failure -j2 \
  -R '^(Engine|Scheduler|KvCache|BlockAllocator|Sampler|Protocol|Daemon|WorkerPool)'
took tsan
# AddressSanitizer + UBSan (clang, coverage-instrumented: one build serves the unit tests and
# the fuzzers) over the modules that parse untrusted bytes: the unit tests of core, gguf and the
# checkpoint readers, then libFuzzer 10 s a target over GGUF headers, PyTorch checkpoints and
# every HTTP route's body (openai_fuzz). None of them links the kernels (clang 14 rejects their
# GCC builtins). The grammar and tokenizer fuzzers run with plain scripts/fuzz.sh.
scripts/fuzz.sh --build-only core_test gguf_test checkpoint_test
ctest --test-dir build-fuzz --output-on-failure -j2 -R '^(Fp16|Bf16|DType|Utf8|Status|Gguf|Unpickle|TorchZip)'
took asan
FUZZ_SECONDS="${FUZZ_SECONDS:-10}" scripts/fuzz.sh gguf_fuzz unpickle_fuzz openai_fuzz
took fuzz
# Browser tests of the web page (Debian chromium driven by playwright-core).
scripts/test-browser.sh
took browser
# The API through the official client libraries (npm openai) and a JSON Schema validator (ajv).
scripts/test-clients.sh
took clients
