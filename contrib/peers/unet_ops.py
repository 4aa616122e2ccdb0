#!/usr/bin/env python3
"""The 3D U-Net's ops in PyTorch, against trainkit's CPU references.

torch.nn.functional's conv3d, conv_transpose3d and instance_norm (+ relu), and a transcription of
MLPerf's DiceCELoss (mlcommons/training unet3d model/losses.py: softmax over the classes, one-hot
labels, Dice per sample and class without the background, smooth 1e-6 in the numerator and the
denominator, no squares; unweighted nn.CrossEntropyLoss; (dice loss + ce) / 2), all in float64
with autograd, on the same random inputs as build/tests/unit/test_unet_ops in its driver modes
(TK_UNET_OPS_DRIVE: kernels/conv3d_ref.c, kernels/instnorm_ref.c; TK_DICE_CE_DRIVE:
kernels/dice_ce_ref.c), in trainkit's layouts: activations channels last (NDHWC), Conv3d's weight
(K, C, T, R, S) as KTRSC, ConvTranspose3d's (Cin, Cout, T, R, S) as (Cin, T, R, S, Cout),
InstanceNorm3d(affine=True, eps=1e-5).

  unet_ops.py check DRIVER [--perturb]

One line per case, "NAME  ERRORS  ok" (or FAIL): convolutions and instance norm within 1e-5 of
torch (norm-wise relative); the loss and dice within 1e-6, its gradient within 1e-5 (1e-2 for bf16
logits); exit 0 when all pass, 1 when one fails, 2 when the driver fails. --perturb gives torch
the filters flipped in space, an eps of 1e-1 and the background in the Dice (wrong oracles the
check must catch; a 1x1x1 filter is its own flip).
"""
import subprocess
import sys

import torch
import torch.nn.functional as F

G = torch.Generator().manual_seed(29)


def rand(*shape):
    return (torch.rand(*shape, generator=G, dtype=torch.float64) * 2 - 1).float().double()


def cl(t):  # NCDHW -> NDHWC
    return t.permute(0, 2, 3, 4, 1).contiguous()


