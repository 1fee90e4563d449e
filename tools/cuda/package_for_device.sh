#!/bin/bash
# Builds cuda_backend_test and cuda_bench on this machine (nvcc + g++) and collects them, with
# the shared libraries the GPU machine's image may lack (OpenMP, OpenBLAS, xxhash, ...), into
# .dev/cuda-bin (git-ignored), for the device `run` tool to carry (carry: [".dev/cuda-bin"]).
# CUDA's own libraries (cudart, cuBLASLt) are taken from the GPU machine's toolkit.
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
build=${BUILD:-$root/build-cuda}
out=$root/.dev/cuda-bin
ninja -C "$build" -j2 cuda_backend_test cuda_bench
rm -rf "$out"
mkdir -p "$out/lib"
strip -o "$out/cuda_backend_test" "$build/src/backend/cuda/cuda_backend_test"
strip -o "$out/cuda_bench" "$build/tools/cuda/bench/cuda_bench"
for lib in $(ldd "$out/cuda_backend_test" "$out/cuda_bench" | awk '/=>/ {print $3}' | sort -u); do
  case $(basename "$lib") in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++* | \
      libgcc_s* | libcuda* | libcublas* | libcudart*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
du -sh "$out"
