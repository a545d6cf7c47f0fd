#!/usr/bin/env bash
# One command from a fresh machine to a running chat: installs, builds the glmserve binary
# (only it: the tests are scripts/test.sh's job), then serves the model given as $1 (a GGUF
# file), or a small random-weight demo model that glmserve writes itself.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
echo "Building glmserve (a few minutes the first time)..."
# Quiet: the full build log is shown only if the build fails.
log=$(mktemp)
if ! cmake --build build --target glmserve >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
rm -f "$log"
echo "Built build/glmserve"
MODEL="${1:-}"
PORT="${PORT:-8080}"
if [ -z "$MODEL" ]; then
  MODEL=build/demo-chatglm3-small-q8_0.gguf
  if [ ! -f "$MODEL" ]; then
    echo "No model given: writing a RANDOM-WEIGHT demo model to $MODEL. It answers in made-up words;"
    echo "to chat for real, pass a ChatGLM GGUF file: scripts/serve.sh path/to/chatglm3-6b.gguf"
    echo "(make one from a Hugging Face checkpoint with: build/glmserve convert HF_DIR -o M.gguf)"
    VOCAB=../shared/data/tokenizers/chatglm3.tokenizer.model
    if [ -f "$VOCAB" ]; then
      build/glmserve gen-model --arch chatglm3 --preset small --type q8_0 --vocab "$VOCAB" -o "$MODEL"
    else
      echo "($VOCAB not found: the demo model uses glmserve's small synthetic vocabulary)"
      build/glmserve gen-model --arch chatglm3 --preset small --type q8_0 -o "$MODEL"
    fi
  fi
fi
exec build/glmserve serve --model "$MODEL" --port "$PORT"
