#!/usr/bin/env python3
"""The source layout rules of DESIGN.md section 3a, checked on the tree:

  layout.py layers    every #include "..." of lib/, kernels/ and cmd/ points down the layers of
                      LAYERS below (or stays in its own layer), no workload includes another's
                      headers, and only the op dispatchers (kernels/NAME.c) include
                      kernels/dispatch.h; prints FILE:LINE includes HEADER (why) for each
                      arrow that does not, exit 1 when any
  layout.py table     prints LAYERS, lowest first
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
INC = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)
SOURCES = (".c", ".h", ".cu", ".cuh")

# The layers, lowest first: (name, directories, the layers right below it). A file may include
# headers of its own layer and of every layer below its own, directly or through others; nothing
# else. DESIGN.md's order is core -> gpu -> kernels -> shared model blocks -> engine -> workloads
# -> cmd; the data libraries (record streams, checkpoints, each dataset's formats) sit above core
# and below the engine, each on only what it uses: the device only where it must (checkpoints name
# tk_dtype; the image decoders run nvJPEG and the img_resize op). lib/dist (ranks, rendezvous)
# is host code under the collectives of lib/gpu. A new directory of lib/ gets a row here.
LAYERS = [
    ("core", ["lib/core"], []),
    ("dist", ["lib/dist"], ["core"]),
    ("gpu", ["lib/gpu"], ["dist"]),
    ("kernels", ["kernels"], ["gpu"]),
    ("blocks", ["lib/blocks"], ["kernels"]),
    ("tks", ["lib/tks"], ["core"]),
    ("ckpt", ["lib/ckpt"], ["gpu"]),
    ("criteo", ["lib/criteo"], ["tks"]),
    ("bert", ["lib/bert"], ["tks"]),
    ("coco", ["lib/coco"], ["core"]),
    ("nifti", ["lib/nifti"], ["core"]),
    ("kits19", ["lib/kits19"], ["nifti", "tks"]),
    ("compliance", ["lib/compliance"], ["coco"]),
    ("image", ["lib/image"], ["kernels"]),
    ("imagenet", ["lib/imagenet"], ["image", "tks"]),
    ("cocodata", ["lib/cocodata"], ["coco", "image", "tks"]),
    ("librispeech", ["lib/librispeech"], ["tks"]),
    ("speech", ["lib/speech"], ["core"]),
    ("engine", ["lib/engine"], ["blocks", "ckpt", "criteo", "bert", "compliance", "imagenet", "nifti", "kits19",
                                "cocodata", "librispeech", "speech"]),
    ("workloads", ["lib/workloads/*"], ["engine"]),
    ("cmd", ["cmd"], ["workloads"]),
]
# Only the op dispatchers use the dispatch macro: every op's dispatcher is kernels/NAME.c, beside
# its kernel NAME.cu and its reference NAME_ref.c.
DISPATCH = "kernels/dispatch.h"


def below():
    """Each layer's name -> the set of layers under it (the closure of LAYERS' lists)."""
    direct = {name: set(under) for name, _, under in LAYERS}
    out = {}
    for name, _, _ in LAYERS:
        seen, todo = set(), list(direct[name])
        while todo:
            t = todo.pop()
            if t not in seen:
                seen.add(t)
                todo.extend(direct[t])
        out[name] = seen
    return out


def unit(path):
    """(layer, unit) of a path relative to ROOT: the unit is the layer, or workloads/NAME."""
    for name, dirs, _ in LAYERS:
        for d in dirs:
            if d.endswith("/*"):
                base = d[:-2] + "/"
                rest = path[len(base):] if path.startswith(base) else ""
                if "/" in rest:
                    return name, base.split("/")[-2] + "/" + rest.split("/")[0]
            elif path.startswith(d + "/"):
                return name, name
    return None, None


def include_path(src, inc):
    """Where the compiler finds a quoted include of src: src's folder, then -Ilib -Ikernels -Icmd."""
    for base in (os.path.dirname(src), "lib", "kernels", "cmd"):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(ROOT, p)):
            return p
    return None


def layers():
    under = below()
    bad = []
    for top in ("lib", "kernels", "cmd"):
        for d, _, names in sorted(os.walk(os.path.join(ROOT, top))):
            for n in sorted(names):
                if not n.endswith(SOURCES):
                    continue
                src = os.path.relpath(os.path.join(d, n), ROOT)
                layer, u = unit(src)
                if layer is None:
                    bad.append(f"{src}: in no layer (add its directory to LAYERS in contrib/tools/layout.py)")
                    continue
                with open(os.path.join(ROOT, src), encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INC.finditer(text):
                    inc, line = m.group(1), text.count("\n", 0, m.start()) + 1
                    target = include_path(src, inc)
                    if target is None:
                        continue # not ours (a system or library header)
                    tl, tu = unit(target)
                    where = f"{src}:{line} includes {inc}"
                    if target == DISPATCH and not (layer == "kernels" and src.endswith(".c")):
                        bad.append(f"{where} (op dispatchers live in kernels/NAME.c)")
                    elif tl is None:
                        bad.append(f"{where} ({target} is in no layer)")
                    elif tl == layer and tu != u:
                        bad.append(f"{where} (workload {u.split('/')[1]} -> another workload {tu.split('/')[1]})")
                    elif tl != layer and tl not in under[layer]:
                        kind = "higher layer" if layer in under[tl] else "layer"
                        tail = "" if kind == "higher layer" else ", not below it"
                        bad.append(f"{where} (layer {layer} -> {kind} {tl}{tail})")
    for b in bad:
        print(b)
    return 1 if bad else 0


def table():
    under = below()
    for name, dirs, _ in LAYERS:
        order = [n for n, _, _ in LAYERS if n in under[name]]
        print(f"{name:11} {' '.join(dirs):17} may include: {', '.join(order) if order else '(nothing)'}")
    return 0


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
    if len(argv) == 2 and argv[1] == "layers":
        return layers()
    if len(argv) == 2 and argv[1] == "table":
        return table()
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
