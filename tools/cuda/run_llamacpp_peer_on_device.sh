#!/bin/bash
# On the GPU machine, from the repository root: llama.cpp (CUDA, flash attention, sm_90a) as the
# same-run peer of loom's decode, with the HBM read limit, in one call (about 8 minutes).
# Here, first:
#   BUILD=$PWD/build-cuda bash tools/cuda/package_e2e.sh   # loom -> .dev/cuda2-bin
#   bash tools/cuda/pack_llamacpp.sh                       # llama.cpp source -> .dev/llamacpp
# then run(command="bash tools/cuda/run_llamacpp_peer_on_device.sh",
#          carry=[".dev/cuda2-bin", ".dev/llamacpp"]).
#   1. builds llama-bench and llama-batched-bench (CMake + ninja, all cores), while
#      bench/random_gguf.py writes random F16 GGUFs in the Llama-3.1-8B / Llama-3.2-1B shapes of
#      bench/configs (the bytes per token of loom's bf16 --dummy-weights);
#   2. llama-bench tg128 at depth 0 and 512 (-ngl 99 -fa 1, 3 repetitions), llama-batched-bench
#      (8B: prompt 512, 128 generated, 64 / 256 sequences);
#   3. loom bench on the same configs (C = 1 twice per model, C = 64 / 256 for the 8B), the way
#      docs/benchmarks.md reports it, and cuda_attn_bench's HBM read probe.
# Logs go to $OUT; a summary to stdout. LLAMACPP_SKIP_BATCHED=1 skips the batched runs.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
src=${LLAMACPP_SRC:-.dev/llamacpp/src.tar.xz}
work=${LLAMACPP_WORK:-/tmp/llamacpp}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader

mkdir -p "$work" && tar xJf "$src" -C "$work"
# The GGUFs, written while llama.cpp builds (one Python process, mostly disk).
(
  for m in llama-3.1-8b llama-3.2-1b; do
    PYTHONPATH=$work/gguf-py python3 bench/random_gguf.py bench/configs/$m.json "$work/$m-f16.gguf"
  done
) > "$out/gguf.log" 2>&1 &
gguf_pid=$!
build_llamacpp "$work" "$out" 450 llama-bench llama-batched-bench
wait $gguf_pid
cat "$out/gguf.log"
lb=$work/build/bin

for m in llama-3.1-8b llama-3.2-1b; do
  timeout 120 "$lb/llama-bench" -m "$work/$m-f16.gguf" -ngl 99 -fa 1 -p 0 -n 128 -d 0,512 -r 3 \
    -o md > "$out/llama_bench_$m.md" 2> "$out/llama_bench_$m.err"
  echo "llama.cpp $m:"
  grep -E "tg128" "$out/llama_bench_$m.md"
done
if [ "${LLAMACPP_SKIP_BATCHED:-0}" != 1 ]; then
  timeout 180 "$lb/llama-batched-bench" -m "$work/llama-3.1-8b-f16.gguf" -ngl 99 -fa on \
    -c 168000 -b 2048 -ub 512 -npp 512 -ntg 128 -npl 64,256 > "$out/llama_batched.log" 2>&1
  echo "llama.cpp batched (8B, prompt 512, gen 128): S_TG t/s per B"
  grep -E "^\|\s+512\s+\|" "$out/llama_batched.log"
fi

b() {  # model concurrency
  timeout 120 $bin/loom bench --device cuda --dummy-weights bench/configs/$1.json --prompt-tokens 64 \
    --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $2 --repeat 2 > "$out/b.txt" 2>> "$out/bench.err"
  echo "loom $1 c=$2: $(grep -E '^decode' "$out/b.txt" | tr -s ' ' | cut -d' ' -f2) decode tok/s"
}
for r in 1 2; do b llama-3.1-8b 1; b llama-3.2-1b 1; done
if [ "${LLAMACPP_SKIP_BATCHED:-0}" != 1 ]; then b llama-3.1-8b 64; b llama-3.1-8b 256; fi
timeout 60 $bin/cuda_attn_bench 20 > "$out/attn_bench.log" 2>&1
grep -E "HBM" "$out/attn_bench.log"
rm -f "$work"/*.gguf
