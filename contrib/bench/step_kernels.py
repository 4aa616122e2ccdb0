#!/usr/bin/env python3
"""Lists the kernels of one traced training step and where its time goes: a CUPTI trace written
by tests/gpu/cupti_trace.h (TK_TRACE=FILE in test_resnet_step's step_throughput_bench, which
marks each graph replay "M step i" ... "M end i").

    contrib/bench/step_kernels.py TRACE [--step I] [--tsv FILE]

Prints the step's span, the kernels' busy time and the idle time between them, the time per
kind of kernel (cuDNN's forward, data- and weight-gradient convolutions; our BN, pooling, cast
and other kernels) and the longest kernels; --tsv FILE writes every kernel in order (index,
start and duration in us, the idle time before it, grid, block, kind, name).
"""
import argparse
import collections
import gzip
import re
import sys

KINDS = [  # (kind, pattern on the mangled name), first match wins
    ("conv fwd", re.compile(r"fprop|fwd.*conv|conv.*fwd", re.I)),
    ("conv dgrad", re.compile(r"dgrad", re.I)),
    ("conv wgrad", re.compile(r"wgrad", re.I)),
    ("bn partial", re.compile(r"partial")),
    ("bn final", re.compile(r"stats_final|bwd_final|sums_final")),
    ("bn apply", re.compile(r"5apply")),
    ("bn dx", re.compile(r"bwd_dx")),
    ("pool", re.compile(r"pool", re.I)),
    ("cast", re.compile(r"cast", re.I)),
    ("stem s2d", re.compile(r"s2d", re.I)),
    ("optimizer", re.compile(r"sgd|optim|lars", re.I)),
    ("gemm (cuBLASLt)", re.compile(r"gemm|cublas", re.I)),
]


def kind(name):
    for k, pat in KINDS:
        if pat.search(name):
            return k
    return "other"


def short(name, n=70):
    return name if len(name) <= n else name[: n - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--step", type=int, default=-1, help="which marked replay (default: the last)")
    ap.add_argument("--tsv", help="write every kernel of the step here")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    op = gzip.open if a.trace.endswith(".gz") else open
    kern, marks = [], {}
    with op(a.trace, "rt") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            if p[0] == "K":
                kern.append((int(p[1]), int(p[2]), int(p[5]), int(p[6]), " ".join(p[7:])))
            elif p[0] == "M" and len(p) >= 5:
                marks[(p[3], int(p[4]))] = int(p[1])
    steps = sorted(i for (w, i) in marks if w == "step" and ("end", i) in marks)
    if not steps:
        sys.exit("step_kernels.py: no 'M step i' / 'M end i' marks in %s" % a.trace)
    i = steps[a.step]
    t0, t1 = marks[("step", i)], marks[("end", i)]
    ks = sorted(k for k in kern if k[0] >= t0 and k[1] <= t1)
    if not ks:
        sys.exit("step_kernels.py: no kernels between the marks of step %d" % i)
    span = (ks[-1][1] - ks[0][0]) / 1e3
    busy = sum(k[1] - k[0] for k in ks) / 1e3
    per = collections.defaultdict(lambda: [0, 0.0, 0.0])  # count, busy us, idle before us
    rows, prev_end = [], None
    for j, (s, e, grid, block, name) in enumerate(ks):
        idle = 0.0 if prev_end is None else max(0, s - prev_end) / 1e3
        kd = kind(name)
        per[kd][0] += 1
        per[kd][1] += (e - s) / 1e3
        per[kd][2] += idle
        rows.append((j, (s - ks[0][0]) / 1e3, (e - s) / 1e3, idle, grid, block, kd, name))
        prev_end = e if prev_end is None else max(prev_end, e)
    idle_all = sum(r[3] for r in rows)
    print(f"step {i}: {len(ks)} kernels, span {span / 1e3:.3f} ms, kernels busy {busy / 1e3:.3f} ms, "
          f"idle between kernels {idle_all / 1e3:.3f} ms ({idle_all / max(len(ks) - 1, 1):.2f} us per boundary)")
    print(f"{'kind':<16} {'count':>6} {'busy ms':>9} {'idle before ms':>15}")
    for kd, (n, b, idl) in sorted(per.items(), key=lambda x: -x[1][1]):
        print(f"{kd:<16} {n:>6} {b / 1e3:>9.3f} {idl / 1e3:>15.3f}")
    print(f"the {a.top} longest kernels:")
    for r in sorted(rows, key=lambda r: -r[2])[: a.top]:
        print(f"  #{r[0]:<4} {r[2]:>8.1f} us  grid {r[4]:>6} x {r[5]:<4} {r[6]:<12} {short(r[7])}")
    if a.tsv:
        with open(a.tsv, "w") as f:
            f.write("idx\tstart_us\tdur_us\tidle_before_us\tgrid\tblock\tkind\tname\n")
            for r in rows:
                f.write("%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%s\t%s\n" % r)


if __name__ == "__main__":
    main()
