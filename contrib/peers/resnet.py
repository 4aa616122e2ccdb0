#!/usr/bin/env python3
"""ResNet-50 v1.5 in PyTorch (torchvision's resnet50), the numerical peer of trainkit's train-step.

  resnet.py check DUMP.safetensors [--device cpu|cuda] [--ref float32|float64] [--tol-loss 1e-3]
                   [--tol-grad 1e-2]
        compare one training step with `train-step --dump-step DUMP`: the model of the dump's
        config (torchvision's resnet50 itself for layers [3, 4, 6, 3], width 64, expansion 4; else
        the same network built from torchvision's Bottleneck), its weights and BN running
        statistics and the batch from the dump; the loss (cross-entropy with the dump's label
        smoothing), the gradient of every parameter and the running statistics after the step, in
        fp32 (TF32 off) or fp64, against ours. The metric, per tensor: the relative error on the
        norm, ||ours - torch|| / ||torch||; the check passes when every tensor's is <= tol-grad
        (grad_rel_max is the worst, grad_worst its name). With --ref float64 it also reports how
        far torch's own fp32 step is from the same fp64 reference on the same metric (the noise
        floor: torch_fp32_grad_rel_max, torch_fp32_grad_worst). That floor depends on the weights:
        at torchvision's default init (every BN weight 1) ResNet-50's gradients amplify rounding
        through the depth (a BN network at init; at 64x64 images and batch 4 torch's own fp32 step
        is ~1.4% from fp64, ours as far), so no fp32 step meets 1e-2 there; with the residual
        branches' last BN weights at 0.1 (init --residual-gamma 0.1: the direction of
        torchvision's zero_init_residual, but non-zero so that every gradient is) it is ~1e-3 at
        most (tests/cli/resnet.bats). Prints one JSON line; exit 0 within the tolerances, 1 not.
  resnet.py init OUT.safetensors [--layers 3,4,6,3] [--width 64] [--classes 1000] [--seed 0]
                   [--residual-gamma G]
        write a freshly initialized torchvision model's state dict (torchvision's names and
        layouts) for `train-step --init-checkpoint`; --residual-gamma sets every block's last BN
        weight (bn3.weight) to G.
  resnet.py compare-init OUT.safetensors DUMP.safetensors
        check that the weights in a step dump are the state dict's, converted to our layout
        (conv weights (K, C, R, S) -> (K, R, S, C)): what --init-checkpoint must do. Exit 0/1.

Our layouts: images (N, H, W, 3) NHWC, conv weights (K, R, S, C); torchvision's NCHW and (K, C, R, S).
"""
import argparse
import json
import sys

import torch
from safetensors.torch import load_file, save_file

try:
    import torchvision
    from torchvision.models.resnet import Bottleneck
except ImportError:  # the callers skip with a message
    print("resnet.py: torchvision is not installed (pip install torchvision)", file=sys.stderr)
    sys.exit(77)


