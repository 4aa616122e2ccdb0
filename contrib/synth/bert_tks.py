#!/usr/bin/env python3
"""Small BERT pre-training shards (.tks, the schema `prep bert` writes: man/man5/trainkit-bert.5)
with a planted, learnable structure, for trainkit's BERT tests without the text pipeline.
Written from man/man5/tks.5 (frames compressed with the `zstd` command-line tool; without that
tool, e.g. on a GPU host that lacks it, --store writes each frame as a zstd frame of raw,
uncompressed blocks: valid zstd that any decoder reads, only larger).

  bert_tks.py -o FILE --records N [--seq-len 32] [--max-pred 5] [--vocab 64] [--seed 1]
              [--topic-prob 0.6] [--min-len N] [--lengths wikipedia] [--npz FILE]
              [--frame-records 1024] [--bad-record K:FIELD=VALUE] [--store]

Each sequence is [CLS] A [SEP] B [SEP] with a length in [min_len, seq_len] (min_len: seq_len/2 by
default; --min-len SEQ_LEN: every token real, the benchmark's batches), or with --lengths
wikipedia drawn from the length distribution of MLPerf BERT's Wikipedia training data at
max_seq_length 512 (WIKI_HIST below; scaled to --seq-len when that is not 512): 23.4% of the
sequences are 512 tokens long, the rest spread with a mode near 50 tokens, mean 255.8 tokens: half
of a padded batch's tokens are padding. --npz FILE also writes the columns as a numpy archive (the
PyTorch peer trains on the same sequences) with the lengths' statistics. Segment A has a topic
token t: each of its tokens is t with probability topic_prob, else uniform over the ordinary
tokens. Segment B has A's topic (next_sentence_label 0) or another one (label 1), half the time
each. About 15% of the ordinary tokens are masked (at most max_pred), 80% [MASK], 10% a random
token, 10% unchanged, as create_pretraining_data. A masked token is its sequence's topic with
probability about topic_prob, which the context reveals: a model that reads it gets about that
masked-LM accuracy, one that does not about 1/(vocab - 5). Ids: 0 [PAD], 1 [UNK], 2 [CLS],
3 [SEP], 4 [MASK].

--bad-record K:FIELD=VALUE writes VALUE into record K's field (first element): tests of the
reader's checks (e.g. 3:seq_len=999).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
FIRST = 5

# Sequence lengths of MLPerf BERT's phase-2 training data (Wikipedia, create_pretraining_data at
# max_seq_length 512, 16,279,552 sequences), summed into bins of 16 tokens: bin k counts the
# sequences of length 16k+1 .. 16k+16 (the last bin 497 .. 511), WIKI_FULL those of exactly 512.
# Summed by us from the per-length histogram Graphcore published with Krell et al., "Efficient
# sequence packing without cross-contamination" (arXiv 2107.02027; graphcore/examples,
# tutorials/blogs_code/packedBERT/histograms.py). No sequence is shorter than 5 tokens.
WIKI_HIST = [51863, 532972, 1099608, 1178636, 1020223, 833097, 695686, 601798, 534993, 479437, 437648, 403464,
             374027, 346346, 324538, 304654, 285802, 268403, 254107, 241894, 230238, 219537, 209925, 199809,
             191290, 183982, 176838, 170408, 163292, 158102, 153215, 138676]
WIKI_FULL = 3815044


def wiki_length(rng, L):
    """One length from the Wikipedia histogram (uniform within its bin), scaled to max length L."""
    w = np.array(WIKI_HIST + [WIKI_FULL], np.float64)
    k = int(rng.choice(len(w), p=w / w.sum()))
    n = 512 if k == len(WIKI_HIST) else int(rng.integers(16 * k + 1, min(16 * k + 16, 511) + 1))
    return max(5, min(L, int(round(n * L / 512))))


def make(args):
    rng = np.random.default_rng(args.seed)
    n, L, P, V = args.records, args.seq_len, args.max_pred, args.vocab
    ids = np.zeros((n, L), np.int16)
    seg = np.zeros((n, L), np.uint8)
    slen = np.zeros(n, np.int16)
    pos = np.zeros((n, P), np.int16)
    mid = np.zeros((n, P), np.int16)
    nm = np.zeros(n, np.int16)
    nsp = np.zeros(n, np.uint8)
    for r in range(n):
        total = wiki_length(rng, L) if args.lengths == "wikipedia" else int(rng.integers(args.min_len or L // 2, L + 1))
        body = total - 3
        la = int(rng.integers(1, body))
        lb = body - la
        ta = int(rng.integers(FIRST, V))
        label = int(rng.integers(0, 2))
        tb = ta if label == 0 else int(FIRST + (ta - FIRST + rng.integers(1, V - FIRST)) % (V - FIRST))

        def words(k, t):
            w = rng.integers(FIRST, V, size=k)
            w[rng.random(k) < args.topic_prob] = t
            return list(w)

        toks = [CLS] + words(la, ta) + [SEP] + words(lb, tb) + [SEP]
        segs = [0] * (la + 2) + [1] * (lb + 1)
        cand = [i for i, t in enumerate(toks) if t not in (CLS, SEP)]
        k = min(P, max(1, int(round(len(toks) * 0.15))))
        chosen = sorted(rng.choice(cand, size=min(k, len(cand)), replace=False))
        labels = []
        for i in chosen:
            labels.append(toks[i])
            u = rng.random()
            if u < 0.8:
                toks[i] = MASK
            elif u < 0.9:
                toks[i] = int(rng.integers(FIRST, V))
        ids[r, :total] = toks
        seg[r, :total] = segs
        slen[r] = total
        pos[r, :len(chosen)] = chosen
        mid[r, :len(chosen)] = labels
        nm[r] = len(chosen)
        nsp[r] = label
    cols = {"input_ids": ids, "segment_ids": seg, "seq_len": slen, "masked_lm_positions": pos,
            "masked_lm_ids": mid, "num_masked": nm, "next_sentence_labels": nsp}
    for spec in args.bad_record or []:
        rec, kv = spec.split(":", 1)
        field, value = kv.split("=", 1)
        a = cols[field]
        if a.ndim == 1:
            a[int(rec)] = int(value)
        else:
            a[int(rec), 0] = int(value)
    return cols


def crc(b):
    return zlib.crc32(b) & 0xffffffff


ZSTD_BLOCK = 128 * 1024  # the format's largest block
M64 = (1 << 64) - 1
XP1, XP2, XP3, XP4, XP5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                           0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xxh64_round(acc, lane):
    return rotl64((acc + lane * XP2) & M64, 31) * XP1 & M64


def xxh64(data):
    """XXH64 with seed 0 (the zstd content checksum is its low 32 bits), from the xxHash spec."""
    n, p = len(data), 0
    if n >= 32:
        v = [(XP1 + XP2) & M64, XP2, 0, (-XP1) & M64]
        lanes = struct.unpack_from("<%dQ" % (n // 32 * 4), data)
        for i in range(0, len(lanes), 4):
            v = [xxh64_round(v[j], lanes[i + j]) for j in range(4)]
        p = n // 32 * 32
        h = (rotl64(v[0], 1) + rotl64(v[1], 7) + rotl64(v[2], 12) + rotl64(v[3], 18)) & M64
        for x in v:
            h = ((h ^ xxh64_round(0, x)) * XP1 + XP4) & M64
    else:
        h = XP5
    h = (h + n) & M64
    while p + 8 <= n:
        h = (rotl64(h ^ xxh64_round(0, struct.unpack_from("<Q", data, p)[0]), 27) * XP1 + XP4) & M64
        p += 8
    if p + 4 <= n:
        h = (rotl64(h ^ (struct.unpack_from("<I", data, p)[0] * XP1 & M64), 23) * XP2 + XP3) & M64
        p += 4
    for b in data[p:]:
        h = rotl64(h ^ (b * XP5 & M64), 11) * XP1 & M64
    h = (h ^ (h >> 33)) * XP2 & M64
    h = (h ^ (h >> 29)) * XP3 & M64
    return h ^ (h >> 32)


def zstd_stored(raw):
    """One zstd frame (RFC 8878) holding raw in raw blocks, as `zstd --check` frames are read
    (tks.5 asks for the content checksum): the magic number, a frame header with the
    single-segment and checksum flags and an 8-byte content size, blocks of at most 128 KiB whose
    3-byte headers say last-block (bit 0), type 0 = raw (bits 1-2) and the size (bits 3-23), then
    the low 32 bits of the content's XXH64."""
    out = bytearray(struct.pack("<IB", 0xFD2FB528, 0xE4) + struct.pack("<Q", len(raw)))
    pos = 0
    while True:
        k = min(ZSTD_BLOCK, len(raw) - pos)
        last = pos + k == len(raw)
        out += struct.pack("<I", int(last) | (k << 3))[:3] + raw[pos:pos + k]
        pos += k
        if last:
            return bytes(out + struct.pack("<I", xxh64(raw) & 0xFFFFFFFF))


