#!/usr/bin/env python3
"""An independent .tks reader written from man/man5/tks.5 (not from lib/tks), used as a test
oracle: checks the header CRC, the index and trailer, decompresses each frame with the `zstd`
command-line tool and prints one JSON line per record: {"label": 0, "dense": [...], ...}.
With --schema it prints the schema JSON instead.
  python3 contrib/synth/tks_dump.py FILE.tks [--schema]
"""
import json
import struct
import subprocess
import sys
import zlib

import numpy as np

DT = {"u8": "<u1", "i8": "<i1", "i16": "<i2", "i32": "<i4", "i64": "<i8",
      "f16": "<f2", "f32": "<f4", "f64": "<f8"}


def main():
    data = open(sys.argv[1], "rb").read()
    assert data[:8] == b"\x89TKS\r\n\x1a\n", "magic"
    version, flags, slen, hcrc = struct.unpack_from("<IIII", data, 8)
    assert version == 1 and flags == 0
    assert zlib.crc32(data[:20] + data[24:24 + slen]) == hcrc, "header crc"
    schema = json.loads(data[24:24 + slen])
    if "--schema" in sys.argv:
        print(json.dumps(schema))
        return
    io, nframes, nrec, icrc, end = struct.unpack_from("<QQQI4s", data, len(data) - 32)
    assert end == b"TKSE"
    assert data[io:io + 4] == b"IDX1"
    assert zlib.crc32(data[io + 16:len(data) - 8]) == icrc, "index crc"
    fields = schema["fields"]
    out = []
    for i in range(nframes):
        off, csize, first, n, _ = struct.unpack_from("<QQQII", data, io + 16 + 32 * i)
        kind, bn, bc, bcrc = struct.unpack_from("<4sIII", data, off - 16)
        assert kind == b"FRM1" and bn == n and bc == csize
        assert zlib.crc32(data[off - 16:off - 4]) == bcrc
        raw = subprocess.run(["zstd", "-d", "-c", "-q"], input=data[off:off + csize],
                             stdout=subprocess.PIPE, check=True).stdout
        cols, pos = [], 0
        for f in fields:
            per = int(np.prod(f["shape"])) if f["shape"] else 1
            a = np.frombuffer(raw, DT[f["dtype"]], n * per, pos).reshape([n] + f["shape"])
            pos += a.nbytes
            cols.append(a)
        assert pos == len(raw)
        for r in range(n):
            out.append(json.dumps({f["name"]: c[r].tolist() for f, c in zip(fields, cols)}))
    assert len(out) == nrec
    sys.stdout.write("".join(line + "\n" for line in out))


if __name__ == "__main__":
    main()
