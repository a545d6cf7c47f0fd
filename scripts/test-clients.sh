#!/usr/bin/env bash
# The API through client libraries we did not write: the official `openai` npm package and the
# `ajv` JSON Schema validator (tests/clients, installed from its lockfile), against
# `build/glmserve serve` on random-weight tiny models with the real vocabularies of ../shared.
#   scripts/test-clients.sh            run them
#   GLMSERVE=path/to/glmserve          use another binary (default build/glmserve)
set -euo pipefail
cd "$(dirname "$0")/.."
GLMSERVE="${GLMSERVE:-$PWD/build/glmserve}"
[ -x "$GLMSERVE" ] || { echo "test-clients: $GLMSERVE is missing; run scripts/build.sh first" >&2; exit 1; }
SHARED="${GLM_SHARED:-$PWD/../shared}"
[ -r "$SHARED/data/tokenizers/glm4.tokenizer.model" ] ||
  { echo "test-clients: $SHARED/data/tokenizers is missing (the real vocabularies)" >&2; exit 1; }
export GLMSERVE GLM_SHARED="$SHARED"
(cd tests/clients && npm ci --no-audit --no-fund --loglevel=error)
cd tests/clients && node --test --test-concurrency=1
