#!/usr/bin/env python3
"""Reads a `loom --ktrace-file` trace (src/backend/cuda/ktrace.cuh) and prints where a decode
step's time goes: for each kernel launch of the step, in dependency order, the handoff from the
previous launch's last block end to this launch's release (its first block past PdlWait) and its
run from that release to its own last block end. Medians over the trace's last complete steps.

  python3 tools/cuda/ktrace.py trace.bin [--steps N]
"""
import argparse
import collections
import statistics
import sys

import numpy as np

REC = np.dtype([("t0", "<u8"), ("waited", "<u4"), ("end", "<u4"), ("tag", "<u2"),
                ("smid", "<u2"), ("block", "<u4"), ("grid", "<u4"), ("m", "<u4"), ("k", "<u4"),
                ("marks", "<u4", (4,)), ("cycles", "<u4", (3,))])
TAGS = {1: "gemv", 2: "attn", 3: "argmax", 4: "argmax-comb", 5: "advance", 6: "embed"}
GAP_NS = 8000  # launches of one kernel shape further apart than this are separate launches


def launches(recs):
    """Groups block records into launches: same (tag, m, k, grid), start times close together."""
    out = []
    by_key = collections.defaultdict(list)
    for r in recs:
        by_key[(int(r["tag"]), int(r["m"]), int(r["k"]), int(r["grid"]))].append(r)
    for key, rs in by_key.items():
        rs.sort(key=lambda r: int(r["t0"]))
        cur = [rs[0]]
        for r in rs[1:]:
            if int(r["t0"]) - int(cur[-1]["t0"]) > GAP_NS:
                out.append((key, cur))
                cur = []
            cur.append(r)
        out.append((key, cur))
    res = []
    for key, rs in out:
        if len(rs) != key[3]:
            continue  # cut by the ring's wrap (or blocks that skipped recording)
        t0 = np.array([int(r["t0"]) for r in rs], dtype=np.int64)
        waited = np.array([int(r["waited"]) for r in rs], dtype=np.int64)
        end = t0 + np.array([int(r["end"]) for r in rs], dtype=np.int64)
        release = int((t0 + waited).min()) if waited.any() else int(t0.min())
        marks = np.array([r["marks"] for r in rs], dtype=np.int64)
        cycles = np.array([r["cycles"] for r in rs], dtype=np.int64)
        last = int(np.argmax(end))
        # Per mark: the median block's and the last-ending block's time after the release.
        mk = []
        for j in range(marks.shape[1]):
            got = marks[:, j] > 0
            if not got.any():
                mk.append(None)
                continue
            at = t0[got] + marks[got, j] - release
            lastv = int(t0[last] + marks[last, j] - release) if marks[last, j] > 0 else None
            mk.append((int(np.median(at)), lastv))
        raw = sorted(((int(r["block"]), int(r["smid"]), int(r["t0"]) - release, int(r["waited"]),
                      [int(v) for v in r["marks"]], int(r["end"])) for r in rs))
        last_cyc = [int(v) for v in cycles[last]]
        med_cyc = [int(np.median(cycles[:, j])) for j in range(cycles.shape[1])]
        res.append(dict(key=key, raw=raw, start=int(t0.min()), release=release, end=int(end.max()),
                        end_med=int(np.median(end)), start_max=int(t0.max()), marks=mk,
                        cycles=(med_cyc, last_cyc)))
    res.sort(key=lambda l: (l["release"], l["end"]))
    return res


