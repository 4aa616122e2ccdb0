#!/usr/bin/env python3
"""Summarizes a CUPTI trace written by tests/gpu/cupti_trace.h (TK_TRACE=FILE in
test_resnet_reader's bench_readers_alone): per run (the "M run T MODE" marks), per batch of
each reader thread (the "M B w i" / "M E w i" marks), which CUDA calls the thread made and how
long they held it, what they queued on which streams (and at which priority), which of the
calls waited (synchronization records), and how the waits line up with the kernels of the load
beside the readers (the thread that marked "busy").

    contrib/bench/cupti_summary.py TRACE [TRACE...]   (plain or .gz)
"""
import bisect
import collections
import gzip
import sys

SYNC = {0: "unknown", 1: "event sync", 2: "stream wait event", 3: "stream sync", 4: "context sync"}
COPY = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}


def short(name, n=48):
    name = name.split("(")[0]
    return name if len(name) <= n else name[: n - 3] + "..."


def load(path):
    op = gzip.open if path.endswith(".gz") else open
    api, gpu, marks, prio, notes = {}, [], [], {}, []
    calls = []  # (start, end, tid, corr, kind R/D, name)
    with op(path, "rt") as f:
        for line in f:
            p = line.split()
            if not p:
                continue
            k = p[0]
            if k in ("R", "D"):
                c = (int(p[1]), int(p[2]), int(p[3]), int(p[4]), k, p[5])
                calls.append(c)
                api[c[3]] = c
            elif k == "K":
                gpu.append(("K", int(p[1]), int(p[2]), int(p[3]), int(p[4]), short(" ".join(p[7:])),
                            f"grid {p[5]} x {p[6]}"))
            elif k == "C":
                gpu.append(("C", int(p[1]), int(p[2]), int(p[3]), int(p[4]),
                            "memcpy " + COPY.get(int(p[6]), p[6]), f"{int(p[5])} B"))
            elif k == "S":
                gpu.append(("S", int(p[1]), int(p[2]), int(p[3]), int(p[4]), "memset", f"{int(p[5])} B"))
            elif k == "Y":
                gpu.append(("Y", int(p[1]), int(p[2]), int(p[3]), int(p[4]), SYNC.get(int(p[5]), p[5]),
                            f"event {p[6]}"))
            elif k == "P":
                prio[int(p[1])] = (int(p[2]), int(p[3]), int(p[4]) if len(p) > 4 else 0,
                                   int(p[5]) if len(p) > 5 else 0)
            elif k == "M":
                marks.append((int(p[1]), int(p[2]), " ".join(p[3:])))
            elif k == "#":
                notes.append(line.strip())
    calls.sort()
    return api, gpu, marks, prio, notes, calls


def ms(ns):
    return ns / 1e6


