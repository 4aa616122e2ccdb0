#!/usr/bin/env python3
"""The source layout rules of DESIGN.md section 3a, checked on the tree:

  layout.py cycles    include cycles between modules of lib/ and kernels/ (a module is a file
                      stem: lib/engine/params.{h,c}); prints each cycle, exit 1 when any
  layout.py long N DIR...   files over N lines under DIR (prints them), exit 1 when any

A module's edges are the headers its .h/.c/.cu files include ("engine/params.h" resolves under
lib/, then kernels/). With one header per .c file, an include cycle is a call cycle between files.
A header with no .c/.cu of its own (types, inline helpers) is not a node: what it includes counts
for the modules that include it.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules():
    files = {}
    for top in ("lib", "kernels"):
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith((".c", ".h", ".cu", ".cuh")):
                    p = os.path.relpath(os.path.join(d, n), ROOT)
                    files.setdefault(os.path.splitext(p)[0], []).append(p)
    return files


def resolve(inc):
    for base in ("lib", "kernels"):
        p = os.path.join(base, inc)
        if os.path.exists(os.path.join(ROOT, p)):
            return os.path.splitext(p)[0]
    return None


def graph():
    mods = modules()
    direct = {}
    for mod, paths in mods.items():
        edges = set()
        for p in paths:
            with open(os.path.join(ROOT, p), encoding="utf-8", errors="replace") as f:
                for inc in INC.findall(f.read()):
                    t = resolve(inc)
                    if t and t != mod:
                        edges.add(t)
        direct[mod] = edges
    coded = {m for m, paths in mods.items() if any(p.endswith((".c", ".cu")) for p in paths)}

    def reach(m, seen):  # modules with code reached through header-only ones
        out = set()
        for t in direct.get(m, ()):
            if t in coded:
                out.add(t)
            elif t not in seen:
                seen.add(t)
                out |= reach(t, seen)
        return out

    return {m: reach(m, {m}) - {m} for m in coded}


def cycles(g):
    """Strongly connected components with more than one module (Tarjan), each as a cycle path."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main(argv):
    if len(argv) >= 2 and argv[1] == "cycles":
        found = cycles(graph())
        for c in found:
            print("include cycle: " + " -> ".join(c))
        return 1 if found else 0
    if len(argv) >= 4 and argv[1] == "long":
        limit, bad = int(argv[2]), 0
        for top in argv[3:]:
            for d, _, names in os.walk(os.path.join(ROOT, top)):
                for n in sorted(names):
                    p = os.path.join(d, n)
                    with open(p, encoding="utf-8", errors="replace") as f:
                        k = sum(1 for _ in f)
                    if k > limit:
                        print(f"{os.path.relpath(p, ROOT)}: {k} lines")
                        bad = 1
        return bad
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
