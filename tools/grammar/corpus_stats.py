"""The corpus bench's figures from `loom grammar --bench-json FILE` (what corpus_bench.mjs prints),
for the GPU machine, which has python3 but no node: python3 corpus_stats.py FILE LABEL."""
import json
import sys

g = json.load(open(sys.argv[1]))["grammars"]
ok = [x for x in g if "error" not in x]
c = sorted(x["compile_ms"] for x in ok)
m = sorted(t for x in ok for t in x["mask_us"])


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))]


print(f"{sys.argv[2]}: {len(ok)}/{len(g)} compiled ({100 * len(ok) / len(g):.1f}%), compile p50 "
      f"{pct(c, .5):.2f} p99 {pct(c, .99):.2f} max {c[-1]:.2f} ms; {len(m)} masks p50 "
      f"{pct(m, .5):.1f} p99 {pct(m, .99):.1f} max {m[-1]:.1f} us; > 1 ms: "
      f"{sum(t > 1000 for t in m)}; > 200 us: {sum(t > 200 for t in m)}")
