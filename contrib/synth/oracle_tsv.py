#!/usr/bin/env python3
"""Oracle for `prep criteo`: parse Criteo TSV files with Python's csv module and int(x, 16), map
them as the MLPerf DLRM reference does, and compare with the records of a .tks file (read by the
independent tks_dump.py).  Exit 0 when every record matches.
  python3 contrib/synth/oracle_tsv.py OUT.tks MAPPING MAX_IND_RANGE FILE...
"""
import csv
import gzip
import json
import os
import subprocess
import sys


def rows(path):
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:2] == b"\x1f\x8b":
        f = gzip.open(path, "rt", newline="")
    elif magic == b"\x28\xb5\x2f\xfd":
        text = subprocess.run(["zstd", "-d", "-c", "-q", path], stdout=subprocess.PIPE, check=True).stdout
        yield from csv.reader(text.decode().splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE)
        return
    else:
        f = open(path, newline="")
    with f:
        yield from csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)


def main():
    tks, mapping, mir, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    want = []
    for path in files:
        for r in rows(path):
            assert len(r) == 40
            want.append((int(r[0]), [max(int(x), 0) if x else 0 for x in r[1:14]],
                         [int(x, 16) % mir if x else 0 for x in r[14:]]))
    card = [mir] * 26
    if mapping == "dictionary":  # ids in order of first appearance, as the reference's convertDicts
        dicts = [{} for _ in range(26)]
        for _, _, c in want:
            for j, v in enumerate(c):
                dicts[j].setdefault(v, len(dicts[j]))
        want = [(y, d, [dicts[j][v] for j, v in enumerate(c)]) for y, d, c in want]
        card = [len(d) for d in dicts]
    dump = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tks_dump.py")
    schema = json.loads(subprocess.run([sys.executable, dump, tks, "--schema"], stdout=subprocess.PIPE,
                                       check=True).stdout)
    meta = {"source": "criteo", "mapping": mapping, "max_ind_range": mir, "cardinalities": card}
    if schema["meta"] != meta:
        sys.exit(f"meta differs:\n got  {schema['meta']}\n want {meta}")
    got = subprocess.run([sys.executable, dump, tks], stdout=subprocess.PIPE, check=True).stdout.splitlines()
    if len(got) != len(want):
        sys.exit(f"{len(got)} records, want {len(want)}")
    for i, (line, (y, d, c)) in enumerate(zip(got, want)):
        g = json.loads(line)
        if (g["label"], g["dense"], g["cat"]) != (y, d, c):
            sys.exit(f"record {i} differs:\n got  {g}\n want {(y, d, c)}")
    print(f"ok {len(want)} records")


if __name__ == "__main__":
    main()
