#!/usr/bin/env bash
# smoke_test.sh MAKE_RANDOM_GGUF LOOM DONOR_GGUF OUT_DIR: writes a small random GGUF in every
# dtype (GQA shapes) and checks that `loom generate` loads it and produces 8 greedy ids that are
# in the vocabulary and finite-logit (not all the same garbage id 0). Exit 77 (skip) without the
# donor, or 1 under LOOM_REQUIRE_SHARED_DATA=1 (as tests/support/test_data.h does for C++ tests).
set -euo pipefail
gen=$1 loom=$2 donor=$3 out=$4
if [[ ! -f $donor ]]; then
  if [[ ${LOOM_REQUIRE_SHARED_DATA:-0} == 1 ]]; then
    echo "needs ../shared/${donor#*/shared/} (required: LOOM_REQUIRE_SHARED_DATA=ON)"; exit 1
  fi
  echo "needs ../shared/${donor#*/shared/}"; exit 77
fi
mkdir -p "$out"
for dtype in f32 f16 bf16 q8_0 q4_0 q4_K q6_K; do
  f=$out/smoke-$dtype.gguf
  "$gen" --donor "$donor" --dtype "$dtype" --hidden 256 --layers 2 --heads 4 --kv-heads 2 \
    --ffn 512 --seed 7 --out "$f"
  ids=$("$loom" generate "$f" --ids 1,2,3 -n 8 --temp 0 2>/dev/null | head -n 1 | cut -c1-200)
  ids=${ids%%\[*}
  n=$(tr ',' '\n' <<< "$ids" | grep -cE '^[0-9]+$' || true)
  max=$(tr ',' '\n' <<< "$ids" | sort -n | tail -n 1)
  if [[ $n -ne 8 || $max -ge 32000 || $ids == "0,0,0,0,0,0,0,0" ]]; then
    echo "FAIL $dtype: loom generate printed '$ids'"; exit 1
  fi
  echo "ok $dtype: $ids"
done
# Same seed, same bytes; another seed, other bytes.
"$gen" --donor "$donor" --dtype q8_0 --hidden 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 \
  --seed 7 --out "$out/again.gguf"
cmp -s "$out/again.gguf" "$out/smoke-q8_0.gguf" || { echo "FAIL: not deterministic"; exit 1; }
"$gen" --donor "$donor" --dtype q8_0 --hidden 256 --layers 2 --heads 4 --kv-heads 2 --ffn 512 \
  --seed 8 --out "$out/other.gguf"
! cmp -s "$out/other.gguf" "$out/smoke-q8_0.gguf" || { echo "FAIL: seed ignored"; exit 1; }
echo "ok: deterministic per seed"
