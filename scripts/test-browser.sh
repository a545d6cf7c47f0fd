#!/usr/bin/env bash
# Browser tests of the web page: Debian's chromium driven by playwright-core (npm), against
# `build/glmserve web` in front of a scripted fake engine (tests/browser/fake_engine.mjs), on
# free loopback ports, with a fresh database. Cleans up everything it started.
#   scripts/test-browser.sh               run the tests
#   GLM_MEASURE=1 scripts/test-browser.sh also measure latency, page weight and first paint
#   GLM_MEASURE_JSON=FILE                  with GLM_MEASURE=1: also write the runs as JSON for
#                                          `glmserve bench serve --report R.html --browser FILE`
#   GLMSERVE=path/to/glmserve              use another binary (default build/glmserve)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GLMSERVE="${GLMSERVE:-$ROOT/build/glmserve}"
[ -x "$GLMSERVE" ] || { echo "test-browser: $GLMSERVE is missing; run scripts/build.sh first" >&2; exit 1; }
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] || { echo "test-browser: $CHROMIUM is missing; run scripts/install-deps.sh" >&2; exit 1; }
export CHROMIUM

# npm packages from the lockfile only (playwright-core never downloads a browser).
(cd web && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
# The embedded bundle must match its sources.
(cd web && node build.mjs --check)

TMP=$(mktemp -d /tmp/glm-browser.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

node tests/browser/fake_engine.mjs "$TMP/engine.sock" "$TMP/engine.log" >"$TMP/engine.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$TMP/engine.sock" ] && break; sleep 0.05; done
[ -S "$TMP/engine.sock" ] || { cat "$TMP/engine.out"; echo "test-browser: fake engine did not start" >&2; exit 1; }

"$GLMSERVE" web --engine "$TMP/engine.sock" --port 0 --db "$TMP/conversations.db" >"$TMP/web.out" 2>&1 &
PIDS+=($!)
URL=""
for _ in $(seq 200); do
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$TMP/web.out" 2>/dev/null | head -1 || true)
  [ -n "$URL" ] && break
  sleep 0.05
done
[ -n "$URL" ] || { cat "$TMP/web.out"; echo "test-browser: glmserve web did not start" >&2; exit 1; }
echo "test-browser: gateway at $URL"

export GLM_WEB_URL="$URL" GLM_FAKE_LOG="$TMP/engine.log" GLMSERVE
node --test tests/browser/*.test.mjs
if [ "${GLM_MEASURE:-0}" = 1 ]; then node tests/browser/measure.mjs; fi
