#!/bin/bash
# Issue 25 on the GPU machine, from the repository root: GGUF weights kept quantized.
# Here, first:
#   BUILD=$PWD/build BINS="loom cuda_backend_test cuda_attn_bench cuda_bench" bash tools/cuda/package_e2e.sh
#   bash tools/cuda/pack_llamacpp.sh          # llama.cpp's source (its gguf-py writes the files)
# then run(command="bash tools/cuda/run_quant_on_device.sh", carry=[".dev/cuda2-bin", ".dev/llamacpp"]).
#   1. bench/random_gguf.py writes Llama-3.1-8B-shaped GGUFs with random codes: Q4_K_M
#      (llama.cpp's mix of Q4_K and Q6_K) and Q8_0, while cuda_backend_test runs the quantized
#      kernels' tests ($TESTS, a gtest filter);
#   2. loom bench on each file (C = 1 twice, C = 64) and on bf16 --dummy-weights of the same
#      shapes, the way docs/benchmarks.md reports decode; cuda_attn_bench's HBM read probe (the
#      roofline's bandwidth); cuda_bench qgemv (each quantized GEMV shape alone);
#   3. LLAMA=1: llama.cpp built here (while 1-2 run) and llama-bench tg128 on the same files
#      (-ngl 99 -fa 1, 3 repetitions), the same-run peer.
# Logs go to $OUT; a summary to stdout. LOOM_ARGS: extra flags for every loom bench.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
src=${LLAMACPP_SRC:-.dev/llamacpp/src.tar.xz}
work=${LLAMACPP_WORK:-/tmp/llamacpp}
quants=${QUANTS:-q4_k_m q8_0}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader

mkdir -p "$work" && tar xJf "$src" -C "$work"
(
  for q in $quants; do
    PYTHONPATH=$work/gguf-py python3 bench/random_gguf.py bench/configs/llama-3.1-8b.json \
      "$work/8b-$q.gguf" --quant "$q"
  done
) > "$out/gguf.log" 2>&1 &
gguf_pid=$!
if [ "${LLAMA:-0}" = 1 ]; then
  build_llamacpp "$work" "$out" 420 llama-bench > "$out/llamacpp_build_status.txt" 2>&1 &
  build_pid=$!
fi

timeout 300 $bin/cuda_backend_test --gtest_filter="${TESTS:-*Quant*:CudaBackendTest.*:CudaFusedOpsTest.*}" \
  > "$out/cuda_backend_test.log" 2>&1
echo "cuda_backend_test: exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|error" "$out/cuda_backend_test.log" | head -30
wait $gguf_pid
cat "$out/gguf.log"

b() {  # label concurrency loom-arguments...
  local label=$1 c=$2
  shift 2
  timeout 150 $bin/loom bench --device cuda "$@" ${LOOM_ARGS:-} --prompt-tokens 64 \
    --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $c --repeat 2 \
    > "$out/b.txt" 2>> "$out/bench.err"
  echo "loom $label c=$c: $(grep -E '^decode' "$out/b.txt" | tr -s ' ' | cut -d' ' -f2) decode tok/s;" \
    "$(grep -E '^model' "$out/b.txt" | tr -s ' ')"
  cat "$out/b.txt" >> "$out/bench_all.txt"
}
for q in $quants; do
  b "8b $q" 1 "$work/8b-$q.gguf"
  b "8b $q" 1 "$work/8b-$q.gguf"
  b "8b $q" 64 "$work/8b-$q.gguf"
done
b "8b bf16" 1 --dummy-weights bench/configs/llama-3.1-8b.json
b "8b bf16" 64 --dummy-weights bench/configs/llama-3.1-8b.json
timeout 150 $bin/cuda_bench qgemv > "$out/qgemv.log" 2>&1
grep -E "GB/s" "$out/qgemv.log"
timeout 60 $bin/cuda_attn_bench 20 > "$out/attn_bench.log" 2>&1
grep -E "HBM" "$out/attn_bench.log"

if [ "${LLAMA:-0}" = 1 ]; then
  wait $build_pid
  cat "$out/llamacpp_build_status.txt"
  for q in $quants; do
    timeout 150 "$work/build/bin/llama-bench" -m "$work/8b-$q.gguf" -ngl 99 -fa 1 -p 0 -n 128 \
      -d 0,512 -r 3 -o md > "$out/llama_bench_$q.md" 2> "$out/llama_bench_$q.err"
    echo "llama.cpp 8b $q:"
    grep -E "tg128" "$out/llama_bench_$q.md"
  done
fi
rm -f "$work"/*.gguf
