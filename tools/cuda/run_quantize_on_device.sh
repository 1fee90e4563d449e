#!/bin/bash
# Issue 25 on the GPU machine, from the repository root: `loom quantize` against llama.cpp's
# `llama-quantize` byte for byte, and q5_K kept quantized on the GPU. Here, first:
#   BUILD=$PWD/build BINS="loom cuda_backend_test cuda_bench" bash tools/cuda/package_e2e.sh
#   bash tools/cuda/pack_llamacpp.sh          # llama.cpp's source (llama-quantize, gguf-py)
# then run(command="bash tools/cuda/run_quantize_on_device.sh", carry=[".dev/cuda2-bin", ".dev/llamacpp"]).
#   1. llama-quantize built for the CPU (while bench/random_gguf.py writes a Llama-3.2-1B-shaped
#      F16 GGUF of random values and a Llama-3.1-8B-shaped Q5_K_M one of random codes, and
#      cuda_backend_test runs the quantized kernels' tests);
#   2. loom bench on the 8B Q5_K_M with q5_K kept quantized (C = 1 twice, C = 64) and dequantized
#      (C = 1), and bf16 --dummy-weights (C = 1) in the same run; cuda_bench qgemv (each quantized
#      GEMV shape alone);
#   3. the 1B F16 file quantized by both tools to each of $SCHEMES (SCHEMES="" skips 3 and the
#      llama.cpp build): `cmp` of the two files, and on
#      a difference the tensors (name, type, bytes) and keys that differ (gguf-py).
# Logs go to $OUT; a summary to stdout.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
src=${LLAMACPP_SRC:-.dev/llamacpp/src.tar.xz}
work=${LLAMACPP_WORK:-/tmp/llamacpp}
schemes=${SCHEMES-Q4_K_M Q5_K_M Q6_K Q8_0 Q4_K_S Q4_0}  # SCHEMES="": no comparison
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
nproc=$(nproc)

mkdir -p "$work" && tar xJf "$src" -C "$work"
[ -n "$schemes" ] && (
  t0=$(date +%s)
  cmake -S "$work" -B "$work/build-cpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF > "$out/llamacpp_cmake.log" 2>&1
  timeout 300 ninja -C "$work/build-cpu" llama-quantize > "$out/llamacpp_build.log" 2>&1
  echo "llama-quantize build: exit $? after $(($(date +%s) - t0)) s"
) > "$out/llamacpp_status.txt" 2>&1 &
build_pid=$!  # (the last background job: the build, or none)
(
  export PYTHONPATH=$work/gguf-py
  [ -n "$schemes" ] && python3 bench/random_gguf.py bench/configs/llama-3.2-1b.json "$work/1b-f16.gguf"
  python3 bench/random_gguf.py bench/configs/llama-3.1-8b.json "$work/8b-q5_k_m.gguf" --quant q5_k_m
) > "$out/gguf.log" 2>&1 &
gguf_pid=$!

timeout 200 $bin/cuda_backend_test --gtest_filter="${TESTS:-*Quant*}" > "$out/cuda_backend_test.log" 2>&1
echo "cuda_backend_test ${TESTS:-*Quant*}: exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|error" "$out/cuda_backend_test.log" | head -30
wait $gguf_pid
tail -3 "$out/gguf.log"

b() {  # label concurrency loom-arguments...
  local label=$1 c=$2
  shift 2
  timeout 150 $bin/loom bench --device cuda "$@" --prompt-tokens 64 --decode-prompt-tokens 512 \
    --gen-tokens 128 --concurrency $c --repeat 2 > "$out/b.txt" 2>> "$out/bench.err"
  echo "loom $label c=$c: $(grep -E '^decode' "$out/b.txt" | tr -s ' ' | cut -d' ' -f2) decode tok/s;" \
    "$(grep -E '^model' "$out/b.txt" | tr -s ' ')"
  cat "$out/b.txt" >> "$out/bench_all.txt"
}
# q5_K kept quantized (the default) and dequantized to bf16 (--cuda-tune quant_q5k=0).
b "8b q5_k_m kept" 1 "$work/8b-q5_k_m.gguf"
b "8b q5_k_m kept" 1 "$work/8b-q5_k_m.gguf"
b "8b q5_k_m kept" 64 "$work/8b-q5_k_m.gguf"
b "8b q5_k_m as bf16" 1 "$work/8b-q5_k_m.gguf" --cuda-tune quant_q5k=0
b "8b bf16" 1 --dummy-weights bench/configs/llama-3.1-8b.json
rm -f "$work/8b-q5_k_m.gguf"
timeout 120 $bin/cuda_bench qgemv > "$out/qgemv.log" 2>&1
grep -E "GB/s" "$out/qgemv.log" | grep -E "q5_K|q4_K" | head -12

[ -n "$schemes" ] && wait $build_pid && cat "$out/llamacpp_status.txt"
lq=$work/build-cpu/bin/llama-quantize
for q in $schemes; do
  t0=$(date +%s.%N)
  timeout 200 "$lq" "$work/1b-f16.gguf" "$work/lq-$q.gguf" "$q" "$nproc" > "$out/llama_quantize_$q.log" 2>&1
  t1=$(date +%s.%N)
  timeout 200 $bin/loom quantize "$work/1b-f16.gguf" "$work/loom-$q.gguf" "$q" --threads "$nproc" \
    > "$out/loom_quantize_$q.log" 2>&1
  t2=$(date +%s.%N)
  printf "%-7s llama-quantize %5.1f s, loom quantize %5.1f s: " "$q" "$(echo "$t1 - $t0" | bc)" \
    "$(echo "$t2 - $t1" | bc)"
  if cmp -s "$work/lq-$q.gguf" "$work/loom-$q.gguf"; then
    echo "identical ($(stat -c %s "$work/loom-$q.gguf") bytes)"
  else
    echo "DIFFERENT: $(cmp "$work/lq-$q.gguf" "$work/loom-$q.gguf" 2>&1 | head -1)"
    PYTHONPATH=$work/gguf-py python3 - "$work/lq-$q.gguf" "$work/loom-$q.gguf" <<'PY' | head -20
import sys
from gguf import GGUFReader
a, b = GGUFReader(sys.argv[1]), GGUFReader(sys.argv[2])
ka, kb = list(a.fields), list(b.fields)
if ka != kb:
    print("  keys differ:", [k for k in ka if k not in kb], [k for k in kb if k not in ka],
          "order same" if sorted(ka) == sorted(kb) else "")
ta = {t.name: t for t in a.tensors}
tb = {t.name: t for t in b.tensors}
if [t.name for t in a.tensors] != [t.name for t in b.tensors]:
    print("  tensor order differs")
for name, t in ta.items():
    u = tb.get(name)
    if u is None:
        print("  missing in loom:", name)
    elif t.tensor_type != u.tensor_type:
        print(f"  {name}: llama.cpp {t.tensor_type.name}, loom {u.tensor_type.name}")
    elif bytes(t.data.tobytes()) != bytes(u.data.tobytes()):
        print(f"  {name}: same type {t.tensor_type.name}, different bytes")
PY
  fi
  rm -f "$work/lq-$q.gguf" "$work/loom-$q.gguf"
done
rm -f "$work"/*.gguf
