#!/bin/bash
# On the GPU machine, from the repository root, after `BUILD=build-cuda bash tools/cuda/package_e2e.sh`
# here: run(command="bash tools/cuda/run_draws_on_device.sh", carry=[".dev/cuda2-bin"]). From
# another worktree, copy the package and this script into an ignored folder of the checkout the
# device tool sends (BIN=.dev/NAME/cuda2-bin bash .dev/NAME/run_draws_on_device.sh), and set
# LOOM_BUILT_IN to the directory the binaries were built in.
# Device-side draws (issue 7): cuda_sampling_test (device vs host sampler: kept sets, agreement
# rate, chi-square, batch independence, NaN / -inf codes), its kernel benchmark, the graph runner
# and backend tests, then `loom bench --dummy-weights` of Llama-3.2-1B at concurrency 64 and 256
# with temperature 0.8 / top-p 0.9, device draws vs --no-device-sampling (every row's logits to the
# host sampler). Logs go to $OUT. Most important first: the run has a time limit.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
env_sh=$(dirname "$0")/device_env.sh
[ -f "$env_sh" ] || env_sh=tools/cuda/device_env.sh
. "$env_sh"  # libraries, LD_LIBRARY_PATH, the build's source dir ($LOOM_BUILT_IN)
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
t0=$SECONDS
timeout 150 $bin/cuda_sampling_test 2>&1 | tee "$out/sampling_test.log" |
  grep -E "^\[  (PASSED|FAILED)|FAILED|agreement|vocab [0-9]+:|chi2"
echo "   sampling test exit ${PIPESTATUS[0]} ($((SECONDS - t0)) s)"
timeout 40 $bin/cuda_sampling_test --gtest_also_run_disabled_tests --gtest_filter='*Bench*' \
  > "$out/sampling_bench.log" 2>&1
grep -E "^  " "$out/sampling_bench.log"
b() {  # concurrency extra...
  local c=$1; shift
  echo "== llama-3.2-1b c=$c $*" | tee -a "$out/bench.log"
  timeout 50 $bin/loom bench --device cuda --dummy-weights bench/configs/llama-3.2-1b.json \
    --prompt-tokens 512 --decode-prompt-tokens 128 --gen-tokens 64 --concurrency $c "$@" \
    2>> "$out/bench.err" | grep -E "^(prefill|decode)" | tee -a "$out/bench.log"
  echo "   exit ${PIPESTATUS[0]}" | tee -a "$out/bench.log"
}
# Device runs: the better of 2 repeats; host-sampled runs (~50x slower): 1.
draw="--temperature 0.8 --top-p 0.9"
b 64 $draw --repeat 2
b 64 $draw --no-device-sampling
b 256 $draw --repeat 2
b 256 $draw --no-device-sampling
b 64 --repeat 2  # greedy (device argmax): the reference the draws are measured against
b 256 --repeat 2
b 256 --temperature 0.8 --top-k 50 --repeat 2
timeout 90 $bin/cuda_graph_runner_test 2>&1 | tee "$out/graph_test.log" |
  grep -E "^\[  (PASSED|FAILED)|FAILED|draws:|Failure|Expected|Which is|row "
timeout 80 $bin/cuda_backend_test > "$out/backend_test.log" 2>&1
echo "   backend test exit $?"; grep -E "^\[  (PASSED|FAILED)|FAILED" "$out/backend_test.log"
