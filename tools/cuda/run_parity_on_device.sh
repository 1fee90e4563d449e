#!/bin/bash
# On the GPU machine, from the repository root: every CUDA test binary on the packaged build and
# cli_test (the default model through the engine on CUDA and on the CPU),
# then (BENCH=1) the issue-7 batch-1 set. Here: `BUILD=$PWD/build-cuda bash
# tools/cuda/package_e2e.sh`, then
#   run(command="bash tools/cuda/run_parity_on_device.sh", carry=[".dev/cuda2-bin"])
# Full logs go to $OUT; stdout gets each binary's verdict, the golden test's per-architecture
# figures (max normalized logits error, max KL vs HF transformers, greedy agreement) and the
# default model's greedy ids on CUDA vs the CPU.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
for t in cuda_backend_test cuda_sampling_test cuda_graph_runner_test cuda_golden_test cli_test; do
  timeout 240 $bin/$t > "$out/$t.log" 2>&1
  echo "$t: exit $? $(grep -E '^\[  PASSED|^\[  FAILED' "$out/$t.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED .*\.' "$out/$t.log" | head -20
done
grep -E 'rows: max normalized|greedy:|batched vs alone' "$out/cuda_golden_test.log"
check_greedy_ids
if [ "${BENCH:-0}" = 1 ]; then SET=batch1 bash tools/cuda/run_issue7_on_device.sh; fi
