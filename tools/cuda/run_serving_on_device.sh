#!/bin/bash
# Issue 23's H200 serving figure, in one call: llama.cpp's llama-server built here from the npm
# bundle's source, then both servers under the same load (tools/loadgen/loadgen.py, 512 requests
# of 1000 prompt / 1000 output tokens all submitted at once), Llama-3.1-8B shapes, random weights
# (loom: bf16 --dummy-weights; llama.cpp: an F16 GGUF of the same shapes) and the real Llama 3.1
# tokenizer in both, so both detokenize what they stream.
#
# Here, first:
#   BUILD=$PWD/build-cuda2 BINS="loom" bash tools/cuda/package_e2e.sh          # -> .dev/cuda2-bin
#   tar chJf .dev/cuda2-bin/tok-llama3.tar.xz -C tests/tokenizers/tokenizer-llama3_1-lenml .
#   bash tools/cuda/pack_llamacpp.sh                                           # -> .dev/llamacpp
# then run(command="bash tools/cuda/run_serving_on_device.sh", carry=[".dev/cuda2-bin", ".dev/llamacpp"]).
#   1. builds llama-server (CMake + ninja, all cores) while bench/random_gguf.py writes the GGUF
#      (with the tokenizer: --tokenizer);
#   2. llama-server: -np $LLAMA_SLOTS slots of 2048 tokens each (256: 512 slots of 2048 tokens of
#      F16 KV do not fit next to the weights), flash attention, every layer on the GPU; the load;
#   3. loom serve: --batch 512, the pool from --gpu-memory-fraction 0.95, --step-trace; the same
#      load; the trace summarized (mixed prefill + decode steps vs decode-only).
# Environment: N (requests, 512), PROMPT / GEN (1000 / 1000), LIMIT (seconds per load run, 200),
# LLAMA_MODES ("stream plain": llama-server streamed and with plain JSON replies), SKIP_LLAMA=1 (loom only), LOOM_ARMS (loom servers run one after another: "name=flags;name=flags").
# Also writes the embeddings golden (tools/goldens/embeddings_golden.py) to $OUT/embeddings.
# Logs, traces and the loadgen JSON go to $OUT/serving-logs.tar.xz (rewritten after each server, so
# a call cut short keeps what finished); the summaries to stdout.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
src=${LLAMACPP_SRC:-.dev/llamacpp/src.tar.xz}
work=${LLAMACPP_WORK:-/tmp/llamacpp}
n=${N:-512} prompt=${PROMPT:-1000} gen=${GEN:-1000} limit=${LIMIT:-200}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
mkdir -p /tmp/tok-llama3 && tar xJf "$bin/tok-llama3.tar.xz" -C /tmp/tok-llama3
# Random weights sample any token; byte-level tokens that are part of a character would make
# llama-server fail the request at its end (bench/utf8_safe_tokenizer.py): both servers get the
# copy in which every token is whole UTF-8.
python3 bench/utf8_safe_tokenizer.py /tmp/tok-llama3 /tmp/tok-safe
logs=/tmp/serving-logs
mkdir -p "$logs"

load() {  # name port [loadgen flags]
  local name=$1 port=$2; shift 2
  python3 tools/loadgen/loadgen.py "$@" --url "http://127.0.0.1:$port" --burst --num-requests "$n" \
    --prompt-tokens "$prompt" --output-tokens "$gen" --vocab-range 1000:100000 \
    --time-limit "$limit" --json "$logs/load_$name.json" > "$logs/load_$name.txt" 2>&1
  echo "== $name: $(head -1 "$logs/load_$name.txt")"
  tail -n +2 "$logs/load_$name.txt"
  tar cJf "$out/serving-logs.tar.xz" -C "$logs" .
}
wait_health() {  # port pid log
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" > /dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { tail -20 "$3"; return 1; }
    sleep 0.5
  done
  return 1
}

# The embeddings golden of src/engine/embedding_test.cc (seconds, one core) while llama.cpp builds.
mkdir -p "$out/embeddings"
python3 tools/goldens/embeddings_golden.py tests/goldens/models/qwen3 "$out/embeddings" \
  > "$logs/embeddings.log" 2>&1 &
