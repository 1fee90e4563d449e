#!/bin/bash
# On the GPU machine, from the repository root, after package_e2e.sh here. Writes logs to $OUT:
# graph-vs-eager test, greedy ids of the default model on CUDA vs CPU, and `loom bench
# --dummy-weights` for Llama-3.1-8B and Llama-3.2-1B at concurrency 1/8/64 (graphs on), plus
# batch 1 with graphs off.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
bin=.dev/cuda2-bin
# package_e2e.sh ships the libraries xz-compressed (the 64 MiB transfer limit).
. tools/cuda/device_env.sh  # libraries, LD_LIBRARY_PATH, the build's source dir ($LOOM_BUILT_IN)
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
timeout 120 $bin/cuda_backend_test 2>&1 | tee "$out/backend_test.log" | grep -E "^\[  (PASSED|FAILED)|FAILED|tests ran"
timeout 90 $bin/cuda_graph_runner_test 2>&1 | tee "$out/graph_test.log" | tail -25
b() {  # model concurrency extra...
  local m=$1 c=$2; shift 2
  echo "== $m c=$c $*" | tee -a "$out/bench.log"
  timeout 75 $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json \
    --prompt-tokens 512 --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $c \
    --repeat 2 "$@" 2>&1 | tee -a "$out/bench.log"
}
# E2E_SET=archs: the other bench configs (Qwen3 qk-norm, Gemma 3 sliding window / head_dim 256).
if [ "${E2E_SET:-main}" = archs ]; then
  for m in qwen3-0.6b qwen3-8b gemma-3-4b; do b $m 1; done
  for m in qwen3-8b gemma-3-4b; do  # greedy ids, graphs vs eager, at full size
    for g in "" --no-cuda-graphs; do
      timeout 60 $bin/loom generate --device cuda --dummy-weights bench/configs/$m.json \
        --ids 5,17,300,4000,12,9 -n 100 --temp 0 --ignore-eos $g > "$out/gen_$m$g.txt" 2>/dev/null
    done
    cmp -s "$out/gen_$m.txt" "$out/gen_$m--no-cuda-graphs.txt" && r=identical || r=DIFFERENT
    echo "generate $m graphs vs eager (100 greedy ids): $r; $(head -c 120 "$out/gen_$m.txt")"
  done
  exit 0
fi
ids=0,15,251,78,9,1203,44,310,72,5
for dev in cuda cpu; do
  timeout 60 $bin/loom generate models/default --device $dev --ids $ids -n 200 --temp 0 --ignore-eos \
    > "$out/gen_$dev.txt" 2> "$out/gen_$dev.err"
  echo "generate $dev: $(head -c 300 "$out/gen_$dev.txt")"
done
# Most important first (the run has a time limit). The default 4.6M model gives the per-step floor.
echo "== default c=1" | tee -a "$out/bench.log"
timeout 60 $bin/loom bench models/default --device cuda --prompt-tokens 64 --decode-prompt-tokens 64 \
  --gen-tokens 128 --repeat 2 2>&1 | tee -a "$out/bench.log"
b llama-3.1-8b 1
b llama-3.2-1b 1
b llama-3.1-8b 1 --no-cuda-graphs
b llama-3.2-1b 1 --no-cuda-graphs
b llama-3.1-8b 64
b llama-3.1-8b 8
b llama-3.2-1b 8
b llama-3.2-1b 64
