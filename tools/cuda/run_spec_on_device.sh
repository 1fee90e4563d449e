#!/bin/bash
# Issue 30 on the GPU machine, from the repository root: speculation at chosen acceptance rates.
# Here, first:  BUILD=$PWD/build BINS="loom" bash tools/cuda/package_e2e.sh
# then run(command="bash tools/cuda/run_spec_on_device.sh", carry=[".dev/cuda2-bin"]).
# For each concurrency C in $CONCS and acceptance A in $ACCEPTS: `loom bench --replay-drafts A`
# on Llama-3.1-8B shapes with dummy weights (the decode run without drafts, then the same
# requests with k = $K drafts replaying its output; both in one process, so the ratio is a
# same-run comparison), --draft-token-cost auto unless $COST is set. One JSON line per run in
# $OUT/spec.jsonl; a table to stdout.
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
out=${OUT:-/tmp}
bin=${BIN:-.dev/cuda2-bin}
. tools/cuda/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
model=${MODEL:-bench/configs/llama-3.1-8b.json}
for c in ${CONCS:-1 64}; do
  for a in ${ACCEPTS:-1 0.6 0}; do
    timeout 200 $bin/loom bench --device cuda --dummy-weights "$model" --prompt-tokens 64 \
      --decode-prompt-tokens 512 --gen-tokens 128 --concurrency "$c" --repeat 2 \
      --replay-drafts "$a" --num-draft-tokens "${K:-4}" --draft-token-cost "${COST:-auto}" \
      --json ${LOOM_ARGS:-} 2>> "$out/spec.err" | tee -a "$out/spec.jsonl" |
      python3 -c "import json, sys
d = json.loads(sys.stdin.read())
print('C=%s A=%s: %.1f -> %.1f tok/s (%.2fx), %d of %d drafts accepted, %.1f%% same tokens' % (
      '$c', '$a', d['decode_tok_s'], d['spec_decode_tok_s'], d['spec_speedup'],
      d['spec_accepted'], d['spec_drafted'], 100 * d['spec_same_tokens']))" || echo "C=$c A=$a: failed (see spec.err)"
  done
done