def summarize(path):
    api, gpu, marks, prio, notes, calls = load(path)
    print(f"== {path}")
    for n in notes:
        print(n)
    marks.sort()
    runs = []
    for i, (t, tid, lab) in enumerate(marks):
        if lab.startswith("run "):
            end = next((m[0] for m in marks[i + 1:] if m[2] == "end"), float("inf"))
            runs.append((t, end, lab))
    busy_tids = {tid for t, tid, lab in marks if lab == "busy"}
    for r0, r1, lab in runs:
        batches = collections.defaultdict(dict)  # tid -> i -> [b, e]
        for t, tid, m in marks:
            if r0 <= t <= r1 and m[:2] in ("B ", "E "):
                w, i = m.split()[1:]
                batches[tid].setdefault(int(i), [None, None])[0 if m[0] == "B" else 1] = t
        spans = [(b, e, tid) for tid, d in batches.items() for b, e in d.values() if b is not None and e is not None]
        nb = len(spans)
        print(f"\n-- {lab}: {nb} batches on {len(batches)} reader threads, "
              f"mean {ms(sum(e - b for b, e, _ in spans) / max(nb, 1)):.1f} ms per batch")
        # the steady state: neither a reader's first batch (nvJPEG's start-up: its states, streams
        # and buffers) nor its last (which may overlap another reader's close, whose frees wait)
        later = [(b, e, tid) for tid, d in batches.items() for i, (b, e) in d.items()
                 if 1 <= i < max(d) and b and e]
        if later:
            d = sorted(e - b for b, e, _ in later)
            frees = sum(1 for c in calls if c[5].startswith("cuMemFree") and
                        any(t == c[2] and b <= c[0] <= e for b, e, t in later))
            print(f"   past each reader's first and before its last batch: {len(d)} batches, mean {ms(sum(d) / len(d)):.1f} ms, "
                  f"median {ms(d[len(d) // 2]):.1f} ms; cuMemFree (a device-wide wait) {frees / len(d):.1f} per batch")
        # the calls of the reader threads inside their batches
        by_tid = collections.defaultdict(list)
        for c in calls:
            if r0 <= c[0] <= r1:
                by_tid[c[2]].append(c)
        inside = []
        for b, e, tid in spans:
            inside += [c for c in by_tid[tid] if b <= c[0] and c[1] <= e]
        agg = collections.defaultdict(lambda: [0, 0, 0])
        for c in inside:
            a = agg[(c[4], c[5])]
            a[0] += 1
            a[1] += c[1] - c[0]
            a[2] = max(a[2], c[1] - c[0])
        print(f"  CUDA calls of the reader threads inside a batch (per batch; R runtime, D driver):")
        print(f"    {'call':<44} {'count':>8} {'ms held':>9} {'max ms':>8}")
        for (k, n), (cnt, tot, mx) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:18]:
            print(f"    {k} {n:<42} {cnt / max(nb, 1):8.1f} {ms(tot) / max(nb, 1):9.2f} {ms(mx):8.3f}")
        # one batch's sequence of calls (the second batch of a reader: past the set-up), runs of
        # the same call folded: name xN (ms held)
        if spans:
            b, e, tid = sorted(spans, key=lambda x: x[0])[min(len(spans) - 1, len(batches))]
            seq, out = [c for c in by_tid[tid] if b <= c[0] and c[1] <= e], []
            for c in seq:
                if out and out[-1][0] == (c[4], c[5]):
                    out[-1][1] += 1
                    out[-1][2] += c[1] - c[0]
                else:
                    out.append([(c[4], c[5]), 1, c[1] - c[0], c[0] - b])
            print(f"  one batch's calls in order (thread {tid}, {ms(e - b):.1f} ms; at ms: call xN held ms):")
            line = "   "
            for (k, n), cnt, tot, at in out[:120]:
                item = f" {ms(at):.2f}:{k}:{n}" + (f"x{cnt}" if cnt > 1 else "") + f"({ms(tot):.2f})"
                if len(line) + len(item) > 118:
                    print(line)
                    line = "   "
                line += item
            print(line + (f" ... ({len(out) - 120} more)" if len(out) > 120 else ""))
        # other threads (not readers, not the load, not the main thread's marks)
        others = collections.Counter()
        for tid, cs in by_tid.items():
            if tid not in batches and tid not in busy_tids:
                for c in cs:
                    others[(tid, c[4], c[5])] += 1
        if others:
            print("  calls on other threads during the run (tid, kind, name: count):")
            for (tid, k, n), cnt in others.most_common(8):
                print(f"    {tid} {k} {n}: {cnt}")
        # GPU work and synchronizations by the thread that asked for them
        reader_corr = {c[3] for c in inside}
        busy_corr = {c[3] for c in api.values() if c[2] in busy_tids}
        busy_k = sorted((g[1], g[2]) for g in gpu if g[0] == "K" and g[4] in busy_corr and r0 <= g[1] <= r1)
        busy_streams = {g[3] for g in gpu if g[0] == "K" and g[4] in busy_corr}
        busy_ends = [e for _, e in busy_k]
        if busy_k:
            d = [e - s for s, e in busy_k]
            print(f"  the load: {len(busy_k)} kernels on streams {sorted(busy_streams)} "
                  f"(priority {[prio.get(s, ('?',))[0] for s in sorted(busy_streams)]}), "
                  f"mean {ms(sum(d) / len(d)) * 1e3:.0f} us")

        def after_busy_end(t):  # ns since the last end of a load kernel before t
            i = bisect.bisect_right(busy_ends, t)
            return t - busy_ends[i - 1] if i else None

        work = collections.defaultdict(lambda: [0, 0, 0, 0, []])
        for g in gpu:
            if g[4] not in reader_corr:
                continue
            a = api[g[4]]
            pr = prio.get(g[3])
            key = (g[0], "nvjpeg's" if pr and pr[2] else g[3], g[5])  # nvJPEG's own streams as one
            w = work[key]
            w[0] += 1
            w[1] += g[2] - g[1]
            w[2] += max(0, g[1] - a[1]) if g[0] != "Y" else 0  # from the call's return to the start
            w[3] = max(w[3], g[2] - g[1])
            ref = g[2] if g[0] == "Y" else g[1]  # a wait's end, a kernel's start
            x = after_busy_end(ref) if busy_ends else None
            if x is not None:
                w[4].append(x)
        print("  GPU work and waits asked for by the reader threads (per batch; stream [priority]):")
        print(f"    {'what':<52} {'stream':>10} {'count':>7} {'ms':>8} {'max ms':>8} {'queued ms':>9}"
              f" {'after a load kernel ended: median us':>10}")
        for (k, s, n), (cnt, tot, q, mx, xs) in sorted(work.items(), key=lambda kv: -kv[1][1])[:20]:
            pr = prio.get(s) if s != "nvjpeg's" else next((v for v in prio.values() if v[2]), None)
            st = f"{s} [{pr[0] if pr else '?'}]"
            med = f"{sorted(xs)[len(xs) // 2] / 1e3:.0f}" if xs else "-"
            print(f"    {k} {n:<50} {st:>10} {cnt / max(nb, 1):7.1f} {ms(tot) / max(nb, 1):8.2f} {ms(mx):8.3f}"
                  f" {ms(q) / max(cnt, 1):9.3f} {med:>10}")
    used = sorted({g[3] for g in gpu})
    print("\n  streams seen (id: priority, flags[, made by libnvjpeg][, raised]; '?' = made before the trace):",
          ", ".join(f"{s}: {prio[s][0]},{prio[s][1]}" + (", nvjpeg" if prio[s][2] else "") +
                    (", raised" if prio[s][3] == 1 else ", raise failed" if prio[s][3] else "")
                    if s in prio else f"{s}: ?" for s in used))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summarize(p)
