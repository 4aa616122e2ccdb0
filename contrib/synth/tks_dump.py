#!/usr/bin/env python3
"""An independent .tks reader written from man/man5/tks.5 (not from lib/tks), used as a test
oracle: checks the header CRC, the index and trailer, decompresses each frame with the `zstd`
command-line tool (libzstd through ctypes without it) and prints one JSON line per record:
{"label": 0, "dense": [...], ...}. read(path) gives the records as numpy arrays (rnnt_eval.py).
A ragged field (shape [-1, ...], version 2 files) prints as the list of its rows, or with
--hex as the hex string of its bytes. With --schema it prints the schema JSON instead.
  python3 contrib/synth/tks_dump.py FILE.tks [--schema] [--hex]
"""
import json
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np

HEX = "--hex" in sys.argv
DT = {"u8": "<u1", "i8": "<i1", "i16": "<i2", "i32": "<i4", "i64": "<i8",
      "f16": "<f2", "f32": "<f4", "f64": "<f8"}


def unzstd(blob):
    """One zstd frame decompressed: the zstd tool, or libzstd through ctypes where the tool is
    missing (libzstd1 is part of every Debian/Ubuntu base system)."""
    if shutil.which("zstd"):
        return subprocess.run(["zstd", "-d", "-c", "-q"], input=blob, stdout=subprocess.PIPE, check=True).stdout
    import ctypes
    import ctypes.util
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    n = lib.ZSTD_getFrameContentSize(blob, ctypes.c_size_t(len(blob)))
    assert n < 2**62, "zstd frame without its content size"
    out = ctypes.create_string_buffer(max(1, n))
    got = lib.ZSTD_decompress(out, ctypes.c_size_t(n), blob, ctypes.c_size_t(len(blob)))
    assert not lib.ZSTD_isError(got) and got == n, "zstd frame"
    return out.raw[:n]


def read(path):
    """The schema and the records of a .tks file: a list of {field: numpy array} (a ragged
    field's row, or a fixed field's value), each frame decompressed with the zstd tool."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89TKS\r\n\x1a\n", "magic"
    version, flags, slen, hcrc = struct.unpack_from("<IIII", data, 8)
    assert version in (1, 2) and flags == 0
    assert zlib.crc32(data[:20] + data[24:24 + slen]) == hcrc, "header crc"
    schema = json.loads(data[24:24 + slen])
    io, nframes, nrec, icrc, end = struct.unpack_from("<QQQI4s", data, len(data) - 32)
    assert end == b"TKSE"
    assert data[io:io + 4] == b"IDX1"
    assert zlib.crc32(data[io + 16:len(data) - 8]) == icrc, "index crc"
    fields = schema["fields"]
    ragged = [bool(f["shape"]) and f["shape"][0] == -1 for f in fields]
    assert (version == 2) == any(ragged), "version 2 exactly when a field is ragged"
    out = []
    for i in range(nframes):
        off, csize, first, n, _ = struct.unpack_from("<QQQII", data, io + 16 + 32 * i)
        kind, bn, bc, bcrc = struct.unpack_from("<4sIII", data, off - 16)
        assert kind == b"FRM1" and bn == n and bc == csize
        assert zlib.crc32(data[off - 16:off - 4]) == bcrc
        raw = unzstd(data[off:off + csize])
        cols, pos = [], 0
        for f, rag in zip(fields, ragged):
            dt = np.dtype(DT.get(f["dtype"], "<u2"))  # bf16: its raw 16-bit words
            if rag:  # n 4-byte row counts, then the rows back to back
                rows = np.frombuffer(raw, "<u4", n, pos)
                pos += 4 * n
                inner = f["shape"][1:]
                per = int(np.prod(inner)) if inner else 1
                vals = []
                for k in rows:
                    a = np.frombuffer(raw, dt, int(k) * per, pos)
                    pos += a.nbytes
                    vals.append(a.reshape([int(k)] + inner))
                cols.append(vals)
            else:
                per = int(np.prod(f["shape"])) if f["shape"] else 1
                a = np.frombuffer(raw, dt, n * per, pos).reshape([n] + f["shape"])
                pos += a.nbytes
                cols.append(a)
        assert pos == len(raw)
        for r in range(n):
            out.append({f["name"]: c[r] for f, c in zip(fields, cols)})
    assert len(out) == nrec
    return schema, out


def main():
    schema, recs = read(sys.argv[1])
    if "--schema" in sys.argv:
        print(json.dumps(schema))
        return
    rag = {f["name"]: bool(f["shape"]) and f["shape"][0] == -1 for f in schema["fields"]}
    sys.stdout.write("".join(json.dumps({k: (v.tobytes().hex() if HEX and rag[k] else v.tolist())
                                         for k, v in r.items()}) + "\n" for r in recs))


if __name__ == "__main__":
    main()
