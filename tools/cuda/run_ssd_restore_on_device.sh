#!/bin/bash
# Issue 24's restore figures: how long a long prompt takes to answer after a restart, when its
# KV comes back from --ssd-cache, against re-prefilling it and against the disk's own read rate.
# For each arm (ARMS: "name device config prompt_tokens [serve flags...]" separated by ';'):
#   0. serve without --ssd-cache: the prompt's cold time without spilling (the copy-out cost);
#   1. serve with --ssd-cache (an empty dir), a short warm-up request, then the prompt (random
#      token ids, max_tokens 1): the cold time = a full prefill; again: the in-memory prefix hit;
#   2. wait until /stats ssd_cache.pending_spills is 0, SIGTERM, sync, drop the page cache
#      (when /proc/sys/vm/drop_caches is writable; said either way);
#   3. restart on the same dir, a different warm-up request, the prompt again: the restored time
#      and cached_tokens; then once more after a restart with the page cache warm.
# Before the arms: dd of a 2 GiB file in the same filesystem, O_DIRECT and buffered-after-drop.
# HOST_ARM="name config prompt_tokens kv_gb host_gb [flags...]" (CUDA): the host-RAM tier, no
#   disk: prompt A cold, prompt B (as long: it evicts A from a pool of kv_gb), A again — its
#   prefix copied up from host RAM — and A once more (an in-memory hit: the rest of the time);
#   beside torch's page-locked host->device copy rate.
# DECODE="config concurrency gen_tokens [flags...]" (CUDA): `loom bench` decode tok/s without
#   tiers and with --ssd-cache (and the host tier it brings), alternated DECODE_ROUNDS times.
# Here, first:
#   BUILD=$PWD/build-cuda2 BINS="loom cuda_backend_test" bash tools/cuda/package_e2e.sh
# then run(command="bash tools/cuda/run_ssd_restore_on_device.sh", carry=[".dev/cuda2-bin"]).
# Locally (CPU build): bin=build/src/cli ARMS="tiny cpu tests/node/testdata/tiny_qwen3.json 4096" bash ...
set -uo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || echo "$(dirname "$0")/../..")"
bin=${bin:-.dev/cuda2-bin}
work=${WORK:-/tmp/ssd-restore}
port=${PORT:-8093}
[ -f tools/cuda/device_env.sh ] && [ -z "${NO_DEVICE_ENV:-}" ] && . tools/cuda/device_env.sh
mkdir -p "$work"

drop_caches() {
  sync
  if (echo 3 > /proc/sys/vm/drop_caches) 2> /dev/null; then echo "page cache dropped"; return 0; fi
  echo "page cache NOT dropped (drop_caches not writable): restores below may read from RAM"
  return 1
}

if [ "${SKIP_DD:-0}" != 1 ]; then
  echo "== disk: $(df -h "$work" | tail -1 | tr -s ' ')"
  dd if=/dev/urandom of="$work/dd.bin" bs=16M count=128 oflag=direct status=none 2>&1 ||
    dd if=/dev/urandom of="$work/dd.bin" bs=16M count=128 status=none
  drop_caches > /dev/null
  echo "read 2 GiB O_DIRECT: $(dd if="$work/dd.bin" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1)"
  drop_caches > /dev/null
  echo "read 2 GiB buffered: $(dd if="$work/dd.bin" of=/dev/null bs=16M 2>&1 | tail -1)"
  rm -f "$work/dd.bin"
fi

# ask PROMPT_LEN SEED: one /v1/completions request of PROMPT_LEN random ids (seeded), max_tokens
# 1; prints "seconds cached_tokens".
ask() {
  python3 - "$port" "$1" "$2" <<'PY'
import json, random, sys, time, urllib.request
port, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
body = {"prompt": [rng.randint(1000, 30000) for _ in range(n)], "max_tokens": 1, "temperature": 0}
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
t = time.perf_counter()
r = json.load(urllib.request.urlopen(req, timeout=600))
dt = time.perf_counter() - t
print(f"{dt:.3f} {r['usage'].get('prompt_tokens_details', {}).get('cached_tokens', 0)}")
PY
}
ssd_stat() {  # ssd_stat FIELD
  curl -s "http://127.0.0.1:$port/stats" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['ssd_cache'].get('$1'))"
}
start() {  # start DEVICE CONFIG FLAGS... (with --ssd-cache unless NO_SSD=1)
  local dev=$1 cfg=$2 ssd=(--ssd-cache "$work/cache" --ssd-cache-max 40)
  shift 2
  [ "${NO_SSD:-0}" = 1 ] && ssd=()
  "$bin/loom" serve --device "$dev" --dummy-weights "$cfg" --port "$port" --no-open \
    "${ssd[@]}" "$@" > "$work/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && return 0
    kill -0 $pid 2> /dev/null || { tail -20 "$work/serve.log"; return 1; }
    sleep 0.5
  done
  return 1
}
stop() {
  kill -TERM $pid
  wait $pid 2> /dev/null
}

