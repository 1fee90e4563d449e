#!/bin/bash
# On the GPU machine, from the repository root, after `BUILD=$PWD/build-cuda bash
# tools/cuda/package_e2e.sh` here (it also packs cuda_prefill_bench):
#   run(command="bash tools/cuda/run_decode_on_device.sh", carry=[".dev/cuda2-bin"]).
# Issue 7 check-up: every CUDA test, CUDA vs CPU greedy ids, `loom bench --dummy-weights` decode
# at C = 1 / 64 / 256 and the 4k-token prefill, cuda_prefill_bench (cuBLASLt GEMM rate in the
# same run), then (NCU=1) per-kernel times of 1B batch-1 decode steps (run_ncu_step_on_device.sh).
# EXTRA_ENV: A/B variable for a second pass of the C = 1 benches. Logs go to $OUT.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
timeout 150 $bin/cuda_backend_test 2>&1 | tee "$out/backend_test.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|Failure" | head -20
timeout 90 $bin/cuda_graph_runner_test 2>&1 | tee "$out/graph_test.log" | grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" | head
check_greedy_ids
b() {  # label env model concurrency prompt gen
  local label=$1 env=$2 m=$3 c=$4 p=${5:-512} g=${6:-128}
  echo "== $label $m c=$c prompt=$p" | tee -a "$out/bench.log"
  env $env timeout 90 $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json \
    --prompt-tokens $p --decode-prompt-tokens 512 --gen-tokens $g --concurrency $c \
    --repeat 2 2>> "$out/bench.err" | grep -E "^(prefill|decode)" | tee -a "$out/bench.log"
}
b new X=1 llama-3.2-1b 1
b new X=1 llama-3.1-8b 1
b new X=1 llama-3.1-8b 1 4096 8
b new X=1 llama-3.1-8b 64
b new X=1 llama-3.1-8b 256
b new X=1 llama-3.2-1b 64
if [ -n "${EXTRA_ENV:-}" ]; then
  b ab "$EXTRA_ENV" llama-3.2-1b 1
  b ab "$EXTRA_ENV" llama-3.1-8b 1
fi
[ -x $bin/cuda_prefill_bench ] && timeout 60 $bin/cuda_prefill_bench > "$out/prefill_bench.log" 2>&1
grep -E "TFLOP|GEMM|share|ratio" "$out/prefill_bench.log" | head -30
if [ "${NCU:-0}" = 1 ]; then MODELS=llama-3.2-1b bash tools/cuda/run_ncu_step_on_device.sh; fi