def write_tks(path, cols, meta, frame_records, store=False):
    names = ["input_ids", "segment_ids", "seq_len", "masked_lm_positions", "masked_lm_ids", "num_masked",
             "next_sentence_labels"]
    dt = {np.dtype(np.int16): "i16", np.dtype(np.uint8): "u8"}
    fields = [{"name": k, "dtype": dt[cols[k].dtype], "shape": list(cols[k].shape[1:])} for k in names]
    n = len(cols["seq_len"])
    schema = json.dumps({"fields": fields, "frame_records": frame_records, "meta": meta},
                        separators=(",", ":")).encode()
    head = b"\x89TKS\r\n\x1a\n" + struct.pack("<III", 1, 0, len(schema))
    out = bytearray(head + struct.pack("<I", crc(head + schema)) + schema)
    index = []
    with tempfile.TemporaryDirectory() as tmp:
        raw_path = os.path.join(tmp, "frame")
        for first in range(0, n, frame_records):
            k = min(frame_records, n - first)
            raw = b"".join(np.ascontiguousarray(cols[c][first:first + k]).astype(cols[c].dtype.newbyteorder("<"))
                           .tobytes() for c in names)
            if store:
                z = zstd_stored(raw)
            else:
                with open(raw_path, "wb") as f:
                    f.write(raw)
                z = subprocess.run(["zstd", "-q", "-c", "--check", raw_path], stdout=subprocess.PIPE,
                                   check=True).stdout
            bh = b"FRM1" + struct.pack("<II", k, len(z))
            out += bh + struct.pack("<I", crc(bh))
            index.append((len(out), len(z), first, k))
            out += z
    io = len(out)
    entries = b"".join(struct.pack("<QQQII", o, c, f, k, 0) for o, c, f, k in index)
    ih = b"IDX1" + struct.pack("<II", len(index), len(entries))
    out += ih + struct.pack("<I", crc(ih)) + entries
    trailer = struct.pack("<QQQ", io, len(index), n)
    out += trailer + struct.pack("<I", crc(entries + trailer)) + b"TKSE"
    tmp_path = path + ".tmp"
    with open(tmp_path, "wb") as f:
        f.write(out)
    os.replace(tmp_path, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--max-pred", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--topic-prob", type=float, default=0.6)
    ap.add_argument("--min-len", type=int, default=0)
    ap.add_argument("--lengths", choices=["uniform", "wikipedia"], default="uniform")
    ap.add_argument("--npz")
    ap.add_argument("--frame-records", type=int, default=1024)
    ap.add_argument("--bad-record", action="append")
    ap.add_argument("--store", action="store_true",
                    help="frames as zstd raw blocks (no compression; the default when no zstd tool is found)")
    args = ap.parse_args()
    if args.seq_len < 8 or args.vocab < FIRST + 2 or args.max_pred < 1 or not 0 <= args.min_len <= args.seq_len:
        sys.exit("bert_tks.py: need --seq-len >= 8, --vocab >= 7, --max-pred >= 1, 0 <= --min-len <= --seq-len")
    if args.min_len and args.min_len < 5:
        sys.exit("bert_tks.py: --min-len must be at least 5")
    meta = {"source": "bert", "input": "synthetic (contrib/synth/bert_tks.py)", "vocab_size": args.vocab,
            "max_seq_length": args.seq_len, "max_predictions_per_seq": args.max_pred,
            "special_ids": {"pad": PAD, "unk": UNK, "cls": CLS, "sep": SEP, "mask": MASK},
            "seed": args.seed, "topic_prob": args.topic_prob}
    if args.lengths == "wikipedia":
        meta["lengths"] = "wikipedia (MLPerf BERT phase 2, Krell et al. arXiv 2107.02027)"
    cols = make(args)
    store = args.store or shutil.which("zstd") is None
    if store and not args.store:
        print("bert_tks.py: no zstd tool found: frames stored uncompressed (zstd raw blocks)", file=sys.stderr)
    write_tks(args.output, cols, meta, args.frame_records, store)
    if args.npz:
        n = cols["seq_len"].astype(np.float64)
        stats = {"records": len(n), "mean_len": n.mean(), "mean_len2": (n * n).mean(),
                 "mean_masked": cols["num_masked"].astype(np.float64).mean(), "real_fraction": n.mean() / args.seq_len}
        np.savez(args.npz, **cols)
        with open(args.npz + ".json", "w") as f:
            json.dump(stats, f)


if __name__ == "__main__":
    main()
