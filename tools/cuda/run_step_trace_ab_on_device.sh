#!/bin/bash
# The engine's host timing of decode steps with tools (A) and without (B) at concurrency 64 on the
# GPU machine: `loom serve --step-trace` on a fresh server per arm, one round of
# tools/cuda/itl_tools_ab.py each, then the means over steps of 64 one-token rows. Package as in
# run_itl_tools_on_device.sh (bin=.dev/g25: loom, lib.tar.xz, tok-qwen3.tar.xz); then
# run(command="bash tools/cuda/run_step_trace_ab_on_device.sh", carry=[".dev/g25"]).
set -uo pipefail
bin=${bin:-.dev/g25}; out=${OUT:-/tmp}
. tools/cuda/device_env.sh
mkdir -p /tmp/tok-qwen3 && tar xJf "$bin/tok-qwen3.tar.xz" -C /tmp/tok-qwen3
for kind in A B; do
  "$bin/loom" serve --device cuda --dummy-weights bench/configs/qwen3-8b.json --tokenizer /tmp/tok-qwen3 \
    --port 8080 --no-open --batch 64 --max-model-len 4096 --step-trace > "$out/serve-$kind.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 240); do curl -sf http://127.0.0.1:8080/health >/dev/null 2>&1 && break; sleep 0.5; done
  PYTHONUNBUFFERED=1 python3 tools/cuda/itl_tools_ab.py --tokenizer /tmp/tok-qwen3 --kinds $kind --rounds 1 | grep round
  kill $pid; wait $pid 2>/dev/null
  echo "== $kind (steps with 64 seqs, 1 token each)"
  awk '/^step .* seqs 64 tokens 64 /{n++; e+=$10; p+=$12} END{printf "exec_us %.0f since_prev_us %.0f (n %d)\n", e/n, p/n, n}' "$out/serve-$kind.log"
  awk '/masks_us/{n++; m+=$4; s+=$6; c+=$8} END{printf "masks_us %.0f sample_us %.0f commit_us %.0f (n %d)\n", m/n, s/n, c/n, n}' "$out/serve-$kind.log"
done
