#!/bin/bash
# Issue 25 on the GPU machine, from the repository root: fp8 weights (DType::kFP8) kept in 1 byte.
# Here, first:
#   BUILD=$PWD/build BINS="loom cuda_backend_test cuda_attn_bench" bash tools/cuda/package_e2e.sh
# then run(command="bash tools/cuda/run_fp8_on_device.sh", carry=[".dev/cuda2-bin"]).
#   1. cuda_backend_test's quantized-weight tests ($TESTS, a gtest filter), fp8 among them;
#   2. loom bench, Llama-3.1-8B shapes, --dummy-weights in bf16 and with --quantize fp8 (decode at
#      C = 1 twice, 8, 64; a 4k-token prefill), the way docs/benchmarks.md reports decode;
#   3. cuda_attn_bench's HBM read probe (the roofline's bandwidth).
# Logs go to $OUT; a summary to stdout. LOOM_ARGS: extra flags for every loom bench.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader

timeout 240 $bin/cuda_backend_test --gtest_filter="${TESTS:-*Quant*}" > "$out/cuda_backend_test.log" 2>&1
echo "cuda_backend_test ${TESTS:-*Quant*}: exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|error" "$out/cuda_backend_test.log" | head -30

b() {  # label concurrency prompt-tokens loom-arguments...
  local label=$1 c=$2 p=$3
  shift 3
  timeout 150 $bin/loom bench --device cuda --dummy-weights bench/configs/llama-3.1-8b.json "$@" \
    ${LOOM_ARGS:-} --prompt-tokens "$p" --decode-prompt-tokens 512 --gen-tokens 128 \
    --concurrency "$c" --repeat 2 > "$out/b.txt" 2>> "$out/bench.err"
  echo "loom $label c=$c p=$p: $(grep -E '^(prefill|decode)' "$out/b.txt" | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ');" \
    "$(grep -E '^model' "$out/b.txt" | tr -s ' ')"
  cat "$out/b.txt" >> "$out/bench_all.txt"
}
fp8="--quantize fp8 --cuda-tune quant_fp8=1"
b "8b bf16" 1 64
b "8b fp8" 1 64 $fp8
b "8b fp8" 1 64 $fp8
b "8b bf16" 8 64
b "8b fp8" 8 64 $fp8
b "8b bf16" 64 64
b "8b fp8" 64 64 $fp8
b "8b bf16 prefill" 1 4096
b "8b fp8 prefill" 1 4096 $fp8
timeout 60 $bin/cuda_attn_bench 20 > "$out/attn_bench.log" 2>&1
grep -E "HBM" "$out/attn_bench.log"
