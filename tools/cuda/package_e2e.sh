#!/bin/bash
# Builds loom and the CUDA tests here (nvcc + g++, BUILD=build-cuda2 by default) and
# collects them, with the shared libraries the GPU machine's image may lack, into .dev/cuda2-bin
# (git-ignored) for the device tool: run(command="bash tools/cuda/run_e2e_on_device.sh",
# carry=[".dev/cuda2-bin"]).
# OUT_DIR=... BINS="loom cuda_attn_bench" NO_LIBS=1: a second, smaller package (the B side of
# tools/cuda/run_ab_on_device.sh), which takes its shared libraries from the first.
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
build=${BUILD:-$root/build-cuda2}
out=${OUT_DIR:-$root/.dev/cuda2-bin}
bins=(${BINS:-loom cuda_graph_runner_test cuda_sampling_test cuda_golden_test cuda_model_test
      cli_test cuda_backend_test cuda_prefill_bench cuda_attn_bench cuda_bench})
where() {  # the build's path of a binary
  case $1 in
    loom) echo src/cli/loom ;;
    cli_test) echo src/cli/cli_test ;;
    cuda_golden_test | cuda_model_test) echo "src/runtime/$1" ;;
    cuda_graph_runner_test) echo "src/engine/$1" ;;
    cuda_sampling_test) echo "src/sample/$1" ;;
    cuda_bench | cuda_prefill_bench) echo "tools/cuda/bench/$1" ;;
    *) echo "src/backend/cuda/$1" ;;
  esac
}
ninja -C "$build" -j2 "${bins[@]}"
rm -rf "$out"
mkdir -p "$out/lib"
for b in "${bins[@]}"; do strip -o "$out/$b" "$build/$(where "$b")"; done
if [ "${NO_LIBS:-0}" != 1 ]; then
  for lib in $(ldd "${bins[@]/#/$out/}" | awk '/=>/ {print $3}' | sort -u); do
    case $(basename "$lib") in
      libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++* | \
        libgcc_s* | libcuda* | libcublas* | libcudart*) ;;
      *) cp -L "$lib" "$out/lib/" ;;
    esac
  done
  # xz: OpenBLAS alone is 36 MB and the device tool carries at most 64 MiB with the tree.
  tar cJf "$out/lib.tar.xz" -C "$out" lib
fi
rm -rf "$out/lib"
# The binaries too (device_env.sh unpacks them there).
tar cJf "$out/bins.tar.xz" -C "$out" "${bins[@]}" && (cd "$out" && rm -f "${bins[@]}")
du -sh "$out"
