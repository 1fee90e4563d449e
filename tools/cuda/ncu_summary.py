#!/usr/bin/env python3
"""Summarizes an `ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum` log: time and
DRAM bytes per kernel name (template arguments dropped), biggest first, with the totals of the
window. Usage: ncu_summary.py LOG [steps_in_window]"""
import csv
import re
import sys
from collections import defaultdict

rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
idx = {k: i for i, k in enumerate(head)}
t = defaultdict(float)
b = defaultdict(float)
n = defaultdict(int)
for r in body:
    name = re.sub(r"<.*", "", r[idx["Kernel Name"]]).replace("loom::cuda::", "")
    name = re.sub(r"^(void )?(\(anonymous namespace\)::)?", "", name)
    unit, val = r[idx["Metric Unit"]], float(r[idx["Metric Value"]].replace(",", ""))
    if r[idx["Metric Name"]] == "gpu__time_duration.sum":
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, 1.0)
        t[name] += val * scale
        n[name] += 1
    else:
        scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(unit, 1.0)
        b[name] += val * scale
steps = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
total_t = sum(t.values())
print(f"{'kernel':48s} {'calls':>6s} {'us/step':>9s} {'us/call':>8s} {'GB/s':>7s}")
for name in sorted(t, key=lambda k: -t[k]):
    gbs = b[name] / (t[name] * 1e-6) / 1e9 if t[name] else 0
    print(f"{name[:48]:48s} {n[name] / steps:6.1f} {t[name] / steps:9.1f} {t[name] / n[name]:8.2f} {gbs:7.0f}")
print(f"total kernel time per step: {total_t / steps:.1f} us over {sum(n.values()) / steps:.1f} kernels")
