#!/usr/bin/env python3
# ema_swap.py IN OUT: OUT is the trainkit checkpoint IN with each tensor NAME and its moving
# average ema.NAME exchanged (their data offsets and CRC-32C metadata), so that the model's tensors
# are the average and evaluate(1) evaluates it. Used by tests/cli/ema.bats and
# tests/gpu/test_engine_ema.sh; the layout is trainkit-checkpoint(5)'s (safetensors: an 8-byte
# little-endian header length, the JSON header padded with blanks to 8 bytes, the data).
import json
import struct
import sys

src, dst = sys.argv[1:3]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
m = h["__metadata__"]
names = [k for k in h if k != "__metadata__" and "ema." + k in h]
if not names:
    sys.exit("%s: no ema.NAME tensors" % src)
for k in names:
    h[k], h["ema." + k] = h["ema." + k], h[k]
    m["crc32c." + k], m["crc32c.ema." + k] = m["crc32c.ema." + k], m["crc32c." + k]
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
print(len(names))