def run_driver(driver, env, text):
    r = subprocess.run([driver], input=text, capture_output=True, text=True, env=dict(env, PATH="/usr/bin:/bin"))
    if r.returncode != 0:
        sys.stderr.write(f"unet_ops.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    return r.stdout


def drive(driver, op, header, tensors):
    text = " ".join(str(v) for v in header) + "\n" + "\n".join(
        " ".join(f"{v:.9g}" for v in t.reshape(-1).tolist()) for t in tensors) + "\n"
    out, lines, i = {}, run_driver(driver, {"TK_UNET_OPS_DRIVE": op}, text).split("\n"), 0
    while i < len(lines) and lines[i]:
        name, n = lines[i].split()
        out[name] = torch.tensor([float(v) for v in lines[i + 1:i + 1 + int(n)]], dtype=torch.float64)
        i += 1 + int(n)
    return out


def conv_case(driver, perturb, N, D, H, W, C, K, k, stride, pad, transposed):
    x = rand(N, C, D, H, W).requires_grad_(True)
    if transposed:  # C = Cin, K = Cout
        w = rand(C, K, k, k, k).requires_grad_(True)
        y = F.conv_transpose3d(x, w.flip(2, 3, 4) if perturb else w, stride=stride, padding=pad)
        w_tk = w.permute(0, 2, 3, 4, 1)
    else:
        w = rand(K, C, k, k, k).requires_grad_(True)
        y = F.conv3d(x, w.flip(2, 3, 4) if perturb else w, stride=stride, padding=pad)
        w_tk = w.permute(0, 2, 3, 4, 1)
    dy = rand(*y.shape)
    y.backward(dy)
    got = drive(driver, "conv3d", [N, D, H, W, C, K, k, stride, pad, int(transposed)],
                [cl(x.detach()), w_tk.detach(), cl(dy)])
    want = {"out": cl(y.detach()), "din": cl(x.grad), "dw": w.grad.permute(0, 2, 3, 4, 1)}
    return {k: (((got[k] - v.reshape(-1)).norm() / v.norm()).item(), 1e-5) for k, v in want.items()}


def instnorm_case(driver, perturb, N, S, C, relu):
    x = (rand(N, C, S) * 2 + 0.5).requires_grad_(True)
    g, b = (rand(C) + 1.5).requires_grad_(True), rand(C).requires_grad_(True)
    y = F.instance_norm(x, weight=g, bias=b, eps=1e-1 if perturb else 1e-5)
    if relu:
        y = torch.relu(y)
    dy = rand(N, C, S)
    y.backward(dy)
    t = lambda v: v.permute(0, 2, 1).contiguous()  # (N, C, S) -> (N, S, C)
    got = drive(driver, "instnorm", [N, S, C, int(relu)], [t(x.detach()), g.detach(), b.detach(), t(dy)])
    want = {"y": t(y.detach()), "dx": t(x.grad), "dgamma": g.grad, "dbeta": b.grad}
    return {k: (((got[k] - v.reshape(-1)).norm() / v.norm()).item(), 1e-5) for k, v in want.items()}


def dice_oracle(z, y, include_background=False):
    """z (N, S, 3) float64 logits channels last, y (N, S) labels: loss, dice (N, 2 or 3), dloss/dz."""
    z = z.clone().requires_grad_(True)
    zc = z.permute(0, 2, 1)  # (N, C, S): the reference's NCDHW with the voxels flattened
    ce = F.cross_entropy(zc, y.long())
    p = torch.softmax(zc, dim=1)
    t = F.one_hot(y.long(), num_classes=3).permute(0, 2, 1).to(p.dtype)
    if not include_background:
        p, t = p[:, 1:], t[:, 1:]
    dice = (2.0 * (t * p).sum(dim=2) + 1e-6) / (t.sum(dim=2) + p.sum(dim=2) + 1e-6)
    loss = (torch.mean(1.0 - dice) + ce) / 2
    loss.backward()
    return loss.item(), dice.detach(), z.grad.detach()


def dice_case(driver, perturb, dtype, n, s, scale, probs):
    z = ((torch.rand(n, s, 3, generator=G, dtype=torch.float64) * 2 - 1) * scale).float()
    z = (z.to(torch.bfloat16) if dtype == "bf16" else z).double()
    y = torch.multinomial(torch.tensor(probs), n * s, replacement=True, generator=G).reshape(n, s)
    loss, dice, dz = dice_oracle(z, y, include_background=perturb)
    lines = [f"{n} {s}"] + [f"{a:.9g} {b:.9g} {c:.9g} {int(l)}" for (a, b, c), l in
                            zip(z.reshape(-1, 3).tolist(), y.reshape(-1).tolist())]
    out = run_driver(driver, {"TK_DICE_CE_DRIVE": dtype}, "\n".join(lines) + "\n").splitlines()
    got_dice = torch.tensor([float(v) for v in out[1].split()[1:]], dtype=torch.float64).reshape(n, 2)
    got_dz = torch.tensor([[float(v) for v in line.split()] for line in out[2:]], dtype=torch.float64)
    return {"loss": (abs(float(out[0].split()[1]) - loss) / max(1.0, abs(loss)), 1e-6),
            "dice": ((got_dice - dice).abs().max().item() if dice.shape == got_dice.shape else float("inf"), 1e-6),
            "dz": (((got_dz.reshape(n, s, 3) - dz).norm() / dz.norm()).item(), 1e-2 if dtype == "bf16" else 1e-5)}


def check(driver, perturb):
    cases = [("conv-3x3x3/1", lambda: conv_case(driver, perturb, 2, 5, 4, 6, 3, 4, 3, 1, 1, False)),
             ("conv-3x3x3/2", lambda: conv_case(driver, perturb, 2, 7, 6, 5, 4, 5, 3, 2, 1, False)),
             ("conv-1x1x1", lambda: conv_case(driver, perturb, 1, 3, 4, 5, 8, 3, 1, 1, 0, False)),
             ("convT-2x2x2/2", lambda: conv_case(driver, perturb, 2, 3, 2, 4, 4, 3, 2, 2, 0, True)),
             ("instnorm-relu", lambda: instnorm_case(driver, perturb, 2, 60, 5, True)),
             ("instnorm", lambda: instnorm_case(driver, perturb, 2, 27, 3, False)),
             ("dice-f32", lambda: dice_case(driver, perturb, "f32", 2, 120, 3.0, [0.6, 0.25, 0.15])),
             ("dice-no-tumor", lambda: dice_case(driver, perturb, "f32", 2, 64, 2.0, [0.7, 0.3, 0.0])),
             ("dice-1x343", lambda: dice_case(driver, perturb, "f32", 1, 343, 5.0, [0.5, 0.3, 0.2])),
             ("dice-bf16", lambda: dice_case(driver, perturb, "bf16", 2, 120, 3.0, [0.6, 0.25, 0.15]))]
    failed = False
    for name, run in cases:
        errs = run()
        ok = all(e <= tol for e, tol in errs.values())
        failed |= not ok
        print(f"{name:<14} " + "  ".join(f"{k} {e:.1e}" for k, (e, _) in errs.items()) + f"  {'ok' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        sys.stderr.write("usage: unet_ops.py check DRIVER [--perturb]\n")
        sys.exit(2)
    sys.exit(check(sys.argv[2], "--perturb" in sys.argv[3:]))
