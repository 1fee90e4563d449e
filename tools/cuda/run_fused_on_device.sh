#!/bin/bash
# On the GPU machine, from the repository root, after `BUILD=$PWD/build-cuda bash
# tools/cuda/package_e2e.sh` here: run(command="bash tools/cuda/run_fused_on_device.sh",
# carry=[".dev/cuda2-bin"]). Batch-1 decode work of issue 7: fused q|k|v and gate|up projections,
# fused add + RMSNorm, the q/k norm + rope + KV store kernel, programmatic dependent launch.
# Tests first (fused ops vs CPU, graph vs eager, CUDA vs CPU greedy ids), then `loom bench
# --dummy-weights` with A/B runs in the same session: LOOM_CUDA_PDL=0 (no PDL), LOOM_CUDA_FUSE=0
# (separate projection weights: the unfused kernels). Logs go to $OUT.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
timeout 120 $bin/cuda_backend_test 2>&1 | tee "$out/backend_test.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|Failure" | head -20
timeout 90 $bin/cuda_graph_runner_test 2>&1 | tee "$out/graph_test.log" | grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" | head
check_greedy_ids
for m in qwen3-8b gemma-3-4b; do
  for f in 1 0; do
    LOOM_CUDA_FUSE=$f timeout 60 $bin/loom generate --device cuda --dummy-weights bench/configs/$m.json \
      --ids 5,17,300,4000,12,9 -n 60 --temp 0 --ignore-eos > "$out/gen_${m}_fuse$f.txt" 2>> "$out/gen.err"
  done
  cmp -s "$out/gen_${m}_fuse1.txt" "$out/gen_${m}_fuse0.txt" && r=identical || r=DIFFERENT
  echo "$m dummy 60 greedy ids, fused vs unfused: $r"
done
b() {  # label env model concurrency
  local label=$1 env=$2 m=$3 c=$4
  echo "== $label $m c=$c" | tee -a "$out/bench.log"
  env $env timeout 90 $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json \
    --prompt-tokens 512 --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $c \
    --repeat 2 2>> "$out/bench.err" | grep -E "^(prefill|decode)" | tee -a "$out/bench.log"
}
b new X=1 llama-3.2-1b 1
b no-pdl LOOM_CUDA_PDL=0 llama-3.2-1b 1
b unfused LOOM_CUDA_FUSE=0 llama-3.2-1b 1
b new X=1 llama-3.1-8b 1
b no-pdl LOOM_CUDA_PDL=0 llama-3.1-8b 1
b unfused LOOM_CUDA_FUSE=0 llama-3.1-8b 1
b new X=1 llama-3.1-8b 64
b new X=1 llama-3.2-1b 64
b new X=1 llama-3.1-8b 256
b new X=1 qwen3-8b 1
b new X=1 llama-3.1-8b 8
