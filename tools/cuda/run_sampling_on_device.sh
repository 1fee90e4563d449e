#!/bin/bash
# On the GPU machine, from the repository root, after `BUILD=build-cuda bash tools/cuda/package_e2e.sh`
# here: run(command="bash tools/cuda/run_sampling_on_device.sh", carry=[".dev/cuda2-bin"]). The
# device tool sends the session's own checkout: from another worktree, copy the package and this
# script into an ignored folder of that checkout (BIN=.dev/NAME bash .dev/NAME/<this script>).
# Device-side greedy sampling (issue 7): the argmax kernel and runner tests, greedy ids of the
# default model on CUDA (device argmax) vs CPU (host sampler), then `loom bench --dummy-weights`
# for Llama-3.1-8B / Llama-3.2-1B at concurrency 1/8/64, and A/B runs with --no-device-sampling
# (every row's logits to the host, as before, but into pinned memory without the zero-fill).
# Logs go to $OUT. Most important first: the run has a time limit.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh  # libraries, LD_LIBRARY_PATH, the build's source dir ($LOOM_BUILT_IN)
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
timeout 60 $bin/cuda_backend_test --gtest_filter='CudaArgmax*:CudaBackendTest.AllocUploadAndCopies' \
  2>&1 | tee "$out/argmax_test.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|OK \]"
timeout 90 $bin/cuda_graph_runner_test 2>&1 | tee "$out/graph_test.log" | grep -E "^\[|seqs:"
check_greedy_ids " (device argmax)" 100
b() {  # model concurrency extra...
  local m=$1 c=$2; shift 2
  echo "== $m c=$c $*" | tee -a "$out/bench.log"
  timeout 60 $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json \
    --prompt-tokens 512 --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $c \
    --repeat 2 "$@" 2>> "$out/bench.err" | grep -E "^(prefill|decode)" | tee -a "$out/bench.log"
  echo "   exit ${PIPESTATUS[0]}" | tee -a "$out/bench.log"
}
b llama-3.1-8b 64
b llama-3.1-8b 64 --no-device-sampling
b llama-3.1-8b 8
b llama-3.2-1b 1
b llama-3.1-8b 1
b llama-3.2-1b 64
b llama-3.2-1b 8
b llama-3.1-8b 8 --no-device-sampling
b llama-3.2-1b 1 --no-device-sampling
b llama-3.2-1b 64 --no-device-sampling
