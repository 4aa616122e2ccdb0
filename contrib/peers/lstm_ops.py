#!/usr/bin/env python3
"""torch.nn.LSTM on packed sequences, float64 with autograd, against trainkit's CPU reference.

The reference is MLPerf's rnn_speech_recognition/pytorch (common/rnn.py: torch.nn.LSTM with
dropout between its layers, fed pack_padded_sequence batches by rnnt/model.py). Same weights
(PyTorch's weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, gate order i, f, g, o),
the same padded time-major input with per-sequence lengths, initial states h0 and c0; the loss
sum(y dy) + sum(hn dhn) + sum(cn dcn) with the same dy, dhn and dcn the driver backpropagates,
so autograd's gradients are the ones trainkit's backward must give: y, hn, cn, dx, dh0, dc0 and
every weight and bias gradient. Without dropout one multi-layer torch.nn.LSTM runs (its own
layer stacking); with dropout, torch's generator cannot draw trainkit's Philox masks, so the
driver prints the masks and single-layer LSTMs are chained here with those masks between them
(and on the last layer's output: common/rnn.py's Dropout after its LSTM, trainkit's drop_last).

  lstm_ops.py check DRIVER [--perturb]

DRIVER is build/tests/unit/test_lstm, run with TK_LSTM_DRIVE=f32|bf16 (its header says the
format). Random shapes, lengths and values (seeded: the same every run); one line per case,
"NAME  ERROR  ok" (or FAIL), the largest norm-wise relative error over the outputs and
gradients: within 1e-5 for fp32, 1e-2 for bf16 (weights, x and dy rounded to bf16 on both
sides; trainkit also rounds h and the gates' gradient). Exit 0 when all pass, 1 when one fails,
2 when the driver fails. --perturb gives torch the gates in the order i, g, f, o and ignores the
lengths (padding fed as data): wrong oracles the check must catch.
"""
import subprocess
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

G = torch.Generator().manual_seed(41)
CASES = [  # name, type, L, T, B, I, H, p, last (drop_last: common/rnn.py's Dropout after the LSTM)
    ("f32 1 layer", "f32", 1, 4, 3, 3, 5, 0.0, 0),
    ("f32 2 layers", "f32", 2, 6, 4, 4, 6, 0.0, 0),
    ("f32 3 layers dropout", "f32", 3, 5, 3, 5, 7, 0.3, 0),
    ("f32 2 layers dropout after the last", "f32", 2, 5, 3, 4, 6, 0.3, 1),
    ("bf16 2 layers dropout", "bf16", 2, 6, 3, 8, 16, 0.3, 1),
]


def rand(*shape, a=1.0):
    return (torch.rand(*shape, generator=G, dtype=torch.float64) * 2 - 1) * a


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float64)


