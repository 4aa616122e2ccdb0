#!/usr/bin/env python3
"""The 3D U-Net's Dice + cross-entropy loss in PyTorch, against trainkit's CPU reference.

Transcribes MLPerf's DiceCELoss (mlcommons/training unet3d model/losses.py: softmax over the
classes, one-hot labels, Dice per sample and class without the background, smooth 1e-6 in the
numerator and the denominator, no squares; unweighted nn.CrossEntropyLoss; (dice loss + ce) / 2)
in float64 with autograd, and compares its loss, dice and gradient with what
build/tests/unit/test_unet_ops prints in its TK_DICE_CE_DRIVE mode (kernels/dice_ce_ref.c) on the
same random logits and labels.

  unet_loss.py check DRIVER [--perturb]

One line per case, "NAME  loss err E  dice err E  dz err E  ok" (or FAIL); exit 0 when all pass,
1 when one fails, 2 when the driver fails. --perturb includes the background class in the
oracle's Dice (a wrong reference the check must catch).
"""
import subprocess
import sys

import torch


def oracle(z, y, include_background=False):
    """z (N, S, 3) float64 logits channels last, y (N, S) labels: loss, dice (N, 2 or 3), dloss/dz."""
    z = z.clone().requires_grad_(True)
    zc = z.permute(0, 2, 1)  # (N, C, S): the reference's NCDHW with the voxels flattened
    ce = torch.nn.functional.cross_entropy(zc, y.long())
    p = torch.softmax(zc, dim=1)
    t = torch.nn.functional.one_hot(y.long(), num_classes=3).permute(0, 2, 1).to(p.dtype)
    if not include_background:
        p, t = p[:, 1:], t[:, 1:]
    inter = (t * p).sum(dim=2)
    dice = (2.0 * inter + 1e-6) / (t.sum(dim=2) + p.sum(dim=2) + 1e-6)
    loss = (torch.mean(1.0 - dice) + ce) / 2
    loss.backward()
    return loss.item(), dice.detach(), z.grad.detach()


def run_driver(driver, dtype, z, y):
    n, s, _ = z.shape
    lines = [f"{n} {s}"]
    for i in range(n):
        for j in range(s):
            a, b, c = (float(v) for v in z[i, j])
            lines.append(f"{a:.9g} {b:.9g} {c:.9g} {int(y[i, j])}")
    r = subprocess.run([driver], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       env={"TK_DICE_CE_DRIVE": dtype, "PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        sys.stderr.write(f"unet_loss.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    out = r.stdout.splitlines()
    loss = float(out[0].split()[1])
    dice = torch.tensor([float(v) for v in out[1].split()[1:]], dtype=torch.float64).reshape(n, 2)
    dz = torch.tensor([[float(v) for v in line.split()] for line in out[2:]], dtype=torch.float64)
    return loss, dice, dz.reshape(n, s, 3)


def cases():
    g = torch.Generator().manual_seed(29)
    # (name, dtype, N, S, logit scale, label probabilities)
    specs = [("f32-2x120", "f32", 2, 120, 3.0, [0.6, 0.25, 0.15]),
             ("f32-no-tumor", "f32", 2, 64, 2.0, [0.7, 0.3, 0.0]),
             ("f32-1x343", "f32", 1, 343, 5.0, [0.5, 0.3, 0.2]),
             ("bf16-2x120", "bf16", 2, 120, 3.0, [0.6, 0.25, 0.15])]
    for name, dtype, n, s, scale, probs in specs:
        z = (torch.rand(n, s, 3, generator=g, dtype=torch.float64) * 2 - 1) * scale
        z = z.to(torch.float32)
        if dtype == "bf16":
            z = z.to(torch.bfloat16)
        y = torch.multinomial(torch.tensor(probs), n * s, replacement=True, generator=g).reshape(n, s)
        yield name, dtype, z.to(torch.float64), y


def check(driver, perturb):
    failed = False
    for name, dtype, z, y in cases():
        loss, dice, dz = oracle(z, y, include_background=perturb)
        got_loss, got_dice, got_dz = run_driver(driver, dtype, z, y)
        le = abs(got_loss - loss) / max(1.0, abs(loss))
        de = (got_dice - dice).abs().max().item() if dice.shape == got_dice.shape else float("inf")
        ze = ((got_dz - dz).norm() / dz.norm()).item()
        ok = le <= 1e-6 and de <= 1e-6 and ze <= (1e-2 if dtype == "bf16" else 1e-5)
        failed |= not ok
        print(f"{name:<14} loss err {le:.1e}  dice err {de:.1e}  dz err {ze:.1e}  {'ok' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        sys.stderr.write("usage: unet_loss.py check DRIVER [--perturb]\n")
        sys.exit(2)
    sys.exit(check(sys.argv[2], "--perturb" in sys.argv[3:]))
