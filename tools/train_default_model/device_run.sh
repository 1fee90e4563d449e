#!/usr/bin/env bash
# Runs on the GPU machine (repo root as cwd, .data/ carried). Leaves in $OUT:
#   default_model.tar (the HF directory written by train.py) and train_log.txt.
set -u
OUT=${OUT:-/tmp/loom_default_model_out}
mkdir -p "$OUT"
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
PYTHONUNBUFFERED=1 python3 train.py --out "$OUT/model" "$@" 2>&1 | tee "$OUT/train_log.txt"
rc=${PIPESTATUS[0]}
tar -C "$OUT" -cf "$OUT/default_model.tar" model && rm -rf "$OUT/model"
exit "$rc"
