#!/usr/bin/env bash
# Lists the C++/CUDA files that clang-format (.clang-format: Google base, 100 columns) would change
# and exits 1 if there is any; `make test` runs it first when FORMAT_CHECK=1.
#   tools/format/check.sh [--fix] [FILE...]
# Without FILEs: every tracked *.h, *.cc, *.cu, *.cuh under src/, tools/ and tests/. --fix formats
# them in place instead (`make format`). CLANG_FORMAT picks the binary (default clang-format; CI
# has Debian 12's clang-format 14, and other versions may format a few constructs differently).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

fix=0
if [[ ${1:-} == --fix ]]; then fix=1; shift; fi
cf=${CLANG_FORMAT:-clang-format}
command -v "$cf" >/dev/null || { echo "format check: $cf not found (apt-get install clang-format)" >&2; exit 2; }

if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files 'src/*.h' 'src/*.cc' 'src/*.cu' 'src/*.cuh' \
                                    'tools/*.h' 'tools/*.cc' 'tools/*.cu' 'tools/*.cuh' \
                                    'tests/*.h' 'tests/*.cc')
fi
if ((fix)); then
  printf '%s\0' "${files[@]}" | xargs -0 -r -n 16 "$cf" -i
  exit 0
fi

# One clang-format per file (its exit status says whether that file is clean), in parallel.
mapfile -t bad < <(printf '%s\0' "${files[@]}" | xargs -0 -r -P "$(nproc)" -I{} \
                     sh -c '"$0" --dry-run --Werror "$1" >/dev/null 2>&1 || echo "$1"' "$cf" {} | sort)
if ((${#bad[@]})); then
  printf '%s\n' "${bad[@]}"
  echo "format check: ${#bad[@]} of ${#files[@]} files are not clang-format clean ($("$cf" --version | head -n 1));" \
       "run 'make format' (or tools/format/check.sh --fix FILE...)" >&2
  exit 1
fi
echo "format check: ${#files[@]} files clean"
