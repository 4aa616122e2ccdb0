#!/usr/bin/env python3
"""Is the synthetic Criteo data learnable? Train a small DLRM-like model for one pass over days
0..2 of `prep synth criteo` output and print its AUC on day 3 (and the manifest's best_auc).

Reads the raw TSV itself (Python's csv and int(x, 16)), so it checks the data, not our parser:
  python3 contrib/synth/check_learnable.py DIR [--target 0.81]
Exit status 0 when the eval AUC reaches --target, 1 otherwise.
Model: per-feature embeddings (dim 16) of int(x,16) % min(vocab + 1, 2^18) (or % --max-ind-range;
0 = empty), bottom MLP
13-64-16 on log(1+max(x,0)), dot interactions of the 27 vectors, top MLP 367-128-64-1, BCE,
Adagrad (lr 0.05), batch 256, one pass.
"""
import argparse
import csv
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn


def open_text(path):
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rt", newline="")
    if magic == b"\x28\xb5\x2f\xfd":
        sys.exit("check_learnable.py: zstd input needs `zstd -d` first")
    return open(path, "r", newline="")


def load_day(path, sizes):
    labels, dense, cat = [], [], []
    with open_text(path) as f:
        for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            assert len(row) == 40, (path, len(row))
            labels.append(int(row[0]))
            dense.append([max(int(x), 0) if x else 0 for x in row[1:14]])
            cat.append([int(x, 16) % sizes[i] if x else 0 for i, x in enumerate(row[14:])])
    return (np.array(labels, np.float32), np.log1p(np.array(dense, np.float32)),
            np.array(cat, np.int64))


def auc(score, y):
    order = np.argsort(score, kind="mergesort")
    s, yy = score[order], y[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        ranks[i:j] = (i + 1 + j) / 2.0
        i = j
    pos = yy.sum()
    neg = len(yy) - pos
    return (ranks[yy == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)


class DLRM(nn.Module):
    def __init__(self, sizes, dim=16):
        super().__init__()
        self.emb = nn.ModuleList(nn.Embedding(n, dim, sparse=True) for n in sizes)
        for e in self.emb:
            nn.init.uniform_(e.weight, -0.05, 0.05)
        self.bot = nn.Sequential(nn.Linear(13, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        n = 27
        self.tri = torch.tril_indices(n, n, -1)
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 128), nn.ReLU(),
                                 nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense, cat):
        x = self.bot(dense)
        v = torch.stack([x] + [e(cat[:, i]) for i, e in enumerate(self.emb)], dim=1)
        z = torch.bmm(v, v.transpose(1, 2))[:, self.tri[0], self.tri[1]]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--target", type=float, default=0.81)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--max-ind-range", type=int, default=0,
                    help="hash every feature with %% N, as `prep criteo --max-ind-range N` does")
    a = ap.parse_args()
    man = json.load(open(os.path.join(a.dir, "manifest.json")))
    sizes = [a.max_ind_range if a.max_ind_range else min(v + 1, 1 << 18) for v in man["vocab_sizes"]]
    torch.manual_seed(0)
    t0 = time.time()
    days = [load_day(os.path.join(a.dir, f), sizes) for f in man["files"][:4]]
    t_load = time.time() - t0
    y = np.concatenate([d[0] for d in days[:3]])
    xd = np.concatenate([d[1] for d in days[:3]])
    xc = np.concatenate([d[2] for d in days[:3]])
    model = DLRM(sizes)
    dense_params = [p for n, p in model.named_parameters() if not n.startswith("emb")]
    opt_d = torch.optim.Adagrad(dense_params, lr=a.lr)
    opt_s = torch.optim.Adagrad(list(model.emb.parameters()), lr=a.lr)
    lossf = nn.BCEWithLogitsLoss()
    t1 = time.time()
    yt, xdt, xct = torch.from_numpy(y), torch.from_numpy(xd), torch.from_numpy(xc)
    for i in range(0, len(y), a.batch):
        out = model(xdt[i:i + a.batch], xct[i:i + a.batch])
        loss = lossf(out, yt[i:i + a.batch])
        opt_d.zero_grad()
        opt_s.zero_grad()
        loss.backward()
        opt_d.step()
        opt_s.step()
    t_train = time.time() - t1
    ye, xde, xce = days[3]
    with torch.no_grad():
        score = torch.cat([model(torch.from_numpy(xde[i:i + 8192]), torch.from_numpy(xce[i:i + 8192]))
                           for i in range(0, len(ye), 8192)]).numpy()
    got = auc(score.astype(np.float64), ye)
    print(json.dumps({"type": "learnable", "train_rows": int(len(y)), "eval_rows": int(len(ye)),
                      "eval_auc": round(float(got), 5), "best_auc": round(man["best_auc"], 5),
                      "target": a.target, "load_s": round(t_load, 1), "train_s": round(t_train, 1)}))
    return 0 if got >= a.target else 1


if __name__ == "__main__":
    sys.exit(main())
