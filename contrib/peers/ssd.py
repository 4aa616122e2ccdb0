#!/usr/bin/env python3
"""SSD300-ResNet34 (the v1.x MLPerf reference's network) in PyTorch, the numerical peer of
trainkit's SSD network (lib/workloads/ssd).

Transcribed here from the reference's definition (mlcommons/training before v2.0,
single_stage_detector/ssd/ssd300.py SSD300 and base_model.py ResNet34); the module and parameter
names are the reference's, so its state dict loads here and ours there.

  ssd.py --count [--width 64] [--classes 81]
        instantiate the reference network and print its trainable parameter count and tensors
        (one JSON line). At width 64 and 81 classes: torchvision's resnet34 itself as the trunk.
  ssd.py --init FILE [--width 64] [--size 300] [--classes 81] [--batch 2] [--seed 0]
        write a freshly initialized model (the reference's init: the trunk torchvision's, the rest
        xavier_uniform_ weights and Conv2d's default biases), its BatchNorm running statistics
        (0, 1), a random batch "batch.image" (N, H, W, 3) and the loss weights "wloc" (N, 4, B),
        "wconf" (N, classes, B): trainkit's layouts (conv weights (K, R, S, C)).
  ssd.py --compare DUMP [--dtype float64] [--tol-out 1e-4] [--tol-grad 1e-3] [--relu-tie 1e-4]
                       [--backbone FILE] [--floor] [--each]
        DUMP (tests/unit/test_ssd_model peer_dump) holds the weights, the batch, the loss
        weights, our outputs "loc", "conf", every "grad.NAME", the running statistics after
        the step ("after.NAME"), the eval forward's outputs from them ("eval.loc",
        "eval.conf") and the training forward's ReLU decisions ("relu.II", 0/1 (N, H, W, C), the
        37 ReLUs in the order the network applies them): recompute the training forward
        (BatchNorm in training mode, as the reference trains), the loss L = sum(loc wloc) +
        sum(conf wconf), its backward and the eval forward, and compare. Metric per tensor:
        ||ours - torch|| / ||torch||. Where a ReLU's input here is within --relu-tie x its RMS
        of 0 and our decision differs, ours is taken (relu_adopted; relu_worst: the largest
        such |input| / RMS): the sign of such an input is the fp32 forward's rounding (any fp32
        forward's: torch's too), but its gradient is all or nothing, and one flip moves every
        gradient below it by ~1e-3 (measured: a width-8 dump, one input at -4.3e-6 in float64,
        positive in ours: worst gradient 6.1e-3; taken, 1.1e-5, torch's own fp32 step 1.0e-5;
        at width 16, none to take, ours 1.0e-5, while torch's own fp32 step flipped one: 8.2e-3).
        A decision that differs farther from 0 is a failure (relu_mismatch). --backbone: a torchvision
        resnet34 file (--convert's) whose tensors the dump's trunk must hold exactly (an import
        check; a dump of weights alone, peer_dump's SSD_PEER_STEP=0, is checked for that only).
        --floor: also torch's own float32 step against the float64 one (torch_fp32_grad_rel_max,
        and at our worst tensor; its own ReLU decisions, none taken): the noise floor of an fp32
        step. At the reference's size (width 64, 300x300, 81 classes, batch 1, --seed 3; ~3
        minutes on 2 cores): 16 of our decisions taken (relu_worst 1.5e-5), worst gradient
        1.5e-5, loc, conf 1.0e-5, running statistics 3.2e-7, eval forward 1.8e-6, while torch's
        own fp32 step is 1.7e-2 off at its worst: flips of that kind (before the decisions were
        dumped, seed 0: ours 9.6e-3, a deep BatchNorm bias; a flip moves a BatchNorm's bias the
        most, its input's xhat being near -beta / gamma, the weight's gradient barely). --each: every gradient's error on stderr, one line a tensor (with
        --floor, torch's fp32 step's too). One JSON line; exit 0 within the tolerances, 1 not,
        3 a dump that does not fit.
  ssd.py --convert IN.pth OUT.safetensors
        torchvision's resnet34 state dict (resnet34-333f7ec4.pth, which the reference loads) as
        safetensors for train-step --init-checkpoint: its floating-point tensors, names and
        layouts unchanged (num_batches_tracked dropped).
  ssd.py --random-resnet34 OUT.pth [--seed 0]
        a torchvision resnet34() state dict of random weights (torchvision's init; BN statistics
        perturbed so that they are not 0 and 1): the tests' stand-in for the pretrained file,
        which cannot be downloaded here.

The network at width W (the reference: W = 64; the tests shrink W, the layers scale with it):
  trunk: conv1 7x7/2, bn1, ReLU, max pool 3x3/2, layer1 3 BasicBlocks of W, layer2 4 of 2W (the
    first stride 2), layer3 6 of 4W with its first block's conv1 and downsample at stride 1
    (base_model.py's _ModifyBlock). base_model.py's names: model.layer1 = Sequential(conv1, bn1,
    relu, maxpool, layer1, layer2), model.layer2 = Sequential(layer3).
  additional_blocks.k (k = 0..4): Conv2d 1x1 (bias) C_k -> M_k, ReLU, Conv2d 3x3 (bias) M_k ->
    C_k+1 (k < 3: stride 2 padding 1; else stride 1, no padding), ReLU; C = [4W, 8W, 8W, 4W, 4W,
    4W], M = [4W, 4W, 2W, 2W, 2W].
  loc.k / conf.k: Conv2d 3x3 padding 1 (bias) to nd_k x 4 / nd_k x classes, nd = [4, 6, 6, 6, 4,
    4]; outputs viewed (N, 4, -1) / (N, classes, -1) and concatenated over the maps (bbox_view).
  An input of side >= 257 makes the six maps (300: 38, 19, 10, 5, 3, 1; 8732 boxes).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

try:
    import torchvision
    from torchvision.models.resnet import BasicBlock
except ImportError:
    print("ssd.py: torchvision is not installed (pip install torchvision)", file=sys.stderr)
    sys.exit(2)

NUM_DEFAULTS = [4, 6, 6, 6, 4, 4]


class NarrowResNet34(nn.Module):
    """torchvision's resnet34 layout (the same attribute names and order) at a base width W."""

    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = width
        for s, n in enumerate([3, 4, 6]):
            planes, stride = width << s, 1 if s == 0 else 2
            blocks = []
            for i in range(n):
                down = None
                if i == 0 and (stride != 1 or cin != planes):
                    down = nn.Sequential(nn.Conv2d(cin, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))
                blocks.append(BasicBlock(cin, planes, stride if i == 0 else 1, down))
                cin = planes
            setattr(self, f"layer{s + 1}", nn.Sequential(*blocks))
        for mod in self.modules():  # torchvision's ResNet init
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(mod, nn.BatchNorm2d):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)


