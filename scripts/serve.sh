#!/usr/bin/env bash
# One command from a fresh machine to a running chat: installs, builds, then serves the model
# given as $1 (a GGUF file), or a small random-weight demo model that glmserve writes itself.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
MODEL="${1:-}"
PORT="${PORT:-8080}"
if [ -z "$MODEL" ]; then
  MODEL=build/demo-chatglm3-small-q8_0.gguf
  if [ ! -f "$MODEL" ]; then
    echo "No model given: writing a RANDOM-WEIGHT demo model to $MODEL (it answers gibberish;"
    echo "pass your own ChatGLM GGUF file to chat for real: scripts/serve.sh path/to/model.gguf)"
    build/glmserve gen-model --arch chatglm3 --preset small --type q8_0 \
      --vocab ../shared/data/tokenizers/chatglm3.tokenizer.model -o "$MODEL" 2>/dev/null ||
      build/glmserve gen-model --arch chatglm3 --preset small --type q8_0 -o "$MODEL"
  fi
fi
exec build/glmserve serve --model "$MODEL" --port "$PORT"
