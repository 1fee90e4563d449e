#!/bin/bash
# Issue 29 on the GPU machine, from the repository root. Here, first:
#   BUILD=$PWD/build BINS="loom cuda_backend_test cuda_golden_test" bash tools/cuda/package_e2e.sh
# then run(command="bash tools/cuda/run_moe_on_device.sh", carry=[".dev/cuda2-bin"]).
#   1. with MAKE_GOLDENS=1, the MoE transformers goldens (tools/goldens/make_model_goldens.py) into
#      $OUT/goldens.tar.xz, and into tests/goldens/models here when this checkout lacks them;
#   2. the CUDA expert kernels against the CPU backend (cuda_backend_test CudaMoe*);
#   3. the MoE goldens (HF and GGUF) through the CUDA backend (cuda_golden_test);
#   4. decode speed: Qwen3-30B-A3B shapes with dummy weights at C = $CONCS, and Llama-3.1-8B at
#      C = 1 in the same run (the dense weight-bytes reference); then the per-op GPU times of
#      eager batch-1 steps (--cuda-profile) in $OUT/moe_profile.txt.
# gpt-oss: ARCHS=gpt_oss KERNELS='CudaMoe*:*Sinks*' GOLDENS='*gpt_oss*'
#   MODELS='gpt-oss-20b:1 8 64,llama-3.1-8b:1' PROFILE_MODEL=gpt-oss-20b (MODELS: comma-separated
#   config:concurrencies).
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
archs=${ARCHS:-qwen3_moe qwen2_moe mixtral}
if [ "${MAKE_GOLDENS:-0}" = 1 ]; then
  timeout 240 python3 tools/goldens/make_model_goldens.py "$out/goldens" $archs > "$out/goldens.log" 2>&1
  echo "goldens: exit $? ($(ls "$out/goldens" 2>/dev/null | tr '\n' ' '))"
  tail -3 "$out/goldens.log"
  tar cJf "$out/goldens.tar.xz" -C "$out" goldens && mv "$out/goldens" /tmp/moe-goldens
  for a in $archs; do
    [ -d "tests/goldens/models/$a" ] || cp -r "/tmp/moe-goldens/$a" tests/goldens/models/ 2>/dev/null
  done
fi
timeout 200 $bin/cuda_backend_test --gtest_filter="${KERNELS:-CudaMoe*}" > "$out/moe_kernels.log" 2>&1
echo "cuda_backend_test ${KERNELS:-CudaMoe*}: exit $?"
grep -E "^\[  (PASSED|FAILED)|Failure|Expected|Which is|actual|error" "$out/moe_kernels.log" | head -30
timeout 200 $bin/cuda_golden_test --gtest_filter="${GOLDENS:-*moe*:*mixtral*}" > "$out/moe_golden.log" 2>&1
echo "cuda_golden_test ${GOLDENS:-*moe*:*mixtral*}: exit $?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|error" "$out/moe_golden.log" | head -40
IFS=, read -ra specs <<< "${MODELS:-qwen3-30b-a3b:${CONCS:-1 8 64},llama-3.1-8b:1}"
for spec in "${specs[@]}"; do
  m=${spec%%:*}
  for c in ${spec#*:}; do
    echo "== $m c=$c" | tee -a "$out/bench.log"
    timeout 150 $bin/loom bench --device cuda --dummy-weights bench/configs/$m.json \
      --prompt-tokens 512 --decode-prompt-tokens 512 --gen-tokens 128 --concurrency $c \
      --repeat 2 2>> "$out/bench.err" | grep -E "^(prefill|decode)" | tee -a "$out/bench.log"
  done
done
tail -5 "$out/bench.err"
# Where a batch-1 step's time goes: the per-op table of eager steps (--cuda-profile).
timeout 150 $bin/loom bench --device cuda --dummy-weights bench/configs/${PROFILE_MODEL:-qwen3-30b-a3b}.json \
  --prompt-tokens 64 --decode-prompt-tokens 64 --gen-tokens 32 --concurrency 1 --repeat 1 \
  --no-cuda-graphs --cuda-profile > "$out/moe_profile.txt" 2>&1
grep -vE "^I " "$out/moe_profile.txt" | grep -iE "moe|matmul|attention|total|op " | head -25
