#!/bin/bash
# Issue 31 on the GPU machine, from the repository root: the quantized KV cache on CUDA.
# Here, first:
#   BUILD=$PWD/build BINS="loom cuda_backend_test cuda_attn_bench cuda_golden_test" \
#     OUT_DIR=$PWD/.dev/kvq bash tools/cuda/package_e2e.sh
# then run(command="bin=.dev/kvq bash tools/cuda/run_kv_quant_on_device.sh", carry=[".dev/kvq"]).
#   1. cuda_backend_test's attention / store tests (bf16 and quantized pools; $TESTS, a gtest
#      filter) and cuda_golden_test (the bf16 path unchanged);
#   2. cuda_attn_bench: decode attention alone on bf16, fp8 and int8 pools (KV GB/s counting the
#      bytes read, against the HBM read rate measured in the same run);
#   3. the default model's 200 greedy ids with --kv-quant fp8 / 8 on CUDA vs the CPU and vs bf16;
#   4. loom bench, Llama-3.1-8B shapes, --dummy-weights, bf16 KV vs --kv-quant fp8 alternating:
#      batch 1 at a 512-token context (twice each), batch 64 at 4096 (both caches hold it) and
#      batch 128 at 4096 (bf16's pool holds fewer rows on an 80 GB card).
# Logs go to $OUT; a summary to stdout. PART=1 runs 1-3 only, PART=2 only 4 (each fits one
# device call); PART=0 the essentials in one call: 1 without cuda_golden_test, 2, batch 1 and 64
# of 4, then 3.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${bin:-.dev/kvq}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader

part=${PART:-all}
if [ "$part" != 2 ]; then
  filter=${TESTS:-*Attention*:*QkvRopeStore*}
  timeout 300 $bin/cuda_backend_test --gtest_filter="$filter" > "$out/cuda_backend_test.log" 2>&1
  echo "cuda_backend_test $filter: exit $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|error|^  (fp8|int8|int4) " \
    "$out/cuda_backend_test.log" | head -60
  if [ "$part" != 0 ]; then
    timeout 200 $bin/cuda_golden_test > "$out/cuda_golden_test.log" 2>&1
    echo "cuda_golden_test: exit $?; $(grep -E '^\[  (PASSED|FAILED) ' "$out/cuda_golden_test.log" | tr '\n' ' ')"
  fi
fi

if [ "$part" != 2 ]; then
timeout 120 $bin/cuda_attn_bench 20 > "$out/attn_bench.log" 2>&1
echo "cuda_attn_bench: exit $?"
grep -E "HBM|old \(generic\)|decode auto|generic" "$out/attn_bench.log"

if [ "$part" = 0 ]; then  # one call's worth: the bench's key pairs, then greedy ids
  b() {
    local label=$1 c=$2 ctx=$3 rep=$4
    shift 4
    timeout 100 $bin/loom bench --device cuda --dummy-weights bench/configs/llama-3.1-8b.json "$@" \
      --prompt-tokens 64 --decode-prompt-tokens "$ctx" --gen-tokens 128 --concurrency "$c" \
      --repeat "$rep" > "$out/b.txt" 2>> "$out/bench.err"
    echo "loom $label c=$c ctx=$ctx: $(grep -E '^decode' "$out/b.txt" | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ');"
    cat "$out/b.txt" >> "$out/bench_all.txt"
  }
  b "8b bf16" 1 512 2
  b "8b fp8" 1 512 2 --kv-quant fp8
  b "8b bf16" 64 4096 1
  b "8b fp8" 64 4096 1 --kv-quant fp8
fi
ids=0,15,251,78,9,1203,44,310,72,5
for kq in off fp8 8; do
  for dev in cuda cpu; do
    timeout 60 $bin/loom generate models/default --device $dev --kv-quant $kq --ids $ids -n 200 \
      --temp 0 --ignore-eos > "$out/gen_${dev}_$kq.txt" 2> "$out/gen_${dev}_$kq.err"
  done
done
agree() {  # how many leading ids two outputs share
  python3 - "$1" "$2" <<'EOF'
import re, sys
a, b = (re.findall(r"-?\d+", open(p).read()) for p in sys.argv[1:3])
n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print(f"{n}/{min(len(a), len(b))}")
EOF
}
for kq in fp8 8; do
  echo "greedy --kv-quant $kq: cuda vs cpu $(agree "$out/gen_cuda_$kq.txt" "$out/gen_cpu_$kq.txt")" \
    "leading ids agree; cuda $kq vs cuda bf16 $(agree "$out/gen_cuda_$kq.txt" "$out/gen_cuda_off.txt")"
done

fi
[ "$part" = 1 ] || [ "$part" = 0 ] && exit 0

b() {  # label concurrency context repeats loom-arguments...
  local label=$1 c=$2 ctx=$3 rep=$4
  shift 4
  timeout 170 $bin/loom bench --device cuda --dummy-weights bench/configs/llama-3.1-8b.json "$@" \
    --prompt-tokens 64 --decode-prompt-tokens "$ctx" --gen-tokens 128 --concurrency "$c" \
    --repeat "$rep" > "$out/b.txt" 2>> "$out/bench.err"
  echo "loom $label c=$c ctx=$ctx: $(grep -E '^decode' "$out/b.txt" | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ' ');" \
    "$(grep -E '^(model|kv)' "$out/b.txt" | tr -s ' ' | tr '\n' ' ')"
  cat "$out/b.txt" >> "$out/bench_all.txt"
}
b "8b bf16" 1 512 2
b "8b fp8" 1 512 2 --kv-quant fp8
b "8b bf16" 1 512 2
b "8b fp8" 1 512 2 --kv-quant fp8
b "8b bf16" 64 4096 1
b "8b fp8" 64 4096 1 --kv-quant fp8
b "8b bf16" 128 4096 1
b "8b fp8" 128 4096 1 --kv-quant fp8
