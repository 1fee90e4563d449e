#!/bin/bash
# On the GPU machine, from the repository root, after package_e2e.sh: per-kernel GPU time of
# batch-1 decode steps (Nsight Compute, gpu__time_duration of every launch in a window of an
# eager run; ncu serializes launches, so gaps are not measured: compare the sum with the graph
# step time of `loom bench`). MODELS = bench configs (default llama-3.2-1b llama-3.1-8b).
# Logs and CSVs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
NCU=$(which ncu 2>/dev/null || echo /usr/local/cuda/bin/ncu)
for m in ${MODELS:-llama-3.2-1b llama-3.1-8b}; do
  timeout 240 $NCU --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
    --launch-skip ${SKIP:-3000} --launch-count ${COUNT:-420} \
    $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json --prompt-tokens 512 \
    --decode-prompt-tokens 512 --gen-tokens 40 --concurrency 1 --repeat 1 --no-cuda-graphs \
    > "$out/ncu_$m.csv" 2> "$out/ncu_$m.err"
  echo "$m: $(grep -c gpu__time_duration "$out/ncu_$m.csv") kernel rows"
  python3 tools/cuda/ncu_summary.py "$out/ncu_$m.csv" ${STEPS:-1} | tee "$out/ncu_$m.txt"
  xz -f "$out/ncu_$m.csv"
done