class Trunk(nn.Module):
    """base_model.py's ResNet34: children [:6] and [6:7], layer3's first block at stride 1."""

    def __init__(self, width):
        super().__init__()
        rn = torchvision.models.resnet34() if width == 64 else NarrowResNet34(width)
        kids = list(rn.children())
        self.layer1 = nn.Sequential(*kids[:6])
        self.layer2 = nn.Sequential(*kids[6:7])
        for blk in self.layer2[0]:  # every block of layer3: conv1 and the downsample at stride 1
            blk.conv1.stride = (1, 1)
            if blk.downsample is not None:
                blk.downsample[0].stride = (1, 1)

    def forward(self, x):
        return [self.layer2(self.layer1(x))]


class SSD300(nn.Module):
    def __init__(self, classes=81, width=64):
        super().__init__()
        self.label_num = classes
        self.model = Trunk(width)
        chan = [4 * width, 8 * width, 8 * width, 4 * width, 4 * width, 4 * width]
        mid = [4 * width, 4 * width, 2 * width, 2 * width, 2 * width]
        blocks = []
        for k in range(5):
            pad, stride = (1, 2) if k < 3 else (0, 1)
            blocks.append(nn.Sequential(nn.Conv2d(chan[k], mid[k], 1), nn.ReLU(inplace=True),
                                        nn.Conv2d(mid[k], chan[k + 1], 3, padding=pad, stride=stride),
                                        nn.ReLU(inplace=True)))
        self.additional_blocks = nn.ModuleList(blocks)
        self.loc = nn.ModuleList([nn.Conv2d(c, nd * 4, 3, padding=1) for nd, c in zip(NUM_DEFAULTS, chan)])
        self.conf = nn.ModuleList([nn.Conv2d(c, nd * classes, 3, padding=1) for nd, c in zip(NUM_DEFAULTS, chan)])
        for layer in [*self.additional_blocks, *self.loc, *self.conf]:  # _init_weights
            for p in layer.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)

    def forward(self, x):
        src = self.model(x)
        f = src[-1]
        for blk in self.additional_blocks:
            f = blk(f)
            src.append(f)
        n = x.shape[0]
        # reshape, where the reference views: the same tensors (a view) for contiguous maps, and a
        # copy into the reference's (N, 4 x nd, H, W) order for channels_last ones (ssd_perf.py)
        locs = [l(s).reshape(n, 4, -1) for s, l in zip(src, self.loc)]
        confs = [c(s).reshape(n, self.label_num, -1) for s, c in zip(src, self.conf)]
        return torch.cat(locs, 2).contiguous(), torch.cat(confs, 2).contiguous()


