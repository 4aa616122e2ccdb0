#!/usr/bin/env python3
"""PyTorch's own bf16 error on the SSD network: the step of contrib/peers/ssd.py's reference model
under torch.autocast(bfloat16) against the same step in float64, from a dump of
tests/unit/test_ssd_model peer_dump (weights, batch, output weights). The bf16 bounds of
tests/gpu/test_ssd_model.c are set from what this prints for the GPU test's size:

    python3 contrib/peers/ssd.py --init init.st --width 8 --size 257 --classes 5 --batch 2 --seed 3
    SSD_PEER_INIT=init.st SSD_PEER_OUT=ours.st build/tests/unit/test_ssd_model peer_dump
    python3 contrib/peers/ssd_autocast.py ours.st
"""
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ssd  # noqa: E402


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: ssd_autocast.py DUMP.st\n")
        return 2
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    t, meta = load_file(sys.argv[1]), ssd.st_meta(sys.argv[1])
    l64, c64, g64, _, _, _ = ssd.reference_step(t, meta, torch.float64)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        lb, cb, gb, _, _, _ = ssd.reference_step(t, meta, torch.float32)
    num = sum(((gb[k].double() - g64[k]) ** 2).sum().item() for k in g64)
    den = sum((g64[k] ** 2).sum().item() for k in g64)
    heads = max(rel(gb[k], g64[k]) for k in g64 if k.startswith(("loc.", "conf.")))
    print("torch bf16 autocast vs float64: loc %.2e conf %.2e heads' gradients %.2e all gradients %.2e worst %.2e"
          % (rel(lb, l64), rel(cb, c64), heads, (num / den) ** 0.5, max(rel(gb[k], g64[k]) for k in g64)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
