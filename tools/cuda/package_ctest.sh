#!/bin/bash
# Packs the whole test suite of a CUDA build (BUILD=build-cuda by default: every binary ctest
# runs, loom, the CTestTestfile.cmake files) and ../shared/data into .dev/ctest (git-ignored) for
# tools/cuda/run_ctest_on_device.sh, which runs `ctest` there unchanged: the CPU tests, the CUDA
# ones on the GPU, `--device auto` picking the GPU. The shared libraries come from the package of
# package_e2e.sh (.dev/cuda2-bin/lib.tar.xz), which must exist; the node tests' packages from
# tests/node/node_modules (`npm ci` there). Then (about 46 MB):
#   run(command="bash tools/cuda/run_ctest_on_device.sh", carry=[".dev/ctest"])
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
build=${BUILD:-$root/build-cuda}
out=$root/.dev/ctest
[ -f "$root/.dev/cuda2-bin/lib.tar.xz" ] || { echo "run tools/cuda/package_e2e.sh first" >&2; exit 1; }
ninja -C "$build" -j2
rm -rf "$out" && mkdir -p "$out/build"
# The executables the tests name (absolute paths under the build), loom and the CTest files.
mapfile -t exes < <(find "$build" -name CTestTestfile.cmake -exec grep -ho "\"$build/[^\"]*\"" {} + |
                    tr -d '"' | sort -u | while read -r f; do [ -x "$f" ] && [ -f "$f" ] && echo "$f"; done)
exes+=("$build/src/cli/loom")
for f in "${exes[@]}"; do
  rel=${f#"$build"/}
  mkdir -p "$out/build/$(dirname "$rel")"
  strip -o "$out/build/$rel" "$f"
done
(cd "$build" && find . -name CTestTestfile.cmake -exec cp --parents {} "$out/build/" \;)
echo "$build" > "$out/build/BUILT_AT"
tar cJf "$out/build.tar.xz" -C "$out/build" . && rm -rf "$out/build"
tar cJf "$out/shared.tar.xz" -C "$root/.." shared/data
cp "$root/.dev/cuda2-bin/lib.tar.xz" "$out/"
[ -d "$root/tests/node/node_modules" ] || (cd "$root/tests/node" && npm ci --no-audit --no-fund)
tar cJf "$out/node_modules.tar.xz" -C "$root/tests/node" node_modules
du -sh "$out"/*
