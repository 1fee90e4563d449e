#!/bin/bash
# On the GPU machine, from the repository root: the whole test suite of a CUDA build, as `make
# test` runs it, packed here by tools/cuda/package_ctest.sh:
#   run(command="bash tools/cuda/run_ctest_on_device.sh", carry=[".dev/ctest"])
# The binaries expect the paths they were built with (/work/main/build-cuda, ../shared =
# /work/shared): those are linked to this checkout and the unpacked data when absent. The tests
# that hold no GPU run 8 at a time first; then, one at a time, those that may take the GPU (each
# CUDA session sizes its KV pool from 90% of the card's memory). ONLY=<ctest regex> runs just
# those tests, with their whole output (ctest -V; GTEST_FILTER narrows a gtest binary).
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
pkg=.dev/ctest
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tmp=/tmp/loom-ctest && mkdir -p "$tmp/build"
tar xJf "$pkg/build.tar.xz" -C "$tmp/build"
tar xJf "$pkg/shared.tar.xz" -C "$tmp"
tar xJf "$pkg/node_modules.tar.xz" -C tests/node
built=$(cat "$tmp/build/BUILT_AT")   # e.g. /work/main/build-cuda
src=$(dirname "$built")
# The shared libraries on LD_LIBRARY_PATH and the source directory linked, as for the packages.
bin=$pkg
LOOM_BUILT_IN=$src
. tools/cuda/device_env.sh
shared=$(dirname "$src")/shared   # the build's LOOM_SHARED_DIR, as a string
[ -e "$shared" ] || ln -s "$tmp/shared" "$shared"
if [ -d "$built" ] && [ ! -L "$built" ]; then
  echo "$built is a real build here; not replacing it (this script is for the GPU machine)" >&2
  exit 1
fi
rm -f "$built" && ln -s "$tmp/build" "$built"
node=$(command -v node || true)
echo "node: ${node:-none} $(${node:-true} --version 2>/dev/null); cmake: $(ctest --version | head -1)"
[ -n "$node" ] && [ ! -e /usr/bin/node ] && ln -s "$node" /usr/bin/node
gpu='cuda|cli_test|server_node_test|make_random_gguf_smoke'
if [ -n "${ONLY:-}" ]; then
  timeout 500 ctest --test-dir "$built" -j1 -R "$ONLY" --timeout 480 -V > "$out/ctest_only.log" 2>&1
  echo "ctest -R '$ONLY': exit $?"
  grep -vE "^[0-9]+: (I |\[ )" "$out/ctest_only.log" | tail -60
  exit 0
fi
t0=$(date +%s)
timeout 240 ctest --test-dir "$built" -j8 -E "$gpu" --timeout 200 > "$out/ctest_cpu.log" 2>&1
echo "tests without the GPU: exit $? after $(($(date +%s) - t0)) s"
grep -E "Test +#|tests passed|Total Test" "$out/ctest_cpu.log"
t0=$(date +%s)
timeout 330 ctest --test-dir "$built" -j1 -R "$gpu" --timeout 240 --output-on-failure \
  > "$out/ctest_gpu.log" 2>&1
echo "tests that may take the GPU: exit $? after $(($(date +%s) - t0)) s"
grep -E "Test +#|tests passed|Total Test" "$out/ctest_gpu.log"
grep -E "preemptions|Skipped|SKIPPED \]" "$out/ctest_gpu.log" | sort | uniq -c | head -30
