#!/usr/bin/env python3
"""Writes BERT examples as NVIDIA's MLPerf HDF5 files, with h5py, for the tests of
`prep bert-hdf5`: the key names, shapes and dtypes of NVIDIA's scripts
(training_results_v2.0 NVIDIA/benchmarks/bert/implementations/pytorch/input_preprocessing):

  fixed   create_pretraining_data.py / pick_eval_samples.py: input_ids, input_mask, segment_ids
          (N, L); masked_lm_positions, masked_lm_ids (N, P); next_sentence_labels (N).
          --dtypes ref (default: i4 ids and positions, i1 masks/segments/labels, as
          create_pretraining_data.py) or chop (i2 ids and positions, as chop_hdf5_files.py)
  varlen  convert_fixed2variable.py: input_ids, masked_lm_positions, masked_lm_ids vlen int16,
          segment_ids vlen int8, next_sentence_labels int8, all (N)

  bert_h5.py fixed|varlen IN.jsonl OUT.hdf5 [--dtypes ref|chop] [--width L] [--pred P]
             [--drop KEY] [--nsp-2d]
IN.jsonl holds one example a line with the fields of trainkit's .tks records (tks_dump.py's
output); --width/--pred pad the fixed layout to other widths; --drop leaves a key out (to test
the error); --nsp-2d writes next_sentence_labels as (N, 1).
"""
import argparse
import json

import h5py
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("layout", choices=["fixed", "varlen"])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--dtypes", choices=["ref", "chop"], default="ref")
    ap.add_argument("--width", type=int)
    ap.add_argument("--pred", type=int)
    ap.add_argument("--drop")
    ap.add_argument("--nsp-2d", action="store_true")
    a = ap.parse_args()
    recs = [json.loads(l) for l in open(a.src)]
    n = len(recs)
    L = a.width or len(recs[0]["input_ids"])
    P = a.pred or len(recs[0]["masked_lm_positions"])
    cols = {}
    if a.layout == "fixed":
        wide = "i4" if a.dtypes == "ref" else "i2"
        ids = np.zeros((n, L), wide)
        mask = np.zeros((n, L), "i1")
        seg = np.zeros((n, L), "i1")
        pos = np.zeros((n, P), wide)
        mid = np.zeros((n, P), wide)
        for i, r in enumerate(recs):
            s, m = r["seq_len"], r["num_masked"]
            ids[i, :s] = r["input_ids"][:s]
            mask[i, :s] = 1
            seg[i, :s] = r["segment_ids"][:s]
            pos[i, :m] = r["masked_lm_positions"][:m]
            mid[i, :m] = r["masked_lm_ids"][:m]
        cols = {"input_ids": ids, "input_mask": mask, "segment_ids": seg, "masked_lm_positions": pos,
                "masked_lm_ids": mid}
    nsp = np.array([r["next_sentence_labels"] for r in recs], "i1")
    cols["next_sentence_labels"] = nsp.reshape(n, 1) if a.nsp_2d else nsp
    with h5py.File(a.dst, "w") as f:
        for k, v in cols.items():
            if k != a.drop:
                f.create_dataset(k, data=v, dtype=v.dtype)
        if a.layout == "varlen":
            spec = [("input_ids", "int16", "seq_len", "input_ids"), ("segment_ids", "int8", "seq_len", "segment_ids"),
                    ("masked_lm_positions", "int16", "num_masked", "masked_lm_positions"),
                    ("masked_lm_ids", "int16", "num_masked", "masked_lm_ids")]
            for key, dt, lenkey, field in spec:
                if key == a.drop:
                    continue
                d = f.create_dataset(key, (n,), dtype=h5py.vlen_dtype(np.dtype(dt)))
                for i, r in enumerate(recs):
                    d[i] = np.array(r[field][:r[lenkey]], dt)


if __name__ == "__main__":
    main()