def name(key):
    tag, m, k, grid = key
    if tag == 1:
        return f"gemv {m}x{k}"
    if tag == 2:
        return f"attn splits={m}"
    return TAGS.get(tag, f"tag{tag}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--raw", type=int, default=0,
                    help="also print every block of launch #N of the last step (times after its release)")
    args = ap.parse_args()
    raw = open(args.trace, "rb").read()
    count = int(np.frombuffer(raw[:8], "<u8")[0])
    recs = np.frombuffer(raw[8:], REC)
    recs = recs[:count] if count < len(recs) else recs
    recs = recs[recs["grid"] > 0]
    print(f"{count} records written, {len(recs)} kept")
    ls = launches(list(recs))
    # Steps start at the embedding gather.
    starts = [i for i, l in enumerate(ls) if l["key"][0] == 6]
    steps = [ls[a:b] for a, b in zip(starts, starts[1:])]
    if not steps:
        print("no complete step"); return
    shape = collections.Counter(tuple(name(l["key"]) for l in s) for s in steps)
    common, n = shape.most_common(1)[0]
    steps = [s for s in steps if tuple(name(l["key"]) for l in s) == common][-args.steps:]
    print(f"{len(steps)} steps of the common shape ({len(common)} launches; {n} such steps)")
    step_ns = [s2[0]["start"] - s1[0]["start"] for s1, s2 in zip(steps, steps[1:])]
    if step_ns:
        print(f"step (embed to embed): median {statistics.median(step_ns)/1000:.1f} us")
    # Every step, whatever its shape: the spread of embed-to-embed times.
    all_ns = sorted(b["start"] - a["start"] for a, b in zip([ls[i] for i in starts], [ls[i] for i in starts[1:]]))
    if all_ns:
        med = statistics.median(all_ns)
        slow = [v for v in all_ns if v > 1.2 * med]
        pct = lambda q: all_ns[min(len(all_ns) - 1, int(q * len(all_ns)))] / 1000
        print(f"all {len(all_ns)} steps: p10 {pct(0.1):.1f} p50 {pct(0.5):.1f} p90 {pct(0.9):.1f} "
              f"max {all_ns[-1]/1000:.1f} us; {len(slow)} over 1.2x median, their excess "
              f"{sum(v - med for v in slow)/1000:.1f} us in all; mean {sum(all_ns)/len(all_ns)/1000:.1f} us")
    rows = []
    for i in range(len(common)):
        gaps, runs, tails, early = [], [], [], []
        for s in steps:
            l = s[i]
            prev_end = s[i - 1]["end"] if i > 0 else None
            if prev_end is not None:
                gaps.append(l["release"] - prev_end)
                early.append(prev_end - l["start"])
            runs.append(l["end"] - l["release"])
            tails.append(l["end"] - l["end_med"])
        med = lambda v: statistics.median(v) / 1000 if v else 0.0
        rows.append((common[i], med(gaps), med(runs), med(tails), med(early)))
    print(f"{'#':>3} {'launch':<22} {'handoff':>8} {'run':>8} {'tail':>7} {'early':>7}  (us; handoff: prev end -> release; tail: last end - median end; early: start before prev end)")
    for i, (nm, g, r, t, e) in enumerate(rows):
        print(f"{i:3d} {nm:<22} {g:8.2f} {r:8.2f} {t:7.2f} {e:7.2f}")
    if args.raw:
        l = steps[-1][args.raw]
        print(f"\nlaunch #{args.raw} ({name(l['key'])}) of the last step, per block: block smid "
              "start waited marks end (ns; start after the release, the rest after the start)")
        for b in l["raw"]:
            print("  ", b)
    print("\nmarks after the release (us; median block / last-ending block), medians over the steps:")
    seen = set()
    for i in range(len(common)):
        if common[i] in seen:
            continue
        seen.add(common[i])
        parts = []
        for j in range(4):
            vals = [s[i]["marks"][j] for s in steps if s[i]["marks"][j] is not None]
            if not vals:
                continue
            med_b = statistics.median(v[0] for v in vals) / 1000
            lasts = [v[1] for v in vals if v[1] is not None]
            last_b = statistics.median(lasts) / 1000 if lasts else float("nan")
            parts.append(f"m{j} {med_b:.2f}/{last_b:.2f}")
        ends = [s[i]["end"] - s[i]["release"] for s in steps]
        meds = [s[i]["end_med"] - s[i]["release"] for s in steps]
        parts.append(f"end {statistics.median(meds)/1000:.2f}/{statistics.median(ends)/1000:.2f}")
        print(f"  {common[i]:<22} " + "  ".join(parts))
    # KTRACE_LAP phases (clock cycles of thread 0; the streamed GEMV: waiting for a stage, the
    # dot, the rest), medians over the steps of the median block and of the last-ending block.
    seen = set()
    lines = []
    for i in range(len(common)):
        if common[i] in seen:
            continue
        seen.add(common[i])
        cyc = [s[i]["cycles"] for s in steps]
        if not any(any(c[0]) for c in cyc):
            continue
        med = [int(statistics.median(c[0][j] for c in cyc)) for j in range(3)]
        last = [int(statistics.median(c[1][j] for c in cyc)) for j in range(3)]
        lines.append(f"  {common[i]:<22} median block {med[0]:>7} {med[1]:>7} {med[2]:>7}   "
                     f"last block {last[0]:>7} {last[1]:>7} {last[2]:>7}")
    if lines:
        print("\nlap phases (clock cycles: wait, dot, rest), medians over the steps:")
        print("\n".join(lines))
    agg = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for nm, g, r, t, e in rows:
        a = agg[nm]; a[0] += g; a[1] += r; a[2] += 1
    print("\nby launch kind: count, handoff sum, run sum (us)")
    tot_g = tot_r = 0.0
    for nm, (g, r, c) in sorted(agg.items(), key=lambda kv: -(kv[1][0] + kv[1][1])):
        print(f"  {nm:<22} {c:3d} {g:9.1f} {r:9.1f}")
        tot_g += g; tot_r += r
    print(f"  {'total':<22}     {tot_g:9.1f} {tot_r:9.1f}  = {tot_g + tot_r:.1f} us")


if __name__ == "__main__":
    main()
