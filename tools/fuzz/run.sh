#!/usr/bin/env bash
# Builds the fuzzers (the model-file parsers, the grammar compilers, the HTTP request parser and the
# KV block file header) with clang + libFuzzer + ASan/UBSan in build-fuzz/ and runs each for
# SECONDS (default 60) from a seed corpus of valid inputs generated at run time.
#   tools/fuzz/run.sh [SECONDS]        env: JOBS (default 2), LOOM_FUZZ_BUILD_DIR, LOOM_FUZZ_SEED
# The seed is fixed (default 1) so that `make test` is reproducible: the same tree explores the same
# inputs. Set LOOM_FUZZ_SEED=0 for a random seed when hunting for new bugs with a longer run.
# Exits non-zero if any fuzzer finds a crash, leak, timeout or UB; the reproducer is written to
# build-fuzz/fuzz-artifacts/ (replay it with: build-fuzz/tools/fuzz/fuzz_<name> <file>).
set -euo pipefail

secs=${1:-60}
seed=${LOOM_FUZZ_SEED:-1}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${LOOM_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-2}
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

mkdir -p "$build"
extra=()
if ! grep -q 'tools/fuzz' "$root/CMakeLists.txt"; then
  extra+=("-DCMAKE_PROJECT_INCLUDE=$root/tools/fuzz/wire.cmake")
fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DLOOM_FUZZ=ON -DLOOM_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_C_FLAGS=$san" "-DCMAKE_CXX_FLAGS=$san" \
  "${extra[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
ninja -C "$build" -j"$jobs" fuzz_safetensors fuzz_gguf fuzz_grammar fuzz_http_parser fuzz_kv_disk_header \
  fuzz_make_seeds

status=0
mkdir -p "$build/fuzz-artifacts"
# Grammar seeds: one valid spec per front end (the first byte picks it: 0 GBNF, 1 regex, 2
# choice, 3 JSON Schema; +4 puts it after a <think> section).
grammar_corpus="$build/fuzz-corpus/grammar"
mkdir -p "$grammar_corpus"
printf '\x00root ::= "a" item* ("," item)?\nitem ::= [a-z0-9] | "(" root ")"' > "$grammar_corpus/gbnf"
printf '\x01^(?:[0-9]{2,4}-\\w+|x?y*)$' > "$grammar_corpus/regex"
printf '\x02["yes","no","maybe"]' > "$grammar_corpus/choice"
printf '\x03{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"anyOf":[{"type":"integer","minimum":-5,"maximum":70},{"$ref":"#/$defs/n"}]}},"required":["a"],"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}}}' > "$grammar_corpus/schema"
printf '\x07{"enum":[1,"x",null,{"k":[true]}]}' > "$grammar_corpus/schema-after-reasoning"

# HTTP seeds: the first byte picks the piece size of the split-invariance check (fuzz_http_parser.cc).
http_corpus="$build/fuzz-corpus/http_parser"
mkdir -p "$http_corpus"
printf '\x05POST /v1/chat/completions?x=%%41 HTTP/1.1\r\nHost: localhost:8080\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}GET /health HTTP/1.1\r\nHost: a\r\n\r\n' > "$http_corpus/pipelined"
printf '\x02POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n4;ext=1\r\nabcd\r\n0\r\nTrailer: x\r\n\r\n' > "$http_corpus/chunked"
printf '\x09GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /x HTTP/1.1\r\nConnection: close\r\n\r\n' > "$http_corpus/versions"

for name in safetensors gguf grammar http_parser kv_disk_header; do
  corpus="$build/fuzz-corpus/$name"
  mkdir -p "$corpus"
  if [[ $name != grammar && $name != http_parser ]]; then
    ASAN_OPTIONS=detect_leaks=0 "$build/tools/fuzz/fuzz_make_seeds" "$name" "$corpus"
  fi
  echo "=== fuzz_$name for ${secs}s ($(ls "$corpus" | wc -l) corpus files)"
  if ! "$build/tools/fuzz/fuzz_$name" -max_total_time="$secs" -seed="$seed" -max_len=65536 -rss_limit_mb=2048 \
      -timeout=10 -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$name-" \
      "$corpus"; then
    echo "fuzz_$name FAILED: see $build/fuzz-artifacts/" >&2
    status=1
  fi
done
exit $status
