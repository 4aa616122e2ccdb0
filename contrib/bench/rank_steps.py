#!/usr/bin/env python3
"""Where a training step's time goes on each rank, from CUPTI traces of a whole run
(tests/gpu/trace_preload.c: LD_PRELOAD=... TK_TRACE=DIR/NAME.%r train-step ...).

    contrib/bench/rank_steps.py [--end REGEX] [--skip N] TRACE [TRACE...]

Steps are cut at the last kernel of each optimizer update (--end, default LAMB's k_lamb2); the
first --skip steps (default 10: start-up, graph captures) are left out. For each trace, the
medians over the steps of: the step's span; the time some compute kernel ran (the union of the
non-NCCL kernels); the time an NCCL kernel ran; the part of that with no compute kernel beside it
(exposed communication, which includes an NCCL kernel waiting for a slower rank); the time
nothing ran (idle: the host, or a wait); and the compute busy time of the longest kernels' kinds.
"""
import argparse
import collections
import gzip
import re
import statistics


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    ks = []
    with op(path, "rt") as f:
        for line in f:
            if not line.startswith("K "):
                continue
            p = line.split(" ", 7)
            ks.append((int(p[1]), int(p[2]), int(p[3]), p[7].strip()))
    ks.sort()
    return ks


def union(iv):
    """Total length of the union of intervals, and the merged list."""
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return sum(e - s for s, e in out), out


def inter(a, b):
    """Length of the intersection of two merged interval lists."""
    i = j = 0
    t = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            t += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return t


def short(n):
    n = n.split("(")[0]
    n = re.sub(r"<.*", "", n)
    return n[:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--end", default=r"k_lamb2")
    ap.add_argument("--skip", type=int, default=10)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("traces", nargs="+")
    a = ap.parse_args()
    end = re.compile(a.end)
    print("%-28s %5s %9s %9s %9s %9s %9s %9s" % ("trace", "steps", "span_ms", "compute", "nccl", "exposed", "overlap",
                                                 "idle"))
    tops = {}
    for path in a.traces:
        ks = load(path)
        cuts = [k[1] for k in ks if end.search(k[3])]
        cuts = cuts[a.skip:]
        rows = []
        kind = collections.Counter()
        for s0, s1 in zip(cuts, cuts[1:]):
            inside = [k for k in ks if k[0] >= s0 and k[0] < s1]
            comp = [(k[0], min(k[1], s1)) for k in inside if "nccl" not in k[3].lower()]
            comm = [(k[0], min(k[1], s1)) for k in inside if "nccl" in k[3].lower()]
            cb, cm = union(comp)
            nb, nm = union(comm)
            ov = inter(cm, nm)
            ab, _ = union(comp + comm)
            rows.append((s1 - s0, cb, nb, nb - ov, ov, (s1 - s0) - ab))
            for k in inside:
                kind[short(k[3])] += k[1] - k[0]
        if not rows:
            print("%-28s no steps (no kernel matches --end %s after %d skipped)" % (path[-28:], a.end, a.skip))
            continue
        med = [statistics.median(r[i] for r in rows) / 1e6 for i in range(6)]
        print("%-28s %5d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f" % ((path[-28:], len(rows)) + tuple(med)))
        tops[path] = (len(rows), kind)
    for path, (n, kind) in tops.items():
        print("# %s: kernels with the most time a step (ms)" % path)
        for name, t in kind.most_common(a.top):
            print("#   %8.3f  %s" % (t / n / 1e6, name))


if __name__ == "__main__":
    main()