class Net(torch.nn.Module):
    """torchvision's ResNet with a configurable width, depth and expansion (the same names)."""

    def __init__(self, layers, width, expansion, classes):
        super().__init__()
        nn = torch.nn
        block = type("Block", (Bottleneck,), {"expansion": expansion})
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inp = width
        self.stages = len(layers)
        for s, n in enumerate(layers):
            planes, blocks = width << s, []
            for u in range(n):
                stride = 2 if s > 0 and u == 0 else 1
                down = None
                if u == 0 and (stride != 1 or inp != planes * expansion):
                    down = nn.Sequential(nn.Conv2d(inp, planes * expansion, 1, stride, bias=False),
                                         nn.BatchNorm2d(planes * expansion))
                blocks.append(block(inp, planes, stride, down))
                inp = planes * expansion
            setattr(self, f"layer{s + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inp, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for s in range(self.stages):
            x = getattr(self, f"layer{s + 1}")(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(layers, width, expansion, classes):
    if list(layers) == [3, 4, 6, 3] and width == 64 and expansion == 4:
        return torchvision.models.resnet50(num_classes=classes)
    return Net(layers, width, expansion, classes)


def to_torch(name, t):
    return t.permute(0, 3, 1, 2).contiguous() if t.dim() == 4 else t  # (K, R, S, C) -> (K, C, R, S)


def rel(a, b):
    d, n = (a.double() - b.double()).norm().item(), b.double().norm().item()
    return d / n if n > 0 else d


def torch_step(t, cfg, dev, dtype, amp=False):
    """torch's loss, parameter gradients and running statistics after one step from the dump (amp:
    fp32 weights under bf16 autocast, as the speed peer trains)."""
    m = build(cfg["layers"][:cfg["nstages"]], cfg["width"], cfg["expansion"], cfg["classes"])
    new = {}
    for k, v in m.state_dict().items():
        if k.endswith("num_batches_tracked"):
            new[k] = v
            continue
        if k not in t:
            raise SystemExit(json.dumps({"type": "error", "missing": k}))
        new[k] = to_torch(k, t[k]).to(v.dtype)
        if new[k].shape != v.shape:
            raise SystemExit(json.dumps({"type": "error", "tensor": k, "shape": list(new[k].shape),
                                         "want": list(v.shape)}))
    m.load_state_dict(new)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.momentum, mod.eps = cfg["bn_momentum"], cfg["bn_epsilon"]
    m = m.to(device=dev, dtype=dtype).train()
    x = t["batch.image"].permute(0, 3, 1, 2).contiguous().to(device=dev, dtype=dtype)
    y = t["batch.label"].long().to(dev)
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
        logits = m(x)
    loss = torch.nn.functional.cross_entropy(logits.float() if amp else logits, y,
                                             label_smoothing=cfg["label_smoothing"])
    loss.backward()
    grads = {k: p.grad.double().cpu() for k, p in m.named_parameters()}
    stats = {k: v.double().cpu() for k, v in m.state_dict().items()
             if k not in grads and not k.endswith("num_batches_tracked")}
    return loss.item(), grads, stats


def worst(ours, ref, conv):
    w, name = 0.0, ""
    for k in ref:
        e = rel(conv(k, ours[k]), ref[k])
        if e >= w:
            w, name = e, k
    return w, name


def together(ours, ref, conv):  # the error of all tensors as one vector
    d = sum((conv(k, ours[k]).double() - ref[k]).norm().item() ** 2 for k in ref)
    n = sum(ref[k].norm().item() ** 2 for k in ref)
    return (d / n) ** 0.5 if n > 0 else d ** 0.5


def check(a):
    t = load_file(a.dump)
    raw = open(a.dump, "rb").read(8)
    head = json.loads(open(a.dump, "rb").read(8 + int.from_bytes(raw, "little"))[8:])
    cfg = json.loads(head["__metadata__"]["config"])
    dev = torch.device(a.device)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    ref_dtype = torch.float64 if a.ref == "float64" else torch.float32
    loss, grads, stats = torch_step(t, cfg, dev, ref_dtype)
    ours_g = {k: t["grad." + k].double() for k in grads}
    ours_s = {k: t["after." + k].double() for k in stats}
    g, gn = worst(ours_g, grads, to_torch)
    st, sn = worst(ours_s, stats, lambda k, v: v)
    out = {"type": "resnet_check", "reference": "torch " + a.ref + " on " + a.device, "loss": loss,
           "ours": t["loss"].item(), "loss_rel": abs(t["loss"].item() - loss) / abs(loss),
           "grad_rel_max": g, "grad_worst": gn, "grad_rel_all": together(ours_g, grads, to_torch),
           "stats_rel_max": st, "stats_worst": sn, "tensors": len(grads)}
    if a.ref == "float64":  # how far PyTorch's own fp32 (and bf16 autocast) steps are from it
        same = lambda k, v: v
        for name, amp in (("torch_fp32", False), ("torch_amp_bf16", True)):
            if amp and dev.type != "cuda":
                continue
            lt, gt, _ = torch_step(t, cfg, dev, torch.float32, amp)
            out[name + "_loss_rel"] = abs(lt - loss) / abs(loss)
            out[name + "_grad_rel_max"], out[name + "_grad_worst"] = worst(gt, grads, same)
            out[name + "_grad_rel_all"] = together(gt, grads, same)
    ok = out["loss_rel"] <= a.tol_loss and g <= a.tol_grad and st <= a.tol_grad
    out["ok"] = ok
    print(json.dumps(out))
    return 0 if ok else 1


def init(a):
    torch.manual_seed(a.seed)
    layers = [int(v) for v in a.layers.split(",")]
    m = build(layers, a.width, 4, a.classes)
    sd = {k: v.contiguous() for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked")}
    if a.residual_gamma is not None:
        for k in sd:
            if k.endswith(".bn3.weight"):
                sd[k] = torch.full_like(sd[k], a.residual_gamma)
    # not all-zero running statistics, so the import of those is checked too
    for k in sd:
        if k.endswith("running_mean"):
            sd[k] = torch.randn(sd[k].shape) * 0.1
        elif k.endswith("running_var"):
            sd[k] = torch.rand(sd[k].shape) + 0.5
    save_file(sd, a.out)
    return 0


def compare_init(a):
    sd, t = load_file(a.state), load_file(a.dump)
    bad = [k for k in sd if not torch.equal(to_torch(k, t[k]), sd[k])]
    print(json.dumps({"type": "compare_init", "tensors": len(sd), "differ": bad[:5], "ndiffer": len(bad)}))
    return 0 if not bad else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dump")
    c.add_argument("--device", default="cpu")
    c.add_argument("--tol-loss", type=float, default=1e-3)
    c.add_argument("--tol-grad", type=float, default=1e-2)
    c.add_argument("--ref", choices=["float32", "float64"], default="float32")
    i = sub.add_parser("init")
    i.add_argument("out")
    i.add_argument("--layers", default="3,4,6,3")
    i.add_argument("--width", type=int, default=64)
    i.add_argument("--classes", type=int, default=1000)
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--residual-gamma", type=float)
    ci = sub.add_parser("compare-init")
    ci.add_argument("state")
    ci.add_argument("dump")
    a = p.parse_args()
    return {"check": check, "init": init, "compare-init": compare_init}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
