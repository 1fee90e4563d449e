#!/usr/bin/env bash
# CPU decode/prefill speed of loom vs llama.cpp (the prebuilt CPU build that node-llama-cpp
# 3.21.1 ships) on the same GGUF files and thread counts, measured in the same run.
#
#   bench/cpu_vs_llamacpp.sh LOOM_BINARY MODEL.gguf [MODEL.gguf ...]
#
# Builds nothing: pass a built loom binary (e.g. build-bench/src/cli/loom) and GGUFs (e.g. from
# tools/bench_models/make_random_gguf); run `npm ci` in bench/llamacpp first.
# For every model and thread count it runs `loom bench ... --json` and bench/llamacpp/bench.mjs
# alternately, ROUNDS times each (the order flips every round, so load changes hit both), then
# prints one table row per (model, threads):
#   loom / llama.cpp decode and prefill tok/s (best of the rounds; each run is itself best of
#   REPEAT), the decode ratio loom/llama.cpp of the best figures and the median of the per-round
#   paired ratios, loom's peak RSS and the file size + loom's KV pool.
# The load average is printed before and after each run.
#
# Environment knobs (defaults): THREADS="2 1" ROUNDS=3 REPEAT=2 PROMPT_TOKENS=128 GEN_TOKENS=64
#   KV_CACHE_GB=0.25 (loom's KV pool, allocated in full) RAW=<file for the raw JSON lines>
set -euo pipefail

if [[ $# -lt 2 ]]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
LOOM=$1
shift
MODELS=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
THREADS=${THREADS:-"2 1"}
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-2}
PROMPT_TOKENS=${PROMPT_TOKENS:-128}
GEN_TOKENS=${GEN_TOKENS:-64}
KV_CACHE_GB=${KV_CACHE_GB:-0.25}
RAW=${RAW:-$(mktemp /tmp/cpu_vs_llamacpp.XXXXXX.jsonl)}

[[ -x $LOOM ]] || { echo "cpu_vs_llamacpp: $LOOM is not an executable loom binary" >&2; exit 2; }
[[ -d $HERE/llamacpp/node_modules/node-llama-cpp ]] ||
  { echo "cpu_vs_llamacpp: run 'npm ci' in $HERE/llamacpp first" >&2; exit 2; }
for m in "${MODELS[@]}"; do
  [[ -f $m ]] || { echo "cpu_vs_llamacpp: $m: no such file" >&2; exit 2; }
done
: > "$RAW"

load() { cut -d' ' -f1-3 /proc/loadavg; }

# run ENGINE MODEL THREADS ROUND: one measurement, appended to $RAW as a JSON line tagged with
# the engine, thread count, round and the load average before/after.
run() {
  local engine=$1 model=$2 threads=$3 round=$4 before out
  before=$(load)
  if [[ $engine == loom ]]; then
    out=$("$LOOM" bench "$model" -t "$threads" --prompt-tokens "$PROMPT_TOKENS" \
          --gen-tokens "$GEN_TOKENS" --repeat "$REPEAT" --kv-cache-gb "$KV_CACHE_GB" --json \
          2>/dev/null | tail -n 1)
  else
    out=$(node "$HERE/llamacpp/bench.mjs" "$model" --threads "$threads" \
          --prompt-tokens "$PROMPT_TOKENS" --gen-tokens "$GEN_TOKENS" --repeat "$REPEAT" --json |
          tail -n 1)
  fi
  [[ $out == \{* ]] || { echo "cpu_vs_llamacpp: $engine on $model printed: $out" >&2; exit 1; }
  printf '{"engine":"%s","file":"%s","threads_req":%d,"round":%d,"load_before":"%s","load_after":"%s","r":%s}\n' \
    "$engine" "$model" "$threads" "$round" "$before" "$(load)" "$out" >> "$RAW"
  printf '  %-9s %-40s t=%d round %d: %s (load %s -> %s)\n' "$engine" "$(basename "$model")" \
    "$threads" "$round" \
    "$(node -e 'const r=JSON.parse(process.argv[1]);console.log(`decode ${r.decode_tok_s} prefill ${r.prefill_tok_s}`)' "$out")" \
    "$before" "$(load)" >&2
}

echo "cpu_vs_llamacpp: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
  "threads {$THREADS}, $ROUNDS rounds, prompt $PROMPT_TOKENS, gen $GEN_TOKENS, repeat $REPEAT," \
  "load at start $(load)" >&2
for model in "${MODELS[@]}"; do
  for t in $THREADS; do
    for ((r = 1; r <= ROUNDS; r++)); do
      if ((r % 2)); then run loom "$model" "$t" "$r"; run llama.cpp "$model" "$t" "$r"
      else run llama.cpp "$model" "$t" "$r"; run loom "$model" "$t" "$r"; fi
    done
  done
done

node - "$RAW" "$KV_CACHE_GB" <<'EOF'
const fs = require("fs");
const [raw, kvGb] = process.argv.slice(2);
const rows = fs.readFileSync(raw, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const groups = new Map();
for (const x of rows) {
  const k = `${x.file}\t${x.threads_req}`;
  if (!groups.has(k)) groups.set(k, []);
  groups.get(k).push(x);
}
const median = (a) => { const s = [...a].sort((p, q) => p - q), n = s.length;
                        return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const f = (v, w, d = 1) => v.toFixed(d).padStart(w);
console.log(`raw results: ${raw}; loads (1-min avg) seen: ` +
  `${Math.min(...rows.map((x) => +x.load_before.split(" ")[0]))}..` +
  `${Math.max(...rows.map((x) => +x.load_before.split(" ")[0]))}`);
console.log("model                          dtype thr | loom dec  pre | llama dec   pre | " +
            "dec ratio best/med | loom RSS MB  file+KV MB");
for (const [k, xs] of groups) {
  const [file, thr] = k.split("\t");
  const L = xs.filter((x) => x.engine === "loom"), C = xs.filter((x) => x.engine === "llama.cpp");
  const best = (a, key) => Math.max(...a.map((x) => x.r[key]));
  const paired = L.map((x) => {
    const c = C.find((y) => y.round === x.round);
    return c ? x.r.decode_tok_s / c.r.decode_tok_s : NaN;
  }).filter((v) => !isNaN(v));
  const fileMb = fs.statSync(file).size / 1e6;
  const rss = Math.max(...L.map((x) => x.r.peak_rss_mb));
  const name = file.split("/").pop().replace(/\.gguf$/, "").slice(0, 30).padEnd(30);
  console.log(`${name} ${L[0].r.dtype.padStart(5)} ${thr.padStart(3)} | ` +
    `${f(best(L, "decode_tok_s"), 8)} ${f(best(L, "prefill_tok_s"), 4, 0)} | ` +
    `${f(best(C, "decode_tok_s"), 9)} ${f(best(C, "prefill_tok_s"), 5, 0)} | ` +
    `${f(best(L, "decode_tok_s") / best(C, "decode_tok_s"), 8, 2)} ${f(median(paired), 6, 2)}    | ` +
    `${f(rss, 11, 0)} ${f(fileMb + kvGb * 1000, 11, 0)}`);
}
EOF