def run_driver(driver, dtype, text):
    r = subprocess.run([driver], input=text, capture_output=True, text=True,
                       env={"TK_LSTM_DRIVE": dtype, "PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        sys.stderr.write(f"lstm_ops.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    out, masks, lines, i = {}, [], r.stdout.split("\n"), 0
    while i < len(lines) and lines[i]:
        name, n = lines[i].split()
        vals = torch.tensor([float(v) for v in lines[i + 1:i + 1 + int(n)]], dtype=torch.float64)
        if name == "mask":
            masks.append(vals)
        else:
            out.setdefault(name, []).append(vals)
        i += 1 + int(n)
    return out, masks


def reorder(w, H):  # the perturbation: gate blocks i, f, g, o given as i, g, f, o
    return torch.cat([w[:H], w[2 * H:3 * H], w[H:2 * H], w[3 * H:]])


def torch_side(L, T, B, I, H, lens, params, x, h0, c0, masks, perturb):
    """Forward with autograd; returns the leaves (params, x, h0, c0) and y, hn, cn."""
    leaves = [t.clone().requires_grad_(True) for t in params + [x, h0, c0]]
    ps, x, h0, c0 = leaves[:4 * L], leaves[4 * L], leaves[4 * L + 1], leaves[4 * L + 2]
    lens_t = torch.tensor([T] * B if perturb else lens)

    def lstm_of(layers, in_size):
        m = torch.nn.LSTM(in_size, H, num_layers=len(layers)).double()
        for k, (wi, wh, bi, bh) in enumerate(layers):  # the leaves themselves, so grads reach them
            for nm, v in (("weight_ih", wi), ("weight_hh", wh), ("bias_ih", bi), ("bias_hh", bh)):
                delattr(m, f"{nm}_l{k}")
                setattr(m, f"{nm}_l{k}", reorder(v, H) if perturb else v)
        m._flat_weights = [getattr(m, n) for n in m._flat_weights_names]
        return m

    def run(m, inp, h, c):
        packed = pack_padded_sequence(inp, lens_t, enforce_sorted=False)
        out, (hn, cn) = m(packed, (h, c))
        y, _ = pad_packed_sequence(out, total_length=T)
        return y, hn, cn

    layers = [tuple(ps[4 * k:4 * k + 4]) for k in range(L)]
    if not masks:
        y, hn, cn = run(lstm_of(layers, I), x, h0, c0)
    else:
        inp, hs, cs = x, [], []
        for k in range(L):
            y, hk, ck = run(lstm_of([layers[k]], I if k == 0 else H), inp, h0[k:k + 1], c0[k:k + 1])
            hs.append(hk), cs.append(ck)
            if k < len(masks):  # between layers, and after the last with drop_last
                y = y * masks[k].reshape(T, B, H)
            inp = y
        hn, cn = torch.cat(hs), torch.cat(cs)
    return leaves, y, hn, cn


def relerr(a, b):
    d = torch.linalg.norm(b)
    return float(torch.linalg.norm(a - b) / (d if d > 0 else 1))


def check_case(driver, name, dtype, L, T, B, I, H, p, last, perturb):
    lens = [T] + [int(torch.randint(1, T + 1, (1,), generator=G)) for _ in range(B - 1)]
    a = H ** -0.5
    params = []
    for k in range(L):
        ik = I if k == 0 else H
        params += [rand(4 * H, ik, a=a), rand(4 * H, H, a=a), rand(4 * H, a=a), rand(4 * H, a=a)]
    x, h0, c0 = rand(T, B, I), rand(L, B, H, a=0.5), rand(L, B, H)
    dy, dhn, dcn = rand(T, B, H), rand(L, B, H), rand(L, B, H)
    seed, step = int(torch.randint(1, 1 << 30, (1,), generator=G)), 7
    text = [f"{L} {T} {B} {I} {H} {p} {last} {seed} {step}", " ".join(map(str, lens))]
    for t in params + [x, h0, c0, dy, dhn, dcn]:
        text.append("\n".join(f"{v:.17g}" for v in t.flatten().tolist()))
    got, masks = run_driver(driver, dtype, "\n".join(text) + "\n")
    if dtype == "bf16":  # the tensors trainkit reads in bf16
        for k in range(L):
            params[4 * k], params[4 * k + 1] = bf16(params[4 * k]), bf16(params[4 * k + 1])
        x, dy = bf16(x), bf16(dy)
    leaves, y, hn, cn = torch_side(L, T, B, I, H, lens, params, x, h0, c0, masks, perturb)
    loss = (y * dy).sum() + (hn * dhn).sum() + (cn * dcn).sum()
    loss.backward()
    pairs = [(got["y"][0], y.detach()), (got["hn"][0], hn.detach()), (got["cn"][0], cn.detach()),
             (got["dx"][0], leaves[4 * L].grad), (got["dh0"][0], leaves[4 * L + 1].grad),
             (got["dc0"][0], leaves[4 * L + 2].grad)]
    for k in range(L):
        for q, nm in enumerate(("dw_ih", "dw_hh", "db_ih", "db_hh")):
            pairs.append((got[nm][k], leaves[4 * k + q].grad))
    err = max(relerr(g, r.flatten()) for g, r in pairs)
    ok = err <= (1e-2 if dtype == "bf16" else 1e-5)
    print(f"{name}  {err:.2e}  {'ok' if ok else 'FAIL'}")
    return ok


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "check" or sys.argv[3:] not in ([], ["--perturb"]):
        sys.stderr.write("usage: lstm_ops.py check DRIVER [--perturb]\n")
        sys.exit(2)
    perturb = sys.argv[3:] == ["--perturb"]
    ok = all([check_case(sys.argv[2], *c, perturb) for c in CASES])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