def to_file(t):  # torch -> ours: conv weights (K, C, R, S) -> (K, R, S, C)
    return t.permute(0, 2, 3, 1).contiguous() if t.dim() == 4 else t.contiguous()


def from_file(t):
    return t.permute(0, 3, 1, 2).contiguous() if t.dim() == 4 else t


def boxes(model, size):
    with torch.no_grad():
        loc, _ = model.eval()(torch.zeros(1, 3, size, size))
    model.train()
    return loc.shape[2]


def save(tensors, path, meta):
    """Through a temporary file and a rename: a failed write leaves no partial file."""
    tmp = path + ".tmp"
    try:
        save_file(tensors, tmp, metadata=meta)
        os.replace(tmp, path)
    except Exception as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        sys.stderr.write(f"ssd.py: error: cannot write {path}: {getattr(e, 'strerror', None) or e}\n")
        sys.exit(4)


def bad(what):
    sys.stderr.write("ssd.py: error: " + json.dumps(what) + "\n")
    sys.exit(3)


def count(a):
    m = SSD300(a.classes, a.width)
    ps = list(m.named_parameters())
    print(json.dumps({"type": "ssd_count", "width": a.width, "classes": a.classes,
                      "params": sum(p.numel() for _, p in ps), "tensors": len(ps),
                      "buffers": sum(1 for k, _ in m.named_buffers() if not k.endswith("num_batches_tracked"))}))
    return 0


def init(a):
    g = torch.manual_seed(a.seed)
    m = SSD300(a.classes, a.width)
    b = boxes(m, a.size)
    out = {k: to_file(v.detach().float()) for k, v in m.state_dict().items() if not k.endswith("num_batches_tracked")}
    out["batch.image"] = torch.randn(a.batch, a.size, a.size, 3, generator=g)
    out["wloc"] = torch.rand(a.batch, 4, b, generator=g) * 2 - 1
    out["wconf"] = torch.rand(a.batch, a.classes, b, generator=g) * 2 - 1
    meta = {"model": "ssd300", "layout": "krsc", "width": str(a.width), "size": str(a.size),
            "classes": str(a.classes), "batch": str(a.batch), "seed": str(a.seed)}
    save(out, a.init, meta)
    return 0


def rel(a, b):
    d, n = (a.double() - b.double()).norm().item(), b.double().norm().item()
    return d / n if n > 0 else d


def read(path, what, fn):
    """fn(path), or exit 4 when the file cannot be read, 3 when it is not `what`."""
    try:
        return fn(path)
    except OSError as e:
        sys.stderr.write(f"ssd.py: error: {path}: {e.strerror}\n")
        sys.exit(4)
    except Exception as e:
        sys.stderr.write(f"ssd.py: error: {path}: not {what} ({type(e).__name__}: {e})\n")
        sys.exit(3)


def st_meta(path):
    with open(path, "rb") as f:
        return json.loads(f.read(int.from_bytes(f.read(8), "little"))).get("__metadata__") or {}


class AdoptRelu:
    """Forward pre-hooks on every nn.ReLU that, in the training forward, take the dump's ReLU
    decisions ("relu.II": 0/1, (N, H, W, C), in the order the network applies them) where the
    input here is within `tie` x its RMS of 0 and the two sides differ: such an element's
    sign is rounding noise of the fp32 forward (a conv output 5e-6 off moves an input of -4e-6
    to +1e-6), but its gradient is the whole dz or nothing, which one flip shows in the
    gradients of every layer below at ~1e-3 (a BatchNorm bias the most: the flip's xhat is near
    -beta / gamma, so the weight barely moves). The input is moved just across 0 by a constant
    (its gradient unchanged); a decision that differs farther from 0 is counted as a mismatch."""

    def __init__(self, model, t, tie):
        self.t, self.tie, self.i = t, tie, 0
        self.adopted, self.mismatch, self.worst = 0, 0, 0.0
        for mod in model.modules():
            if isinstance(mod, nn.ReLU):
                mod.register_forward_pre_hook(self.hook)

    def hook(self, mod, args):
        v = args[0]
        if not v.requires_grad:  # the eval forward: nothing to adopt
            return None
        name = "relu.%02d" % self.i
        self.i += 1
        if name not in self.t:
            bad({"missing": name})
        ours = self.t[name].permute(0, 3, 1, 2).to(torch.bool)
        if ours.shape != v.shape:
            bad({"tensor": name, "shape": list(ours.shape), "want": list(v.shape)})
        with torch.no_grad():
            differ = ours != (v > 0)
            scale = v.double().pow(2).mean().sqrt().item()
            near = v.abs() <= self.tie * scale
            self.mismatch += int((differ & ~near).sum())
            take = differ & near
            self.adopted += int(take.sum())
            if bool(differ.any()):
                self.worst = max(self.worst, v[differ].abs().max().item() / scale)
            up = v.abs().clamp(min=1e-30) - v  # to |v| (> 0), or to 0 exactly
            d = torch.where(take, torch.where(ours, up, -v), torch.zeros_like(v))
        return (v + d,)


