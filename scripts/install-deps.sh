#!/usr/bin/env bash
# Installs what loom needs to build and test, idempotently: Debian packages (only the missing
# ones) and the npm test dependencies under tests/node (only when package.json changed).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config git
      libgtest-dev libgmock-dev nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev
      libopenblas-dev libxxhash-dev libutf8proc-dev libomp-dev libcli11-dev clang libclang-rt-14-dev
      nodejs npm ca-certificates)

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

if [[ -f tests/node/package.json ]]; then
  stamp=tests/node/node_modules/.loom-stamp
  sum=$(cat tests/node/package.json tests/node/package-lock.json 2>/dev/null | sha256sum | cut -d' ' -f1)
  if [[ ! -f $stamp || "$(cat "$stamp")" != "$sum" ]]; then
    echo "install-deps: npm install in tests/node"
    (cd tests/node && { [[ -f package-lock.json ]] && npm ci --no-audit --no-fund || npm install --no-audit --no-fund; })
    echo "$sum" > "$stamp"
  fi
fi
