#!/bin/bash
# Packs llama.cpp's source for the GPU machine (which has no network): the git bundle that npm's
# node-llama-cpp carries (bench/llamacpp pins the version; `npm ci` there fetches it), cloned and
# written without .git, docs, models, tests and web assets to .dev/llamacpp/src.tar.xz (~8 MB,
# git-ignored). tools/cuda/run_llamacpp_peer_on_device.sh builds and runs it there.
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
bundle=$root/bench/llamacpp/node_modules/node-llama-cpp/llama/gitRelease.bundle
# tests/node installs the same node-llama-cpp version (for llama.cpp's GBNF files): use its copy.
tests_bundle=$root/tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || [ ! -f "$tests_bundle" ] || bundle=$tests_bundle
[ -f "$bundle" ] || (cd "$root/bench/llamacpp" && npm ci --no-audit --no-fund)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q "$bundle" "$tmp/llama.cpp"
mkdir -p "$root/.dev/llamacpp"
tar cJf "$root/.dev/llamacpp/src.tar.xz" -C "$tmp/llama.cpp" --anchored --exclude=./.git \
  --exclude=./models --exclude=./docs --exclude=./media --exclude=./examples \
  --exclude='./tools/server/public*' --exclude=./tools/server/webui --exclude=./tests \
  --exclude=./benches .
du -h "$root/.dev/llamacpp/src.tar.xz"
