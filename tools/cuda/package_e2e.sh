#!/bin/bash
# Builds loom and the CUDA tests here (nvcc + g++, BUILD=build-cuda2 by default) and
# collects them, with the shared libraries the GPU machine's image may lack, into .dev/cuda2-bin
# (git-ignored) for the device tool: run(command="bash tools/cuda/run_e2e_on_device.sh",
# carry=[".dev/cuda2-bin"]).
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
build=${BUILD:-$root/build-cuda2}
out=$root/.dev/cuda2-bin
ninja -C "$build" -j2 loom cuda_graph_runner_test cuda_backend_test cuda_sampling_test cuda_bench \
  cuda_prefill_bench cuda_attn_bench cuda_golden_test cli_test
rm -rf "$out"
mkdir -p "$out/lib"
strip -o "$out/loom" "$build/src/cli/loom"
strip -o "$out/cuda_graph_runner_test" "$build/src/runtime/cuda_graph_runner_test"
strip -o "$out/cuda_sampling_test" "$build/src/runtime/cuda_sampling_test"
strip -o "$out/cuda_golden_test" "$build/src/runtime/cuda_golden_test"
strip -o "$out/cli_test" "$build/src/cli/cli_test"
strip -o "$out/cuda_backend_test" "$build/src/backend/cuda/cuda_backend_test"
strip -o "$out/cuda_prefill_bench" "$build/src/backend/cuda/cuda_prefill_bench"
strip -o "$out/cuda_attn_bench" "$build/src/backend/cuda/cuda_attn_bench"
strip -o "$out/cuda_bench" "$build/src/backend/cuda/cuda_bench"
for lib in $(ldd "$out/loom" "$out/cuda_graph_runner_test" "$out/cuda_backend_test" | awk '/=>/ {print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++* | \
      libgcc_s* | libcuda* | libcublas* | libcudart*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
# xz: OpenBLAS alone is 36 MB and the device tool carries at most 64 MiB with the tree.
tar cJf "$out/lib.tar.xz" -C "$out" lib && rm -rf "$out/lib"
# The binaries too (device_env.sh unpacks them there).
bins=(loom cuda_graph_runner_test cuda_sampling_test cuda_golden_test cli_test cuda_backend_test
      cuda_prefill_bench cuda_attn_bench cuda_bench)
tar cJf "$out/bins.tar.xz" -C "$out" "${bins[@]}" && (cd "$out" && rm -f "${bins[@]}")
du -sh "$out"
