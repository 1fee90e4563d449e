#!/bin/bash
# Runs on the GPU machine, from the repository root, after package_for_device.sh here:
#   run(command="bash tools/cuda/run_on_device.sh", carry=[".dev/cuda-bin"])
# Test and benchmark logs go to $OUT (fetched back by the tool).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
cublas=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 2>/dev/null ||
         find / -name 'libcublasLt.so.13' -not -path '/proc/*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$PWD/.dev/cuda-bin/lib:$(dirname "${cublas:-/usr/local/cuda/lib64/x}"):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv
ldd .dev/cuda-bin/cuda_backend_test | grep -E "not found|cublas|cudart" || true
.dev/cuda-bin/cuda_backend_test ${GTEST_ARGS:-} 2>&1 | tee "$out/test.log" | tail -${TEST_TAIL:-40}
echo "test exit: ${PIPESTATUS[0]}"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  .dev/cuda-bin/cuda_bench ${BENCH_ARGS:-512 20} 2>&1 | tee "$out/bench.log"
  echo "bench exit: ${PIPESTATUS[0]}"
fi
