#!/usr/bin/env python3
"""Trains a tiny BERT (masked LM + next sentence, PyTorch, CPU) on `prep bert` records of
`prep synth bert` text for a fixed time and prints its masked-LM accuracy on the eval records
beside the manifest's oracle and unigram accuracies: a check that the synthetic corpus is
learnable and a first point for calibrating the workload's target.

  bert_check_learnable.py TRAIN.tks EVAL.tks MANIFEST.json [--seconds 60 | --steps N] [--hidden 64]
                          [--layers 2] [--heads 2] [--batch 32] [--lr 2e-3] [--threads 1]
                          [--log-every K]
Reads the .tks files with tks_dump.py (an independent reader). Prints a JSON line every K steps
(accuracy on the first 2000 eval records) and one at the end (all eval records).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path):
    out = subprocess.run([sys.executable, os.path.join(HERE, "tks_dump.py"), path], stdout=subprocess.PIPE,
                         check=True).stdout.decode().splitlines()
    recs = [json.loads(l) for l in out]
    cols = {k: np.array([r[k] for r in recs]) for k in recs[0]}
    return {k: torch.from_numpy(v.astype(np.int64)) for k, v in cols.items()}


class TinyBert(nn.Module):
    def __init__(self, vocab, L, hidden, layers, heads):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(L, hidden)
        self.seg = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=False)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.mlm = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.nsp = nn.Linear(hidden, 2)

    def forward(self, ids, seg, n, pos):
        L = ids.shape[1]
        x = self.norm(self.tok(ids) + self.pos(torch.arange(L)) + self.seg(seg))
        pad = torch.arange(L)[None, :] >= n[:, None]
        h = self.enc(x, src_key_padding_mask=pad)
        g = torch.gather(h, 1, pos[:, :, None].expand(-1, -1, h.shape[2]))
        logits = self.mlm(g) @ self.tok.weight.T + self.bias
        return logits, self.nsp(h[:, 0])


def batches(d, idx):
    n = int(d["seq_len"][idx].max())
    m = max(1, int(d["num_masked"][idx].max()))
    return (d["input_ids"][idx, :n], d["segment_ids"][idx, :n], d["seq_len"][idx],
            d["masked_lm_positions"][idx, :m], d["masked_lm_ids"][idx, :m], d["num_masked"][idx],
            d["next_sentence_labels"][idx])


def evaluate(model, ev, E):
    model.eval()
    hits = total = nsp_hits = 0
    with torch.no_grad():
        for s in range(0, E, 256):
            idx = torch.arange(s, min(E, s + 256))
            ids, seg, n, pos, lab, nm, nsp = batches(ev, idx)
            logits, nsp_logits = model(ids, seg, n, pos)
            valid = torch.arange(pos.shape[1])[None, :] < nm[:, None]
            hits += int((logits.argmax(-1) == lab)[valid].sum())
            total += int(valid.sum())
            nsp_hits += int((nsp_logits.argmax(-1) == nsp).sum())
    model.train()
    return hits / total, nsp_hits / E


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("eval")
    ap.add_argument("manifest")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    man = json.load(open(a.manifest))
    tr, ev = load(a.train), load(a.eval)
    L = tr["input_ids"].shape[1]
    model = TinyBert(man["params"]["vocab_size"], L, a.hidden, a.layers, a.heads)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    N = tr["input_ids"].shape[0]
    t0, step, seen = time.time(), 0, 0
    gen = torch.Generator().manual_seed(1)
    while (a.steps and step < a.steps) or (not a.steps and time.time() - t0 < a.seconds):
        idx = torch.randint(0, N, (a.batch,), generator=gen)
        ids, seg, n, pos, lab, nm, nsp = batches(tr, idx)
        logits, nsp_logits = model(ids, seg, n, pos)
        valid = torch.arange(pos.shape[1])[None, :] < nm[:, None]
        loss = F.cross_entropy(logits[valid], lab[valid]) + F.cross_entropy(nsp_logits, nsp)
        warm = min(1.0, (step + 1) / 100)
        for g in opt.param_groups:
            g["lr"] = a.lr * warm
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        seen += a.batch
        if a.log_every and step % a.log_every == 0:
            mlm, ns = evaluate(model, ev, 2000)
            print(json.dumps({"type": "progress", "steps": step, "seconds": round(time.time() - t0, 1),
                              "mlm_accuracy": round(mlm, 4), "nsp_accuracy": round(ns, 4)}), flush=True)
    train_s = time.time() - t0
    mlm, ns = evaluate(model, ev, ev["input_ids"].shape[0])
    print(json.dumps({"type": "learnable", "steps": step, "examples_seen": seen, "train_seconds": round(train_s, 1),
                      "mlm_accuracy": round(mlm, 4), "nsp_accuracy": round(ns, 4),
                      "oracle_mlm_accuracy": man["oracle_mlm_accuracy"],
                      "unigram_mlm_accuracy": man["unigram_mlm_accuracy"],
                      "oracle_nsp_accuracy": man["oracle_nsp_accuracy"]}))


if __name__ == "__main__":
    main()