def reference_step(t, meta, dtype, adopt=None):
    """The reference's training forward, the loss's backward and the eval forward at dtype, from a
    dump's weights and batch: loc, conf, {name: grad}, {name: running statistic}, (eval loc, conf),
    the AdoptRelu (adopt: its tie, the dump's ReLU decisions taken near 0) or None."""
    width, classes = int(meta["width"]), int(meta["classes"])
    m = SSD300(classes, width)
    sd = {}
    for k, v in m.state_dict().items():
        if k.endswith("num_batches_tracked"):
            sd[k] = v
            continue
        if k not in t:
            bad({"missing": k})
        sd[k] = from_file(t[k]).double()
        if sd[k].shape != v.shape:
            bad({"tensor": k, "shape": list(sd[k].shape), "want": list(v.shape)})
    m = m.to(dtype)
    m.load_state_dict(sd)
    m.train()
    relu = AdoptRelu(m, t, adopt) if adopt is not None else None
    img = t["batch.image"].permute(0, 3, 1, 2).contiguous().to(dtype)
    loc, conf = m(img)
    if loc.shape != t["wloc"].shape or conf.shape != t["wconf"].shape:
        bad({"outputs": [list(loc.shape), list(conf.shape)], "weights": [list(t["wloc"].shape), list(t["wconf"].shape)]})
    L = (loc * t["wloc"].to(dtype)).sum() + (conf * t["wconf"].to(dtype)).sum()
    L.backward()
    grads = {k: p.grad.detach() for k, p in m.named_parameters()}
    running = {k: v.detach() for k, v in m.state_dict().items() if k.endswith(("running_mean", "running_var"))}
    m.eval()
    with torch.no_grad():
        ev = m(img)
    return loc.detach(), conf.detach(), grads, running, ev, relu


def worst_of(pairs):
    """(worst ||a - b|| / ||b||, its name) over {name: (a, b)}."""
    worst, name = 0.0, None
    for k, (x, y) in pairs.items():
        r = rel(x, y)
        if r > worst or name is None:
            worst, name = r, k
    return worst, name


def step_compare(a, t, meta):
    adopt = a.relu_tie if "relu.00" in t else None  # (older dumps have no decisions)
    loc, conf, grads, running, ev, relu = reference_step(t, meta, getattr(torch, a.dtype), adopt)
    out = {"type": "ssd_compare", "reference": f"torch {a.dtype}", "boxes": loc.shape[2],
           "params": sum(g.numel() for g in grads.values()), "ours_params": int(meta.get("params", -1))}
    out["loc_rel"] = rel(t["loc"], loc)
    out["conf_rel"] = rel(t["conf"], conf)
    ok = out["loc_rel"] <= a.tol_out and out["conf_rel"] <= a.tol_out and out["params"] == out["ours_params"]
    for k in grads:
        if "grad." + k not in t:
            bad({"missing": "grad." + k})
    gpairs = {k: (from_file(t["grad." + k]), g) for k, g in grads.items()}
    worst, wname = worst_of(gpairs)
    if a.each:  # every tensor's error, one line each on stderr (diagnosis)
        g32 = reference_step(t, meta, torch.float32)[2] if a.floor else {}
        for k, (x, y) in gpairs.items():
            f = f" torch_fp32 {rel(g32[k], y):.2e}" if k in g32 else ""
            sys.stderr.write(f"{k} {rel(x, y):.2e} norm {y.double().norm().item():.3e}{f}\n")
    out.update(tensors=len(grads), grad_rel_max=worst, grad_worst=wname)
    ok &= worst <= a.tol_grad
    if relu:
        out.update(relus=relu.i, relu_adopted=relu.adopted, relu_mismatch=relu.mismatch, relu_worst=relu.worst)
        ok &= relu.i == 37 and relu.mismatch == 0
    pairs = {k: (t["after." + k], v) for k, v in running.items() if k.startswith("model.") and "after." + k in t}
    rworst, rname = worst_of(pairs)
    out.update(running=len(pairs), running_rel_max=rworst, running_worst=rname)
    ok &= len(pairs) > 0 and rworst <= a.tol_out
    if "eval.loc" in t:  # the eval forward from the running statistics the step left
        out["eval_rel"] = max(rel(t["eval.loc"], ev[0]), rel(t["eval.conf"], ev[1]))
        ok &= out["eval_rel"] <= a.tol_out
    if a.floor:  # torch's own fp32 step against the reference: the noise floor of an fp32 step
        g32 = reference_step(t, meta, torch.float32)[2]
        f, fname = worst_of({k: (g32[k], g) for k, g in grads.items()})
        out.update(torch_fp32_grad_rel_max=f, torch_fp32_grad_worst=fname,
                   torch_fp32_at_our_worst=rel(g32[wname], grads[wname]))
    return ok, out


