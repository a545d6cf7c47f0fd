#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (GLM_FUZZ=ON: ASan + UBSan + coverage) into build-fuzz/
# and runs each for FUZZ_SECONDS (default 15) from a small seed corpus written here: every
# route's request bodies (openai_fuzz), GGUF headers (gguf_fuzz), GBNF grammars and JSON
# Schemas (grammar_fuzz), tokenizer input (tokenizer_fuzz, stream_decoder_fuzz), answers read for
# tool calls (tool_call_fuzz), PyTorch
# data.pkl and .bin files (unpickle_fuzz), KV disk cache files (disk_store_fuzz). A crash, a leak or undefined behaviour fails with the
# reproducer's path.
#   scripts/fuzz.sh                 build and run them all (CI runs gguf, unpickle and openai)
#   FUZZ_SECONDS=300 scripts/fuzz.sh openai_fuzz      one target, longer
#   scripts/fuzz.sh --build-only core_test ...         only build targets of build-fuzz
# Only the targets and the libraries they link are built (openai_fuzz links src/api, not the
# HTTP layer; unpickle_fuzz src/checkpoint, not the kernels, which clang 14 does not compile).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD"
# The targets run by default, and so in CI: a new one is one more word here (seeds optional).
default_targets=(openai_fuzz gguf_fuzz grammar_fuzz tokenizer_fuzz stream_decoder_fuzz tool_call_fuzz unpickle_fuzz
  disk_store_fuzz)
build_only=0
if [[ "${1:-}" == "--build-only" ]]; then  # other targets of this build, e.g. the ASan unit tests
  build_only=1
  shift
fi
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${default_targets[@]}")
seconds="${FUZZ_SECONDS:-15}"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGLM_FUZZ=ON >/dev/null
cmake --build build-fuzz --target "${targets[@]}"
[[ $build_only -eq 0 ]] || exit 0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
seed() {  # seed TARGET NAME CONTENT
  mkdir -p "$work/$1"
  printf '%s' "$3" >"$work/$1/$2"
}
seed openai_fuzz chat '{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"logprobs":true,"top_logprobs":2,"logit_bias":{"5":-100},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}'
seed openai_fuzz completion '{"prompt":"Once","max_tokens":4,"logprobs":2,"echo":false,"stop":["\n"]}'
seed openai_fuzz messages '{"model":"m","max_tokens":8,"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}'
seed openai_fuzz responses '{"input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}],"instructions":"i","previous_response_id":"resp_1","max_output_tokens":3}'
seed openai_fuzz nested "{\"title\":$(printf '[%.0s' {1..200})$(printf ']%.0s' {1..200})}"
seed grammar_fuzz gbnf 'root ::= "yes" | "no" | [0-9]+ ws
ws ::= [ \t\n]*'
seed grammar_fuzz schema '{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]},"b":{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/n"}]}},"required":["a"],"$defs":{"n":{"type":"null"}}}'
mkdir -p "$work/gguf_fuzz"  # version 3, no tensors, one metadata entry follows (NULs: printf)
printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000' \
  >"$work/gguf_fuzz/header"
seed tokenizer_fuzz text 'Hello, 世界! <|user|> [gMASK] 	 tabs  and  spaces'
# A state dict pickle (protocol 2): OrderedDict() built by GLOBAL + EMPTY_TUPLE + REDUCE.
mkdir -p "$work/unpickle_fuzz"
printf '\200\002ccollections\nOrderedDict\nq\000)Rq\001.' >"$work/unpickle_fuzz/empty_dict"
seed stream_decoder_fuzz text "$(printf 'a\xe4\xbd\xa0\xff b')"
seed tool_call_fuzz glm45 "$(printf '\003Hi <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>[1, {\"a\": true}]</arg_value>\n</tool_call>')"
seed tool_call_fuzz glm4 "$(printf '\001get\n{\"x\": 1}')"
# KV disk files (src/kv/disk_store_fuzz.cc): first byte 3 = a block payload framed with a right
# header (parent, 4 tokens, 32 K/V bytes), 2 = a conversation payload (tag, key, tokens, none
# pending), 1 = raw bytes (a header alone).
mkdir -p "$work/disk_store_fuzz"
printf '\003\001\000\000\000\000\000\000\000\004\000\000\000\001\000\000\000\002\000\000\000\003\000\000\000\004\000\000\000\040\000\000\000\000\000\000\000AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' \
  >"$work/disk_store_fuzz/block"
printf '\002\007\000\000\000\000\000\000\000\014\000\000\000conversation\002\000\000\000\005\000\000\000\006\000\000\000\000\000\000\000' \
  >"$work/disk_store_fuzz/conversation"
printf '\001GLMKVDSK\001\000\000\000' >"$work/disk_store_fuzz/header"
for t in "${targets[@]}"; do
  bin="$(find build-fuzz/src -name "$t" -type f -perm -u+x | head -1)"
  [[ -n "$bin" ]] || { echo "fuzz: $t was not built" >&2; exit 1; }
  mkdir -p "$work/$t" "$work/$t-crashes"
  echo "fuzz: $t for ${seconds} s"
  "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$work/$t-crashes/" -print_final_stats=1 "$work/$t" 2>"$work/$t.log" || {
    tail -40 "$work/$t.log" >&2
    mkdir -p build-fuzz/crashes && cp "$work/$t-crashes/"* build-fuzz/crashes/ 2>/dev/null || true
    echo "fuzz: $t failed; reproducers in build-fuzz/crashes/ ($bin FILE to rerun)" >&2
    exit 1
  }
  grep -E "^stat::number_of_executed_units" "$work/$t.log" || true
done
echo "fuzz: ${#targets[@]} targets ran ${seconds} s each without a finding"
