#!/bin/bash
# On the GPU machine, from the repository root: the issue-7 benchmark set with its limits and a
# peer measured in the same run. Here: `BUILD=$PWD/build-cuda bash tools/cuda/package_e2e.sh`,
# then run(command="bash tools/cuda/run_issue7_on_device.sh", carry=[".dev/cuda2-bin"]).
#   1. loom bench --dummy-weights: decode at C = 1 / 8 / 64 / 256 (Llama-3.1-8B, Llama-3.2-1B),
#      prefill of a 4096-token prompt (8B);
#   2. cuda_attn_bench: HBM read bandwidth (a 4 GiB read-only reduction) and decode attention;
#   3. cuda_prefill_bench: the cuBLASLt bf16 GEMM rate and a whole 4k-token 8B prefill;
#   4. HF transformers (static cache, bf16, same configs) as the decode peer.
# Logs go to $OUT; a summary to stdout.
# SET=batch1: the batch-1 rows only (3 rounds each), C = 64 / 256 for the 8B, the HBM probe and
# decode attention, and the HF batch-1 peers (about 4 minutes instead of 7).
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
b() {  # model concurrency prompt gen
  local m=$1 c=$2 p=${3:-512} g=${4:-128}
  timeout 120 $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json --prompt-tokens $p \
    --decode-prompt-tokens 512 --gen-tokens $g --concurrency $c --repeat 2 > "$out/b.txt" 2>> "$out/bench.err"
  echo "loom $m c=$c prompt=$p: $(grep -E '^(model|prefill|decode)' "$out/b.txt" | tr -s ' ' | tr '\n' ' ')"
}
if [ "${SET:-all}" = batch1 ]; then
  for r in 1 2 3; do b llama-3.1-8b 1; b llama-3.2-1b 1; done
  b llama-3.1-8b 64; b llama-3.1-8b 256
else
  for c in 1 8 64 256; do b llama-3.1-8b $c; done
  for c in 1 8 64 256; do b llama-3.2-1b $c; done
  b llama-3.1-8b 1 4096 8
fi
timeout 60 $bin/cuda_attn_bench 20 > "$out/attn_bench.log" 2>&1
grep -E "HBM|decode auto|old \(generic\)" "$out/attn_bench.log"
if [ "${SET:-all}" != batch1 ]; then
  timeout 60 $bin/cuda_prefill_bench > "$out/prefill_bench.log" 2>&1
  grep -E "square|\(c\)" "$out/prefill_bench.log"
fi
batches="1 64"
[ "${SET:-all}" = batch1 ] && batches=1
for m in llama-3.2-1b llama-3.1-8b; do
  for bs in $batches; do
    timeout 150 python3 bench/hf_decode_peer.py bench/configs/$m.json --batch $bs 2>> "$out/hf.err" | tail -1
  done
done
if [ "${HF_COMPILE:-0}" = 1 ]; then
  timeout 150 python3 bench/hf_decode_peer.py bench/configs/llama-3.2-1b.json --batch 1 --compile 2>> "$out/hf.err" | tail -1
fi
