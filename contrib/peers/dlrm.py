#!/usr/bin/env python3
"""The MLPerf DLRM in plain PyTorch, as a numerical peer of trainkit's train-step.

  dlrm.py check DUMP.safetensors     compare one step with `train-step --dump-step DUMP`:
                                     loads the weights and the batch from the dump, computes the
                                     loss and the gradients in fp32 and compares them with ours
                                     (loss rel. err <= 1e-5, gradients <= 1e-4, relative to the
                                     largest magnitude of each tensor). Exit 0 ok, 1 mismatch.
  dlrm.py load CKPT.safetensors      load a checkpoint into the model and print its shapes.

Weights are stored as torch.nn.Linear stores them: MLP weights (out, in) (y = x @ W.T + b),
tables emb.T.weight (rows, dim). Model: log(x+1) dense features ->
bottom MLP (ReLU everywhere) -> dot interaction over [bottom, 26 embeddings] (strictly lower
triangle, row-major as the MLPerf reference) concatenated after the bottom output -> top MLP
(ReLU on all but the last) -> BCE with logits, mean over the batch.
"""
import json
import sys

import torch
from safetensors.torch import load_file


class DLRM(torch.nn.Module):
    def __init__(self, t):
        super().__init__()
        P = torch.nn.Parameter
        self.bot = torch.nn.ParameterList()
        self.top = torch.nn.ParameterList()
        i = 0
        while f"bot_mlp.{i}.weight" in t:
            self.bot.append(P(t[f"bot_mlp.{i}.weight"].float().clone()))
            self.bot.append(P(t[f"bot_mlp.{i}.bias"].float().clone()))
            i += 1
        i = 0
        while f"top_mlp.{i}.weight" in t:
            self.top.append(P(t[f"top_mlp.{i}.weight"].float().clone()))
            self.top.append(P(t[f"top_mlp.{i}.bias"].float().clone()))
            i += 1
        self.emb = []
        i = 0
        while f"emb.{i}.weight" in t:
            self.emb.append(t[f"emb.{i}.weight"].float().clone())
            i += 1

    def forward(self, dense, cat, width):
        x = torch.log(dense.float().clamp(min=0) + 1)
        for k in range(0, len(self.bot), 2):
            x = torch.relu(x @ self.bot[k].T + self.bot[k + 1])
        # The looked-up vectors are a leaf so their gradient can be compared with grad.emb_out.
        ly = torch.stack([self.emb[f][cat[:, f].long()] for f in range(len(self.emb))], dim=1)
        ly.requires_grad_(True)
        self.ly = ly
        T = torch.cat([x.unsqueeze(1), ly], dim=1)
        Z = torch.bmm(T, T.transpose(1, 2))
        n = T.shape[1]
        li = torch.tensor([i for i in range(n) for j in range(i)])
        lj = torch.tensor([j for i in range(n) for j in range(i)])
        R = torch.cat([x, Z[:, li, lj]], dim=1)
        if width > R.shape[1]:
            R = torch.nn.functional.pad(R, (0, width - R.shape[1]))
        z = R
        for k in range(0, len(self.top), 2):
            z = z @ self.top[k].T + self.top[k + 1]
            if k + 2 < len(self.top):
                z = torch.relu(z)
        return z.squeeze(1)


def rel_err(a, b):
    scale = max(b.abs().max().item(), 1e-30)
    return (a - b).abs().max().item() / scale


def check(path):
    t = load_file(path)
    torch.set_default_dtype(torch.float32)
    m = DLRM(t)
    width = t["top_mlp.0.weight"].shape[1]
    logit = m(t["batch.dense"], t["batch.cat"], width)
    y = t["batch.label"].float()
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, y)
    loss.backward()
    worst = {}
    worst["loss"] = abs(loss.item() - t["loss"].item()) / abs(loss.item())
    ok = worst["loss"] <= 1e-5
    for name, p in [(f"bot_mlp.{k // 2}.{'weight' if k % 2 == 0 else 'bias'}", p) for k, p in enumerate(m.bot)] + \
                   [(f"top_mlp.{k // 2}.{'weight' if k % 2 == 0 else 'bias'}", p) for k, p in enumerate(m.top)]:
        e = rel_err(t["grad." + name], p.grad)
        worst["grad." + name] = e
        ok &= e <= 1e-4
    e = rel_err(t["grad.emb_out"], m.ly.grad)
    worst["grad.emb_out"] = e
    ok &= e <= 1e-4
    print(json.dumps({"type": "peer", "ok": ok, "loss": loss.item(), "ours": t["loss"].item(),
                      "max_rel_err": worst}))
    return 0 if ok else 1


def main(argv):
    if len(argv) == 3 and argv[1] == "check":
        return check(argv[2])
    if len(argv) == 3 and argv[1] == "load":
        t = load_file(argv[2])
        DLRM(t)
        print(json.dumps({k: list(v.shape) for k, v in t.items()}))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
