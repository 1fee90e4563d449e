#!/bin/bash
# On the GPU machine, from the repository root: a batch-1 decode A/B of two builds (or of two
# settings of one), alternating inside this one call — machine starts differ by ~2%, so an A/B
# never spans calls. Here:
#   BUILD=$PWD/build-cuda bash tools/cuda/package_e2e.sh                       # A: .dev/cuda2-bin
#   BUILD=<B's build> OUT_DIR=$PWD/.dev/b BINS="loom cuda_attn_bench cuda_backend_test" NO_LIBS=1 \
#     bash tools/cuda/package_e2e.sh                                             # B: .dev/b
#   run(command="bash tools/cuda/run_ab_on_device.sh", carry=[".dev/cuda2-bin", ".dev/b"])
# B may be omitted (BIN_B=same) to compare environments: ENV_A / ENV_B, e.g.
# ENV_B="LOOM_ATTN_CLUSTER_SPLITS=12". MODELS (default "llama-3.2-1b llama-3.1-8b"), ROUNDS (3);
# BATCHES (e.g. "64 256", default none): decode at those concurrencies too, for BATCH_MODEL
# (default llama-3.1-8b; 512-token prompts, as run_issue7_on_device.sh), A and B alternating,
# one round each. SKIP_BATCH1=1 leaves out the
# batch-1 rounds. B_TESTS: the gtest filter of B's cuda_backend_test (default '*Attention*').
# Prints, per model: 300 greedy ids of A vs B (identical | DIFFERENT), then the prefill and decode tok/s of
# each round, A and B alternating; with B's cuda_backend_test, its attention tests; with both
# sides' cuda_attn_bench, their decode-attention lines.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
bin_b=${BIN_B:-.dev/b}
if [ "$bin_b" = same ]; then
  bin_b=$bin
elif [ ! -f "$bin_b/loom" ]; then
  tar xJf "$bin_b/bins.tar.xz" -C "$bin_b"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
side() {  # A|B -> "env... binary-folder"
  if [ "$1" = A ]; then echo "${ENV_A:-} $bin"; else echo "${ENV_B:-} $bin_b"; fi
}
tune_args() {  # A|B -> the side's LOOM_<KEY>=V settings as cuda_attn_bench's key=v arguments
  local e k
  for e in $(side "$1"); do
    case $e in LOOM_*=*) k=${e%%=*}; k=${k#LOOM_}; echo -n "${k,,}=${e#*=} " ;; esac
  done
}
run_side() {  # seconds A|B command...: the side's binary under its environment, with a timeout
  local secs=$1 s=$2; shift 2
  local parts
  read -r -a parts <<< "$(side "$s")"
  local folder=${parts[-1]}
  unset 'parts[-1]'
  timeout "$secs" env "${parts[@]}" "$folder/$1" "${@:2}"
}
ids=5,17,300,4000,12,9
for m in ${MODELS:-llama-3.2-1b llama-3.1-8b}; do
  for s in A B; do
    run_side 120 $s loom generate --device cuda --dummy-weights bench/configs/$m.json \
      --ids $ids -n 300 --temp 0 --ignore-eos > "$out/ids_${m}_$s.txt" 2> "$out/ids_${m}_$s.err"
  done
  if [ ! -s "$out/ids_${m}_A.txt" ] || [ ! -s "$out/ids_${m}_B.txt" ]; then
    r="NO IDS ($(tail -1 "$out/ids_${m}_A.err") | $(tail -1 "$out/ids_${m}_B.err"))"
  elif cmp -s "$out/ids_${m}_A.txt" "$out/ids_${m}_B.txt"; then r=identical; else r=DIFFERENT; fi
  echo "$m: 300 greedy ids A vs B: $r"
done
rounds=${ROUNDS:-3}
[ "${SKIP_BATCH1:-0}" = 1 ] && rounds=0
for r in $(seq "$rounds"); do
  for m in ${MODELS:-llama-3.2-1b llama-3.1-8b}; do
    for s in A B; do
      run_side 120 $s loom bench --device cuda --dummy-weights bench/configs/$m.json \
        --prompt-tokens 64 --decode-prompt-tokens 512 --gen-tokens 128 --concurrency 1 \
        --repeat 2 > "$out/ab.txt" 2>> "$out/ab.err"
      echo "round $r $m $s: $(grep -E '^(prefill|decode)' "$out/ab.txt" | tr -s ' ' | tr '\n' ' ')"
    done
  done
done
for c in ${BATCHES:-}; do
  m=${BATCH_MODEL:-llama-3.1-8b}
  for s in A B; do
    run_side 180 $s loom bench --device cuda --dummy-weights bench/configs/$m.json \
      --prompt-tokens 512 --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $c \
      --repeat 2 > "$out/ab.txt" 2>> "$out/ab.err"
    echo "batch $c $m $s: $(grep -E '^(prefill|decode)' "$out/ab.txt" | tr -s ' ' | tr '\n' ' ')"
  done
done
if [ -f "$bin_b/cuda_backend_test" ]; then
  run_side 240 B cuda_backend_test --gtest_filter="${B_TESTS:-*Attention*}" > "$out/b_attn_test.log" 2>&1
  echo "B tests ${B_TESTS:-*Attention*}: exit $? $(grep -E '^\[  PASSED|^\[  FAILED' "$out/b_attn_test.log" | tr '\n' ' ')"
fi
for s in A B; do
  folder=$(side $s | awk '{print $NF}')
  [ -f "$folder/cuda_attn_bench" ] || continue
  run_side 60 $s cuda_attn_bench 20 $(tune_args $s) > "$out/attn_$s.log" 2>&1
  echo "$s attention:"; grep -E "decode auto" "$out/attn_$s.log"
done