emb_pid=$!

if [ "${SKIP_LLAMA:-0}" != 1 ]; then
  mkdir -p "$work" && tar xJf "$src" -C "$work"
  (PYTHONPATH=$work/gguf-py python3 bench/random_gguf.py bench/configs/llama-3.1-8b.json \
     "$work/8b-f16.gguf" --tokenizer /tmp/tok-safe) > "$logs/gguf.log" 2>&1 &
  gguf_pid=$!
  build_llamacpp "$work" "$logs" 400 llama-server
  wait $gguf_pid
  tail -1 "$logs/gguf.log"
  wait $emb_pid; echo "embeddings golden: exit $? ($(tail -1 "$logs/embeddings.log"))"
  slots=${LLAMA_SLOTS:-256}
  "$work/build/bin/llama-server" -m "$work/8b-f16.gguf" -ngl 99 -fa on -np "$slots" \
    -c $((slots * 2048)) -no-kvu -b 2048 -ub 512 --threads-http $((n + 8)) --no-webui -cram 0 \
    --host 127.0.0.1 --port 8081 > "$logs/llama_server.log" 2>&1 &
  lpid=$!
  if wait_health 8081 $lpid "$logs/llama_server.log"; then
    for mode in ${LLAMA_MODES:-stream}; do  # stream, plain (non-streaming replies)
      if [ "$mode" = plain ]; then load llama-server-plain 8081 --no-stream; else load llama-server 8081; fi
    done
  else
    echo "llama-server did not start"
  fi
  kill $lpid 2>/dev/null
  wait $lpid 2>/dev/null
  rm -f "$work/8b-f16.gguf"
fi

# loom: one server per arm of LOOM_ARMS ("name=flags;name=flags"), each with --step-trace, whose
# steps are summarized: mixed (prefill chunks + decode rows) vs decode-only, per-step exec time.
loom_arm() {  # name flags...
  local name=$1; shift
  "$bin/loom" serve --device cuda --dummy-weights bench/configs/llama-3.1-8b.json \
    --tokenizer /tmp/tok-safe --port 8080 --no-open --batch 512 --max-model-len 2048 \
    --gpu-memory-fraction 0.95 --step-trace "$@" > "$logs/$name.log" 2> "$logs/$name.trace" &
  local pid=$!
  if wait_health 8080 $pid "$logs/$name.log"; then
    grep -E "context|batch" "$logs/$name.log" | head -2
    load "$name" 8080
    curl -s http://127.0.0.1:8080/stats > "$logs/${name}_stats.json"
  else
    echo "loom serve ($name) did not start"
  fi
  kill $pid
  wait $pid 2>/dev/null
  python3 - "$logs/$name.trace" <<'PY'
import sys
mixed, dec = [], []
for line in open(sys.argv[1], errors="replace"):
    f = line.split()
    if len(f) < 12 or f[0] != "step":
        continue
    seqs, tokens, ex, prev = int(f[3]), int(f[5]), int(f[9]), int(f[11])
    (dec if tokens == seqs else mixed).append((seqs, tokens, ex, prev))
for label, xs in (("mixed", mixed), ("decode-only", dec)):
    if not xs:
        continue
    n = len(xs)
    print(f"  {label}: {n} steps, mean rows {sum(x[0] for x in xs)/n:.0f}, tokens {sum(x[1] for x in xs)/n:.0f}, "
          f"exec {sum(x[2] for x in xs)/n/1e3:.2f} ms, period {sum(x[3] for x in xs)/n/1e3:.2f} ms, "
          f"total exec {sum(x[2] for x in xs)/1e6:.1f} s")
big = [x for x in dec if x[0] >= 480]
if big:
    print(f"  decode-only with >= 480 rows: {len(big)} steps, exec {sum(x[2] for x in big)/len(big)/1e3:.2f} ms")
PY
}
IFS=';' read -ra arms <<< "${LOOM_ARMS:-loom=}"
for arm in "${arms[@]}"; do
  loom_arm "${arm%%=*}" ${arm#*=}
done
tar cJf "$out/serving-logs.tar.xz" -C "$logs" .