IFS=";" read -ra arms <<< "${ARMS-h200-8b cuda bench/configs/llama-3.1-8b.json 16384 --max-model-len 20000}"
for arm in "${arms[@]}"; do
  read -ra a <<< "$arm"
  name=${a[0]} dev=${a[1]} cfg=${a[2]} n=${a[3]}
  flags=("${a[@]:4}")
  rm -rf "$work/cache"
  echo "== $name: $dev $cfg, $n-token prompt ${flags[*]}"
  plain=""
  if NO_SSD=1 start "$dev" "$cfg" "${flags[@]}"; then  # the prefill's own time, no spills
    ask 64 1 > /dev/null
    plain=$(ask "$n" 7 | cut -d' ' -f1)
    echo "cold without --ssd-cache: $plain s"
    stop
  fi
  start "$dev" "$cfg" "${flags[@]}" || { echo "serve did not start"; continue; }
  ask 64 1 > /dev/null
  read -r cold cold_cached <<< "$(ask "$n" 7)"
  read -r hot hot_cached <<< "$(ask "$n" 7)"
  echo "cold (prefill): ${cold} s (cached $cold_cached); in-memory prefix hit: ${hot} s (cached $hot_cached)"
  for _ in $(seq 1 1200); do
    [ "$(ssd_stat pending_spills)" = 0 ] && break
    sleep 0.25
  done
  echo "spilled: entries $(ssd_stat entries), bytes $(ssd_stat bytes), writes $(ssd_stat writes), dropped $(ssd_stat dropped_spills)"
  stop
  for pass in dropped warm; do
    if [ $pass = dropped ]; then drop_caches; fi
    start "$dev" "$cfg" "${flags[@]}" || { echo "restart failed"; break; }
    ask 64 2 > /dev/null
    read -r t cached <<< "$(ask "$n" 7)"
    echo "restored ($pass page cache): ${t} s, cached_tokens $cached of $n;" \
      "restores $(ssd_stat restores), restored_blocks $(ssd_stat restored_blocks), misses $(ssd_stat misses)"
    # the peer is the prefill without spills (the re-prefill a server without the tier does)
    python3 -c "print(f'  re-prefill / restore = {${plain:-$cold} / $t:.1f}x')"
    stop
  done
  grep -iE "ssd|error" "$work/serve.log" | head -5
done
rm -rf "$work/cache"

host_stat() {  # host_stat FIELD
  curl -s "http://127.0.0.1:$port/stats" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['host_cache'].get('$1'))"
}
if [ -n "${HOST_ARM:-}" ]; then
  read -ra a <<< "$HOST_ARM"
  name=${a[0]} cfg=${a[1]} n=${a[2]} kv=${a[3]} host=${a[4]}
  flags=("${a[@]:5}")
  echo "== host tier $name: $cfg, $n-token prompts, --kv-cache-gb $kv --host-cache $host ${flags[*]}"
  python3 - <<'PY'
import time, torch
x = torch.empty(2 << 30, dtype=torch.uint8, pin_memory=True)
y = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
best = 1e9
for _ in range(5):
    torch.cuda.synchronize(); t = time.perf_counter()
    y.copy_(x, non_blocking=True); torch.cuda.synchronize()
    best = min(best, time.perf_counter() - t)
print(f"torch page-locked host->device copy of 2 GiB: {best * 1e3:.1f} ms, {2 * 2**30 / best / 1e9:.1f} GB/s")
PY
  if NO_SSD=1 start cuda "$cfg" --kv-cache-gb "$kv" --host-cache "$host" "${flags[@]}"; then
    ask 64 1 > /dev/null
    read -r cold _ <<< "$(ask "$n" 7)"
    read -r other _ <<< "$(ask "$n" 8)"
    read -r back cached <<< "$(ask "$n" 7)"
    read -r hit _ <<< "$(ask "$n" 7)"  # all of A in the pool now: the in-memory hit
    echo "A cold: $cold s; B cold: $other s; A again: $back s (cached $cached of $n); A hit: $hit s"
    restored=$(host_stat restored_blocks) entries=$(host_stat entries) bytes=$(host_stat bytes)
    echo "host tier: restores $(host_stat restores), restored_blocks $restored," \
      "entries $entries, bytes $bytes, evictions $(host_stat evictions)," \
      "refused $(host_stat refused)"
    python3 -c "print(f'  re-prefill / host restore = {$cold / $back:.1f}x')"
    python3 -c "gb = $restored * $bytes / $entries / 1e9; dt = $back - $hit
print(f'  host part: {gb:.2f} GB in {dt * 1e3:.0f} ms over the hit = {gb / dt:.1f} GB/s')"
    stop
  fi
fi

if [ -n "${DECODE:-}" ]; then
  read -ra a <<< "$DECODE"
  cfg=${a[0]} conc=${a[1]} gen=${a[2]}
  flags=("${a[@]:3}")
  echo "== decode at concurrency $conc, $gen tokens: tiers off vs --ssd-cache ${flags[*]}"
  for r in $(seq 1 "${DECODE_ROUNDS:-3}"); do
    for arm in off on; do
      tier=()
      [ $arm = on ] && { rm -rf "$work/cache"; tier=(--ssd-cache "$work/cache"); }
      echo "$arm: $("$bin/loom" bench --device cuda --dummy-weights "$cfg" --concurrency "$conc" \
        --decode-prompt-tokens 512 --prompt-tokens 512 --gen-tokens "$gen" --repeat 1 --json \
        "${tier[@]}" "${flags[@]}" 2> /dev/null |
        python3 -c "import json,sys; d=json.load(sys.stdin); print(d['decode_tok_s'])")"
    done
  done
  rm -rf "$work/cache"
fi
