#!/bin/bash
# On the GPU machine, from the repository root: per-op breakdown of the batch-64 decode step and
# A/B benches of the knobs (LOOM_CUBLASLT_TUNE, LOOM_ATTN_SPLIT_TARGET; = --cuda-tune
# cublaslt_tune / attn_split_target). Its rows of the generic kernel's old 32-row decode instance
# (LOOM_ATTN_SMALL_ROWS=0) are gone with that switch (retired: 4,905 vs 7,000 tok/s, E2E_NOTES).
# BIN = the package folder (binaries + lib.tar.xz + this script); PROF_SET=1 (breakdown + A/B),
# ncu (Nsight Compute on one decode attention launch) or 2 (tests + after at C = 1/8/64).
# Logs go to $OUT. Results: tools/cuda/E2E_NOTES.md.
set -uo pipefail
out=${OUT:-/tmp}
bin=${BIN:-.dev/prof-bin}
. tools/cuda/device_env.sh  # libraries, LD_LIBRARY_PATH, the build's source dir ($LOOM_BUILT_IN)
B() {  # tag model concurrency extra... (env set by the caller)
  local tag=$1 m=$2 c=$3; shift 3
  local r
  r=$(timeout 90 $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json \
    --prompt-tokens 512 --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $c \
    --repeat 2 "$@" 2>> "$out/bench.err" | grep -E "^(prefill|decode)" | tr '\n' ' ')
  echo "$tag $m c=$c $*: $r" | tee -a "$out/bench.log"
}
set_=${PROF_SET:-1}
if [ "$set_" = 1 ]; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
  echo "nsys: $(which nsys 2>/dev/null || ls /usr/local/cuda/bin/nsys 2>/dev/null || echo none); ncu: $(which ncu 2>/dev/null || echo none)" | tee -a "$out/gpu.txt"
  timeout 60 $bin/cuda_backend_test --gtest_filter='*ttention*' 2>&1 | tee "$out/attn_test.log" | grep -E "^\[  (PASSED|FAILED)|FAILED"
  # Eager per-op breakdown, the defaults (A) and with cuBLASLt tuning (B).
  LOOM_CUDA_PROFILE=1 timeout 100 $bin/loom bench --device cuda \
    --dummy-weights bench/configs/llama-3.1-8b.json --prompt-tokens 512 --decode-prompt-tokens 512 \
    --gen-tokens 64 --concurrency 64 --repeat 1 --no-cuda-graphs > "$out/prof_old.txt" 2>&1
  grep -E "^decode" "$out/prof_old.txt"; sed -n '/LOOM_CUDA_PROFILE/,$p' "$out/prof_old.txt" | grep -E "n=64|tok=64|64x|sum|^op" | head -30
  LOOM_CUBLASLT_TUNE=16 LOOM_CUDA_PROFILE=1 timeout 120 $bin/loom bench --device cuda \
    --dummy-weights bench/configs/llama-3.1-8b.json --prompt-tokens 512 --decode-prompt-tokens 512 \
    --gen-tokens 64 --concurrency 64 --repeat 1 --no-cuda-graphs > "$out/prof_new.txt" 2>&1
  grep -E "^decode" "$out/prof_new.txt"; sed -n '/LOOM_CUDA_PROFILE/,$p' "$out/prof_new.txt" | grep -E "n=64|tok=64|64x|sum|^op" | head -30
  grep -E "cublaslt n=64 .*(heuristic|chosen)" "$out/prof_new.txt"
  # Graph-mode A/B at C = 64.
  B rows8 llama-3.1-8b 64
  LOOM_CUBLASLT_TUNE=16 B rows8+tune llama-3.1-8b 64
  LOOM_ATTN_SPLIT_TARGET=8 B rows8+split8 llama-3.1-8b 64
  B rows8 llama-3.2-1b 64
  NSYS=$(which nsys 2>/dev/null || ls /usr/local/cuda/bin/nsys 2>/dev/null)
  if [ -n "$NSYS" ]; then
    timeout 150 $NSYS profile -t cuda --cuda-graph-trace=node -o /tmp/c64 -f true \
      $bin/loom bench --device cuda --dummy-weights bench/configs/llama-3.1-8b.json --prompt-tokens 512 \
      --decode-prompt-tokens 512 --gen-tokens 16 --concurrency 64 --repeat 1 > "$out/nsys_run.txt" 2>&1
    timeout 60 $NSYS stats -r cuda_gpu_kern_sum -f csv -o "$out/nsys" /tmp/c64.nsys-rep > /dev/null 2>&1
    head -25 "$out"/nsys*kern_sum*.csv 2>/dev/null | cut -c1-220
  fi
fi
if [ "$set_" = 2 ]; then  # after the fix: parity, then C = 64 / 8 / 1 for 8B and 1B, breakdown
  timeout 60 $bin/cuda_backend_test --gtest_filter='*ttention*' 2>&1 | tee "$out/attn_test.log" | grep -E "^\[  (PASSED|FAILED)|FAILED"
  B new llama-3.1-8b 64
  B new llama-3.2-1b 64
  B new llama-3.1-8b 8
  B new llama-3.1-8b 1
  B new llama-3.2-1b 1
  B new llama-3.2-1b 8
  LOOM_CUDA_PROFILE=1 timeout 100 $bin/loom bench --device cuda \
    --dummy-weights bench/configs/llama-3.1-8b.json --prompt-tokens 512 --decode-prompt-tokens 512 \
    --gen-tokens 64 --concurrency 64 --repeat 1 --no-cuda-graphs > "$out/prof_after.txt" 2>&1
  grep -E "^decode" "$out/prof_after.txt"; sed -n '/LOOM_CUDA_PROFILE/,$p' "$out/prof_after.txt" | grep -E "n=64|tok=64|64x|sum|^op" | head -12
  timeout 150 $bin/cuda_backend_test 2>&1 | tee "$out/backend_test.log" | grep -E "^\[  (PASSED|FAILED)|FAILED|tests ran"
  timeout 90 $bin/cuda_graph_runner_test 2>&1 | tee "$out/graph_test.log" | grep -E "^\[  (PASSED|FAILED)|FAILED|tests ran"
  LOOM_ATTN_SPLIT_TARGET=6 B split6 llama-3.1-8b 64
fi
if [ "$set_" = ncu ]; then  # Nsight Compute on the decode attention (and its tile-start prefix)
  NCU=$(which ncu 2>/dev/null || echo /usr/local/cuda/bin/ncu)
  timeout 200 $NCU --target-processes all --kernel-name regex:'PagedAttention|TileStart' \
    --launch-skip 1600 --launch-count 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis_Tables \
    $bin/loom bench --device cuda --dummy-weights bench/configs/llama-3.1-8b.json --prompt-tokens 512 \
    --decode-prompt-tokens 512 --gen-tokens 48 --concurrency 64 --repeat 1 --no-cuda-graphs \
    > "$out/ncu_attn.txt" 2>&1
  grep -vE "^==PROF==|^$" "$out/ncu_attn.txt" | grep -v "^ *-" | head -150
fi
