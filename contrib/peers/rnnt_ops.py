#!/usr/bin/env python3
"""The RNN-T loss in PyTorch, float64 with autograd, against trainkit's CPU reference.

The reference is MLPerf's rnn_speech_recognition/pytorch (rnnt/loss.py: warp-transducer's
RNNTLoss(blank=blank_idx) with its default reduction "mean", the sum of the per-utterance
negative log-likelihoods divided by the batch size; train.py: blank_idx = tokenizer.num_labels,
the last of the V = num_labels + 1 logits). torchaudio.functional.rnnt_loss computes the same
loss, but torchaudio is not installed beside this torch, so this file transcribes the lattice
recursion itself: per cell (t, u) of each utterance's T x (U + 1) lattice lp = log_softmax(z),
alpha(0, 0) = 0, alpha(t, u) = logsumexp(alpha(t-1, u) + lp_blank(t-1, u),
alpha(t, u-1) + lp_{y_{u-1}}(t, u-1)), log P(y|x) = alpha(T-1, U) + lp_blank(T-1, U) (the forward
variables; trainkit's reference returns beta(0, 0) and writes its gradient from alpha and beta in
closed form, so autograd here is an independent check of that formula).

  rnnt_ops.py check DRIVER [--perturb]

DRIVER is build/tests/unit/test_rnnt, run with TK_RNNT_DRIVE=f32|bf16 (its header says the
format). Random shapes, lengths, labels and logits (seeded: the same every run), packed and padded
rows; one line per case, "NAME  ERRORS  ok" (or FAIL): loss and costs within 1e-6 (relative),
the gradient within 1e-6 norm-wise for fp32 logits (1e-2 for bf16, whose dz is rounded to bf16);
exit 0 when all pass, 1 when one fails, 2 when the driver fails. --perturb gives torch the blank
at index 0 and the loss divided by the target lengths (the docstring's reading of "mean"): wrong
oracles the check must catch.
"""
import math
import subprocess
import sys

import torch

G = torch.Generator().manual_seed(31)


def randint(lo, hi):  # in [lo, hi]
    return int(torch.randint(lo, hi + 1, (1,), generator=G))


def run_driver(driver, dtype, text):
    r = subprocess.run([driver], input=text, capture_output=True, text=True,
                       env={"TK_RNNT_DRIVE": dtype, "PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        sys.stderr.write(f"rnnt_ops.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    lines = r.stdout.split("\n")
    loss = float(lines[0].split()[1])
    costs = [float(v) for v in lines[1].split()[1:]]
    n = int(lines[2].split()[1])
    dz = torch.tensor([float(v) for v in lines[3:3 + n]], dtype=torch.float64)
    return loss, torch.tensor(costs, dtype=torch.float64), dz


def nll(lp, y, blank):
    """-log P(y|x) of one utterance from its log-probabilities lp (T, U + 1, V)."""
    T, W = lp.shape[0], lp.shape[1]
    a = [[None] * W for _ in range(T)]
    for t in range(T):
        for u in range(W):
            if t == 0 and u == 0:
                a[t][u] = lp.new_zeros(())
                continue
            terms = []
            if t > 0:
                terms.append(a[t - 1][u] + lp[t - 1, u, blank])
            if u > 0:
                terms.append(a[t][u - 1] + lp[t, u - 1, y[u - 1]])
            a[t][u] = torch.logsumexp(torch.stack(terms), 0)
    return -(a[T - 1][W - 1] + lp[T - 1, W - 1, blank])


def relerr(got, ref):
    den = ref.norm()
    return float((got - ref).norm() / (den if den > 0 else 1))


def case(driver, perturb, dtype, B, Tmax, Umax, V, packed):
    T = [Tmax] + [randint(1, Tmax) for _ in range(B - 1)]
    U = [Umax] + [randint(0, Umax) for _ in range(B - 1)]
    blank = V - 1
    y = [[randint(0, V - 2) for _ in range(U[b])] for b in range(B)]
    starts, rows = [], 0
    for b in range(B):
        starts.append(rows)
        rows += T[b] * (U[b] + 1) if packed else Tmax * (Umax + 1)
    z = (torch.rand(rows, V, generator=G, dtype=torch.float64) * 12 - 6).float()
    if dtype == "bf16":
        z = z.bfloat16()
    z = z.double()
    scale = 1.0 / B
    text = f"{B} {V} {blank} {packed} {scale:.9g}\n" + "".join(
        f"{T[b]} {U[b]}" + "".join(f" {v}" for v in y[b]) + "\n" for b in range(B)) + "\n".join(
        " ".join(f"{v:.9g}" for v in row) for row in z.tolist()) + "\n"
    loss, costs, dz = run_driver(driver, dtype, text)

    zt = z.clone().requires_grad_(True)
    per = []
    for b in range(B):
        ld = U[b] + 1 if packed else Umax + 1
        idx = torch.tensor([starts[b] + t * ld + u for t in range(T[b]) for u in range(U[b] + 1)])
        lp = torch.log_softmax(zt[idx].view(T[b], U[b] + 1, V), -1)
        n = nll(lp, y[b], 0 if perturb else blank)
        per.append(n / max(U[b], 1) if perturb else n)
    per = torch.stack(per)
    total = per.sum() * scale
    total.backward()
    total = float(total.detach())
    ref_dz = zt.grad.reshape(-1)

    e_loss = abs(loss - total) / abs(total)
    e_costs = relerr(costs, per.detach())
    e_dz = relerr(dz, ref_dz)
    tol_dz = 1e-2 if dtype == "bf16" else 1e-6
    ok = e_loss <= 1e-6 and e_costs <= 1e-6 and e_dz <= tol_dz
    name = f"{dtype}-B{B}-T{Tmax}-U{Umax}-V{V}-{'packed' if packed else 'padded'}"
    print(f"{name}  loss {e_loss:.1e} costs {e_costs:.1e} dz {e_dz:.1e}  {'ok' if ok else 'FAIL'}")
    return ok


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        sys.stderr.write("usage: rnnt_ops.py check DRIVER [--perturb]\n")
        return 2
    driver, perturb = sys.argv[2], "--perturb" in sys.argv[3:]
    ok = True
    # (dtype, B, Tmax, Umax, V, packed): MLPerf's blank last; vocabularies of 29 (characters) and
    # 1024 (MLPerf's sentencepiece units); an utterance without labels; random extents
    shapes = [("f32", 3, 6, 3, 29, 1), ("f32", 3, 6, 3, 29, 0), ("f32", 2, 4, 2, 1024, 1),
              ("f32", 4, 5, 0, 7, 1), ("bf16", 3, 5, 4, 29, 1), ("bf16", 2, 4, 3, 64, 0)]
    for _ in range(4):
        shapes.append(("f32", randint(1, 5), randint(1, 8), randint(1, 5), randint(2, 40), randint(0, 1)))
    for s in shapes:
        ok = case(driver, perturb, *s) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