def compare(a):
    t = read(a.compare, "a safetensors file", load_file)
    meta = read(a.compare, "a safetensors file", st_meta)
    if meta.get("model") != "ssd300":
        bad({"file": a.compare, "why": "no ssd300 metadata (ssd.py --init and peer_dump write it)"})
    ok, out = True, {"type": "ssd_compare"}
    if "loc" in t:
        ok, out = step_compare(a, t, meta)
    elif not a.backbone:
        bad({"file": a.compare, "why": "no outputs (loc) and no --backbone to check"})
    if a.backbone:
        tv = read(a.backbone, "a safetensors file", load_file)
        mapping = [("conv1.", "model.layer1.0."), ("bn1.", "model.layer1.1."), ("layer1.", "model.layer1.4."),
                   ("layer2.", "model.layer1.5."), ("layer3.", "model.layer2.0.")]
        nb, diff = 0, 0.0
        for k, v in tv.items():
            for pre, ours in mapping:
                if k.startswith(pre) and not k.endswith("num_batches_tracked"):
                    name = ours + k[len(pre):]
                    if name not in t:
                        bad({"missing": name, "backbone": k})
                    diff = max(diff, (from_file(t[name]).double() - v.double()).abs().max().item())
                    nb += 1
        out.update(backbone_tensors=nb, backbone_max_diff=diff)
        ok &= nb > 0 and diff == 0.0
    out["ok"] = bool(ok)
    print(json.dumps(out))
    return 0 if ok else 1


def convert(a):
    src, dst = a.convert
    sd = read(src, "a PyTorch state dict", lambda p: torch.load(p, map_location="cpu", weights_only=True))
    if not isinstance(sd, dict) or "conv1.weight" not in sd:
        sys.stderr.write(f"ssd.py: error: {src}: no conv1.weight: not a torchvision ResNet state dict\n")
        sys.exit(3)
    out = {k: v.float().contiguous() for k, v in sd.items() if torch.is_tensor(v) and v.is_floating_point()}
    save(out, dst, {"format": "pt", "source": os.path.basename(src)})
    print(json.dumps({"type": "ssd_convert", "tensors": len(out), "dropped": len(sd) - len(out), "out": dst}))
    return 0


def random_resnet34(a):
    torch.manual_seed(a.seed)
    m = torchvision.models.resnet34()
    sd = m.state_dict()
    for k, v in sd.items():  # statistics and BN affine parameters not at their defaults
        if k.endswith(("running_mean", "bias")) and v.is_floating_point():
            v.copy_(torch.randn_like(v) * 0.1)
        elif k.endswith(("running_var", "bn1.weight", "bn2.weight")) or ".downsample.1.weight" in k:
            v.copy_(torch.rand_like(v) + 0.5)
    torch.save(sd, a.random_resnet34)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--count", action="store_true")
    g.add_argument("--init", metavar="FILE")
    g.add_argument("--compare", metavar="DUMP")
    g.add_argument("--convert", nargs=2, metavar=("IN", "OUT"))
    g.add_argument("--random-resnet34", metavar="OUT")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--size", type=int, default=300)
    p.add_argument("--classes", type=int, default=81)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    p.add_argument("--tol-out", type=float, default=1e-4)
    p.add_argument("--tol-grad", type=float, default=1e-3)
    p.add_argument("--backbone", metavar="FILE")
    p.add_argument("--floor", action="store_true")
    p.add_argument("--relu-tie", type=float, default=1e-4)
    p.add_argument("--each", action="store_true")
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.count:
        return count(a)
    if a.init:
        return init(a)
    if a.compare:
        return compare(a)
    if a.convert:
        return convert(a)
    return random_resnet34(a)


if __name__ == "__main__":
    sys.exit(main())
