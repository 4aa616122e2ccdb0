#!/usr/bin/env python3
"""The MLPerf v1 DLRM in idiomatic PyTorch, as the SPEED peer of trainkit's train-step.

  dlrm_perf.py --mode eager|compile [options]

Times whole training steps (forward, BCE loss, backward, SGD) and prints one JSON line
{"type":"bench","impl":"torch-eager"|"torch-compile",...,"samples_per_s":...}.

The model is the one train-step trains (share/workloads/dlrm/config.json): log(x+1) of 13 dense
counts -> bottom MLP 13-512-256-128 (ReLU on every layer); 26 embedding lookups of dim 128 from
tables of the Criteo-1TB cardinalities capped at --rows-cap rows; the dot interaction of the 27
vectors (the 351 pairs of the strictly lower triangle, row-major as the MLPerf reference) after
the bottom output (128 + 351 = 479 features) zero-padded to --interaction-width (480 as NVIDIA's
reference pads, so the top MLP's first GEMM has an aligned K); top MLP 1024-1024-512-256-1
(ReLU on all but the last); binary cross-entropy with logits; plain SGD.

How the peer runs (chosen to be the fastest idiomatic PyTorch, not a strawman):
  - embeddings: nn.EmbeddingBag(mode="sum", sparse=True), one bag of one id per (sample, table);
    --emb fused (default) is ONE table of all rows with per-table row offsets (one lookup kernel,
    one sparse gradient), --emb per-table is one EmbeddingBag per table as the MLPerf reference;
    fp32 weights, updated by torch.optim.SGD from their sparse gradients (no dense gradient).
  - MLPs and interaction under torch.autocast(bf16); dense parameters fp32 (master weights),
    updated by torch.optim.SGD(fused=True) on CUDA.
  - --mode compile: torch.compile of the whole loss function, embedding lookup included
    (--compile-scope all, the default; the sparse embedding backward then goes through
    AOTAutograd too), or of the dense part only (--compile-scope dense: bottom MLP, interaction,
    top MLP, loss; the lookup and its sparse backward stay eager), for PyTorch versions or
    devices where the first fails.
    --compile-mode picks torch.compile's mode (default, max-autotune-no-cudagraphs, ...).
    Compilation happens in the first warm-up steps; its time is reported as compile_s and is
    excluded from the throughput.
  - inputs: --nbatches synthetic batches generated ON THE DEVICE before timing and cycled, so the
    input pipeline (reading, decompressing, copying to the device) costs the peer nothing.
    Categorical ids are Zipf(--zipf) ranks over a vocabulary of --vocab values, hashed and folded
    into each table (as prep synth criteo's data are skewed), or uniform with --ids uniform.
  - timing: --warmup steps, then --iters steps with a CUDA event around each one and no host
    synchronization in between; samples_per_s = batch * iters / (time from the first step's start
    event to the last step's end event); ms_per_iter_median is the median per-step time.

--device cpu with a tiny shape (e.g. --batch 64 --rows-cap 100 --emb-dim 8 --bot 16,8
--top 16,1) runs anywhere; it is for tests of this script, not a benchmark.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Criteo Terabyte per-feature cardinalities with max_ind_range 40M (share/workloads/dlrm/config.json).
CRITEO_1TB_ROWS = [39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346,
                   10, 2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36]


def ints(s):
    try:
        v = [int(x) for x in s.split(",") if x != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{s}'")
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got '{s}'")
    return v


def positive(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{s}'")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{s}'")
    return v


def mlp(widths, relu_last):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths) or relu_last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Dense(nn.Module):
    """Everything but the embedding lookup: bottom MLP, dot interaction, top MLP, loss."""

    def __init__(self, num_dense, emb_dim, bot, top, num_tables, width):
        super().__init__()
        self.bot = mlp([num_dense] + bot, relu_last=True)
        self.top = mlp([width] + top, relu_last=False)
        n = num_tables + 1
        li = [i for i in range(n) for j in range(i)]
        lj = [j for i in range(n) for j in range(i)]
        # Flat (row-major) positions of the strictly lower triangle of the (n, n) Gram matrix.
        self.register_buffer("tril", torch.tensor([i * n + j for i, j in zip(li, lj)]), persistent=False)
        self.pad = width - (emb_dim + len(li))

    def forward(self, dense, emb, label):
        x = self.bot(torch.log1p(dense))                     # (B, D)
        t = torch.cat([x.unsqueeze(1), emb.to(x.dtype)], 1)  # (B, 27, D)
        z = torch.bmm(t, t.transpose(1, 2)).flatten(1)       # (B, 27 * 27)
        r = torch.cat([x, z[:, self.tril]], 1)               # (B, D + 351)
        if self.pad > 0:
            r = F.pad(r, (0, self.pad))
        logit = self.top(r).squeeze(1).float()
        return F.binary_cross_entropy_with_logits(logit, label)


class Embeddings(nn.Module):
    def __init__(self, rows, emb_dim, layout):
        super().__init__()
        self.layout = layout
        self.rows = rows
        if layout == "fused":
            self.bag = nn.EmbeddingBag(sum(rows), emb_dim, mode="sum", sparse=True)
            base = [0]
            for r in rows[:-1]:
                base.append(base[-1] + r)
            self.register_buffer("base", torch.tensor(base, dtype=torch.int64), persistent=False)
        else:
            self.bags = nn.ModuleList(nn.EmbeddingBag(r, emb_dim, mode="sum", sparse=True) for r in rows)
        # MLPerf reference initialization: U(-sqrt(1/rows), sqrt(1/rows)) per table.
        with torch.no_grad():
            off = 0
            for t, r in enumerate(rows):
                a = math.sqrt(1.0 / r)
                w = self.bag.weight[off:off + r] if layout == "fused" else self.bags[t].weight
                w.uniform_(-a, a)
                off += r

    def forward(self, cat):  # cat (B, T) int64 ids in [0, rows[t]) -> (B, T, D)
        B, T = cat.shape
        if self.layout == "fused":
            # A 2-D input is B*T bags of one id each: no offsets tensor needed.
            return self.bag((cat + self.base).reshape(-1, 1)).view(B, T, -1)
        return torch.stack([self.bags[t](cat[:, t:t + 1]) for t in range(T)], 1)


def make_ids(gen, B, rows, dist, zipf_s, vocab, device):
    T = len(rows)
    rows_t = torch.tensor(rows, dtype=torch.int64, device=device)
    if dist == "uniform":
        u = torch.rand(B, T, generator=gen, device=device, dtype=torch.float64)
        return torch.minimum((u * rows_t).long(), rows_t - 1)
    # Zipf(s) rank by inverting the continuous power-law CDF on [1, vocab + 1).
    u = torch.rand(B, T, generator=gen, device=device, dtype=torch.float64)
    a = 1.0 - zipf_s
    rank = ((((vocab + 1.0) ** a - 1.0) * u + 1.0) ** (1.0 / a)).long() - 1
    # A keyed multiplicative hash of the rank (Knuth's constant, the table number as the key)
    # scatters the hot ranks over the table, as hashing raw values does in Criteo.
    key = torch.arange(T, device=device, dtype=torch.int64) * 0x9E3779B1
    h = ((rank.clamp(0, vocab - 1) + key) * 2654435761) & 0x7FFFFFFF
    return h % rows_t


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["eager", "compile"], required=True)
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile mode: default, max-autotune-no-cudagraphs, ... (default: default)")
    ap.add_argument("--compile-scope", choices=["all", "dense"], default="all")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    ap.add_argument("--batch", type=positive, default=65536)
    ap.add_argument("--rows-cap", type=positive, default=4000000,
                    help="rows per table at most (default 4000000)")
    ap.add_argument("--table-rows", type=ints, default=None,
                    help="table sizes before the cap (default: the 26 Criteo-1TB cardinalities)")
    ap.add_argument("--emb-dim", type=positive, default=128)
    ap.add_argument("--bot", type=ints, default=[512, 256, 128], help="bottom MLP widths")
    ap.add_argument("--top", type=ints, default=[1024, 1024, 512, 256, 1], help="top MLP widths")
    ap.add_argument("--interaction-width", type=positive, default=480)
    ap.add_argument("--emb", choices=["fused", "per-table"], default="fused")
    ap.add_argument("--amp", choices=["bf16", "none"], default="bf16")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--ids", choices=["zipf", "uniform"], default="zipf")
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent (> 1, default 1.1)")
    ap.add_argument("--vocab", type=positive, default=10000000)
    ap.add_argument("--nbatches", type=positive, default=4)
    ap.add_argument("--warmup", type=positive, default=10)
    ap.add_argument("--iters", type=positive, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=positive, default=None, help="CPU threads (torch.set_num_threads)")
    a = ap.parse_args(argv)

    if a.bot[-1] != a.emb_dim:
        ap.error(f"the bottom MLP's last width ({a.bot[-1]}) must equal --emb-dim ({a.emb_dim})")
    if a.top[-1] != 1:
        ap.error("the top MLP's last width must be 1")
    if a.zipf <= 1.0:
        ap.error("--zipf must be > 1")
    rows = [min(r, a.rows_cap) for r in (a.table_rows or CRITEO_1TB_ROWS)]
    T = len(rows)
    need = a.emb_dim + T * (T + 1) // 2
    if a.interaction_width < need:
        ap.error(f"--interaction-width {a.interaction_width} < {need} (D + (T+1)T/2)")
    try:
        device = torch.device(a.device)
    except RuntimeError as ex:
        ap.error(f"--device: {ex}")
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.stderr.write("dlrm_perf.py: error: no CUDA device (torch.cuda.is_available() is False); "
                         "use --device cpu for a functional run\n")
        return 5
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    emb = Embeddings(rows, a.emb_dim, a.emb).to(device)
    dense = Dense(13, a.emb_dim, a.bot, a.top, T, a.interaction_width).to(device)
    cuda = device.type == "cuda"
    opt_dense = torch.optim.SGD(dense.parameters(), lr=a.lr, fused=cuda)
    opt_sparse = torch.optim.SGD(emb.parameters(), lr=a.lr)

    gen = torch.Generator(device=device)
    gen.manual_seed(a.seed)
    batches = []
    for _ in range(a.nbatches):
        d = torch.randint(0, 1000, (a.batch, 13), generator=gen, device=device).float()
        c = make_ids(gen, a.batch, rows, a.ids, a.zipf, a.vocab, device)
        y = (torch.rand(a.batch, generator=gen, device=device) < 0.25).float()
        batches.append((d, c, y))

    amp = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=a.amp == "bf16")

    def loss_of(d, c, y):
        with amp:
            return dense(d, emb(c), y)

    if a.mode == "compile":
        opts = {} if a.compile_mode == "default" else {"mode": a.compile_mode}
        if a.compile_scope == "all":
            loss_fn = torch.compile(loss_of, **opts)
        else:
            cdense = torch.compile(dense, **opts)

            def loss_fn(d, c, y):
                with amp:
                    return cdense(d, emb(c), y)
    else:
        loss_fn = loss_of

    def step(i):
        d, c, y = batches[i % len(batches)]
        loss = loss_fn(d, c, y)
        loss.backward()
        opt_dense.step()
        opt_sparse.step()
        opt_dense.zero_grad(set_to_none=True)
        opt_sparse.zero_grad(set_to_none=True)
        return loss

    # Warm-up; with compile the first step compiles (forward and backward graphs).
    t0 = time.perf_counter()
    step(0)
    sync(device)
    first_s = time.perf_counter() - t0
    for i in range(1, a.warmup):
        step(i)
    sync(device)

    n = a.iters
    loss = None
    if cuda:
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        ev[0].record()
        for i in range(n):
            loss = step(i)
            ev[i + 1].record()
        torch.cuda.synchronize()
        ms = [ev[i].elapsed_time(ev[i + 1]) for i in range(n)]
        total_s = ev[0].elapsed_time(ev[n]) / 1e3
    else:
        ts = [time.perf_counter()]
        for i in range(n):
            loss = step(i)
            ts.append(time.perf_counter())
        ms = [(ts[i + 1] - ts[i]) * 1e3 for i in range(n)]
        total_s = ts[-1] - ts[0]
    lossv = float(loss.detach().float().item())
    out = {
        "type": "bench",
        "impl": "torch-" + a.mode,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
        "batch": a.batch,
        "rows_cap": a.rows_cap,
        "rows_total": sum(rows),
        "tables": T,
        "emb_dim": a.emb_dim,
        "bot": a.bot,
        "top": a.top,
        "interaction_width": a.interaction_width,
        "emb": a.emb,
        "amp": a.amp,
        "ids": a.ids if a.ids == "uniform" else f"zipf({a.zipf}) over {a.vocab}",
        "compile_mode": a.compile_mode if a.mode == "compile" else None,
        "compile_scope": a.compile_scope if a.mode == "compile" else None,
        # The first step: compilation (compile mode) plus one step, or one cold step (eager).
        "compile_s": round(first_s, 3) if a.mode == "compile" else None,
        "first_step_s": round(first_s, 3),
        "warmup": a.warmup,
        "iters": n,
        "ms_per_iter_median": round(statistics.median(ms), 4),
        "ms_per_iter_min": round(min(ms), 4),
        "samples_per_s": round(a.batch * n / total_s, 1),
        "loss": lossv,
        "peak_mem_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda else None,
        "input": "synthetic batches pre-generated on the device; input pipeline excluded",
    }
    print(json.dumps(out), flush=True)
    if not math.isfinite(lossv):
        sys.stderr.write(f"dlrm_perf.py: error: loss is {lossv}\n")
        return 6
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
