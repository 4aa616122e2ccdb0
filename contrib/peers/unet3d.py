#!/usr/bin/env python3
"""The MLPerf 3D U-Net (KiTS19) in PyTorch, the numerical peer of trainkit's unet3d step.

Written here from the reference's definition (mlcommons/training, retired_benchmarks/unet3d/
pytorch/model/unet3d.py, layers.py, losses.py); the module and parameter names are the
reference's, so its state dict loads here and ours there.

  unet3d.py --check [--width 32] [--crop 128] [--batch 1] [--seed 0]
        print the parameter count and the formula's count, the init check, then one forward and
        backward of a random batch (loss, dice, gradient norm, seconds): one JSON line.
        At --width 32 the network is the reference's: 31,190,243 parameters in 78 tensors
        (the reference's Unet3D(1, 3, "instancenorm", "relu") has the same names, shapes and count).
  unet3d.py --names [--width 32] [--layout torch|ktrsc]
        the layout map: one line per tensor: state-dict name, torch shape, the file's shape in
        the layout, the MLLOG weights_initialization name, the init.
  unet3d.py --init FILE [--width W] [--crop D[,H,W]] [--batch N] [--seed S] [--layout L]
        write a freshly initialized model (the reference's init) and a random batch: a step dump's
        input. Labels: a random blob of kidney (1) with a tumor (2) inside it per sample.
  unet3d.py --step-dump FILE --out OUT [--dtype float32|float64] [--lr 2.0 --momentum 0.9]
        read the weights and the batch from FILE, run one training step (forward, DiceCE loss,
        backward, the reference's SGD with Nesterov momentum from a zero buffer) and write OUT:
        FILE's tensors and metadata plus "loss" (1,), "dice" (N, 2), "logits" (N,3,D,H,W or
        N,D,H,W,3), "grad.NAME" for every parameter, "after.NAME" (the weights after the update),
        in FILE's layout and --dtype.
  unet3d.py --compare FILE [--dtype float64] [--tol-loss 1e-5] [--tol-grad 2e-3] [--no-floor]
        FILE is a dump of the same keys (ours, e.g. from train-step --dump-step): recompute the
        step from its weights and batch and compare its loss, dice, logits (when present), every
        grad.NAME (and after.NAME when present; the rate and momentum from the metadata "lr",
        "momentum", else the options). Metric per tensor: ||ours - torch|| / ||torch||; loss
        and dice relative / absolute within --tol-loss. With float64 (the default) it also
        reports how far torch's own fp32 step is from that reference (torch_fp32_grad_rel_max:
        the noise floor of an fp32 step; --no-floor skips it): 3.9e-4 to 4.3e-4 measured at
        widths 2 and 8 on 64x32x32 crops, batch 2, in the deep blocks whose gradients are
        smallest; the default --tol-grad 2e-3 is ~5x that. One JSON line; exit 0 within the
        tolerances, 1 not. --device cuda runs the reference there (TF32 off, deterministic).
  unet3d.py --fd-check FILE [--eps 1e-6] [--tol 1e-6] [--groups blocks|tensors] [--tensors all|N]
        check the gradients in a dump against central finite differences in float64: per block
        (input_block, downsample.i, bottleneck, upsample.j, output; --groups tensors: per
        parameter tensor, of which --tensors N random ones) one random unit direction v over its
        tensors, (L(w + eps v) - L(w - eps v)) / 2 eps against <grad, v>, and one direction over
        all tensors together. Passes when |fd - <grad, v>| <= tol max(|fd|, |<grad, v>|) + atol,
        atol = 10 u |L| / eps (u = 2^-52: the difference's rounding). A step that flips any
        ReLU's sign (a kink: no derivative there) is not counted: the step is made 4x shorter
        (3 times at most, then another direction); "shortened" counts those directions.
        One JSON line; exit 0 / 1.

The model (width W: filters W, 2W, 4W, 8W, 10W; the reference is W = 32: 32, 64, 128, 256, 320):
  input block: 2 conv blocks 1 -> W -> W
  downsample i = 0..3: conv block stride 2 (filters[i] -> filters[i+1]), conv block
  bottleneck: the same with 10W -> 10W (stride 2)
  upsample j = 0..4 (10W->10W, 10W->8W, 8W->4W, 4W->2W, 2W->W): ConvTranspose3d 2x2x2 stride 2
    with bias (no norm, no activation), concatenated with the skip (upsampled first), 2 conv blocks
  output: Conv3d 1x1x1 with bias to 3 classes (logits).
  conv block: Conv3d 3x3x3 padding 1, no bias; InstanceNorm3d(affine=True, eps 1e-5, no running
  statistics); ReLU.
  A crop needs each side a multiple of 32 and at least 64 on one side (the bottleneck's instance
  norm needs more than one voxel).

The reference's init (PyTorch's module defaults, weights_init_scale 1.0): every convolution weight
and bias U(-b, b) with b = 1/sqrt(fan_in), where fan_in = size(1) x kernel volume of the weight as
stored: Conv3d (K, C, 3, 3, 3): 27 C; ConvTranspose3d (Cin, Cout, 2, 2, 2): 8 Cout (torch's rule
takes dim 1 also here); the output conv (3, W, 1, 1, 1): W. Instance norm weight 1, bias 0.

The loss: MLPerf's DiceCELoss (kernels/dice_ce.h): softmax over the 3 classes; per sample and
foreground class k in {1, 2}: dice = (2 sum p_k t_k + 1e-6) / (sum t_k + sum p_k + 1e-6); ce the
mean cross-entropy over all voxels; loss = (mean(1 - dice) + ce) / 2.

Layouts in files (metadata "layout"): "torch" is the state dict's (conv (K, C, T, R, S), convT
(Cin, Cout, T, R, S), image (N, 1, D, H, W), label (N, 1, D, H, W), logits (N, 3, D, H, W));
"ktrsc" is trainkit's channels last: conv (K, T, R, S, C), convT (Cin, T, R, S, Cout), the 1x1x1
output conv (3, 1, 1, 1, W), image and label (N, D, H, W, 1) (the same bytes), logits
(N, D, H, W, 3); vectors (norm weights and biases, conv biases) as they are. Gradients and
after.NAME are in the file's layout. Keys: "batch.image" f32, "batch.label" u8, the parameters by
their state-dict names (f32, or f64 with --dtype float64 in --init), "loss" (1,), "grad.NAME" (all
78 required by --compare), "dice", "logits", "after.NAME" (optional). Metadata (strings) read:
"model" = "unet3d" and "width" (required), "layout" (default torch), "lr", "momentum".
Exit codes: 0 ok, 1 a check failed, 2 usage, 3 a file that is not a dump of this model (not
safetensors, a tensor missing or of another shape), 4 a file that cannot be read or written
(outputs go through a temporary file and a rename), 5 --device cuda without a GPU.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from safetensors.torch import load_file, save_file
except ImportError:  # --check and --names work without it
    load_file = save_file = None

SMOOTH = 1e-6


def block(cin, cout, stride=1):
    """Conv3d 3x3x3 (no bias) + InstanceNorm3d(affine) + ReLU: names .0.weight, .1.weight, .1.bias."""
    return nn.Sequential(nn.Conv3d(cin, cout, 3, stride, 1, bias=False), nn.InstanceNorm3d(cout, affine=True),
                         nn.ReLU(inplace=True))


class Pair(nn.Module):  # the reference's InputBlock / DownsampleBlock: conv1 (maybe strided), conv2
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1, self.conv2 = block(cin, cout, stride), block(cout, cout)

    def forward(self, x):
        return self.conv2(self.conv1(x))


class Up(nn.Module):  # the reference's UpsampleBlock
    def __init__(self, cin, cout):
        super().__init__()
        # in a Sequential so the names are upsample_conv.0.weight / .bias as the reference's
        self.upsample_conv = nn.Sequential(nn.ConvTranspose3d(cin, cout, 2, 2, 0, bias=True))
        self.conv1, self.conv2 = block(2 * cout, cout), block(cout, cout)

    def forward(self, x, skip):
        return self.conv2(self.conv1(torch.cat((self.upsample_conv(x), skip), dim=1)))


class Output(nn.Module):
    def __init__(self, cin, classes):
        super().__init__()
        self.conv = nn.Conv3d(cin, classes, 1, 1, 0, bias=True)

    def forward(self, x):
        return self.conv(x)


def filters_of(width):
    return [width, 2 * width, 4 * width, 8 * width, 10 * width]


class UNet3D(nn.Module):
    def __init__(self, width=32, classes=3):
        super().__init__()
        f = filters_of(width)
        self.input_block = Pair(1, f[0], 1)
        self.downsample = nn.ModuleList([Pair(f[i], f[i + 1], 2) for i in range(4)])
        self.bottleneck = Pair(f[4], f[4], 2)
        ups = [(f[4], f[4])] + [(f[i + 1], f[i]) for i in reversed(range(4))]
        self.upsample = nn.ModuleList([Up(i, o) for i, o in ups])
        self.output = Output(f[0], classes)
        init_reference(self)

    def forward(self, x):
        x = self.input_block(x)
        skips = [x]
        for d in self.downsample:
            x = d(x)
            skips.append(x)
        x = self.bottleneck(x)
        for u, s in zip(self.upsample, reversed(skips)):
            x = u(x, s)
        return self.output(x)


def init_reference(m, gen=None):
    """PyTorch's defaults, written out: conv weights and biases U(-1/sqrt(fan_in), +), norms 1 / 0."""
    params = dict(m.named_parameters())
    with torch.no_grad():
        for name, p in params.items():
            if isinstance_norm(name):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
                continue
            w = params[name[:-len("bias")] + "weight"] if name.endswith("bias") else p
            b = 1.0 / math.sqrt(w.shape[1] * math.prod(w.shape[2:]))
            p.copy_((torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * b)


def isinstance_norm(name):
    # conv blocks are Sequential(conv, norm, relu): index 1 is the norm (upsample_conv has only 0)
    return name.split(".")[-2] == "1"


def mllog_name(name):
    """The reference's weights_initialization tensor name of a state-dict entry (layers.py)."""
    parts = name.split(".")
    if parts[0] == "output":
        return "output_conv"
    kind = "_instancenorm" if isinstance_norm(name) else "_conv"
    if parts[0] == "input_block":
        return f"input_block_{int(parts[1][-1]) - 1}{kind}"
    if parts[0] == "bottleneck":
        return f"down4_block_{int(parts[1][-1]) - 1}{kind}"
    if parts[0] == "downsample":
        return f"down{parts[1]}_block_{int(parts[2][-1]) - 1}{kind}"
    if parts[2] == "upsample_conv":
        return f"up{parts[1]}_deconv"
    return f"up{parts[1]}_block_{int(parts[2][-1]) - 1}{kind}"


def param_count_formula(width):
    """The parameter count by hand: conv weights 27 C K, norms 2 K, transposed 8 Cin Cout + Cout,
    output 3 W + 3."""
    f = filters_of(width)
    conv = lambda c, k: 27 * c * k + 2 * k
    n = conv(1, f[0]) + conv(f[0], f[0])
    for i in range(4):
        n += conv(f[i], f[i + 1]) + conv(f[i + 1], f[i + 1])
    n += 2 * conv(f[4], f[4])
    for i, o in [(f[4], f[4])] + [(f[i + 1], f[i]) for i in reversed(range(4))]:
        n += 8 * i * o + o + conv(2 * o, o) + conv(o, o)
    return n + 3 * f[0] + 3


# --- layouts -------------------------------------------------------------------------------------

def is_transposed(name):
    return "upsample_conv" in name


def to_file(name, t, layout):
    """A parameter (or its gradient) from torch's layout into the file's."""
    if layout == "torch" or t.dim() != 5:
        return t.contiguous()
    # conv (K, C, T, R, S) -> (K, T, R, S, C); convT (Cin, Cout, T, R, S) -> (Cin, T, R, S, Cout)
    return t.permute(0, 2, 3, 4, 1).contiguous()


def from_file(name, t, layout):
    if layout == "torch" or t.dim() != 5:
        return t
    return t.permute(0, 4, 1, 2, 3).contiguous()


def volume_to_file(t, layout):  # (N, C, D, H, W) -> the file's
    return t.contiguous() if layout == "torch" else t.permute(0, 2, 3, 4, 1).contiguous()


def volume_from_file(t, layout):
    if layout == "torch":
        return t
    return t.permute(0, 4, 1, 2, 3).contiguous()


# --- the loss ------------------------------------------------------------------------------------

def dice_ce(logits, label):
    """MLPerf's DiceCELoss (losses.py: to_onehot_y, softmax, no background). logits (N, 3, ...),
    label (N, 1, ...) integers. Returns the loss and dice (N, 2)."""
    y = label[:, 0].long()
    ce = F.cross_entropy(logits, y)
    p = torch.softmax(logits, dim=1)[:, 1:]
    t = F.one_hot(y, num_classes=3).movedim(-1, 1)[:, 1:].to(p.dtype)
    red = tuple(range(2, p.dim()))
    dice = (2.0 * (p * t).sum(red) + SMOOTH) / (t.sum(red) + p.sum(red) + SMOOTH)
    return (torch.mean(1.0 - dice) + ce) / 2, dice


# --- the batch -----------------------------------------------------------------------------------

def random_batch(n, crop, gen):
    """A random image (normal noise plus a brighter blob) and labels: a kidney ellipsoid (1) with a
    tumor (2) inside, per sample; the same shapes as KiTS19's preprocessed crops."""
    D, H, W = crop
    img = torch.randn(n, 1, D, H, W, generator=gen)
    lab = torch.zeros(n, 1, D, H, W, dtype=torch.uint8)
    z, y, x = torch.meshgrid(torch.arange(D), torch.arange(H), torch.arange(W), indexing="ij")
    for i in range(n):
        c = [float(torch.randint(s // 4, 3 * s // 4 + 1, (1,), generator=gen)) for s in crop]
        r = [s / 5 + float(torch.rand(1, generator=gen)) * s / 10 for s in crop]
        q = ((z - c[0]) / r[0]) ** 2 + ((y - c[1]) / r[1]) ** 2 + ((x - c[2]) / r[2]) ** 2
        lab[i, 0][q <= 1] = 1
        lab[i, 0][q <= 0.2] = 2
        img[i, 0] += 1.5 * (q <= 1).float()
    return img, lab


def parse_crop(s):
    v = [int(x) for x in s.split(",")]
    if len(v) == 1:
        v = v * 3
    if len(v) != 3 or min(v) < 32 or any(x % 32 for x in v) or max(v) < 64:
        raise argparse.ArgumentTypeError(
            f"--crop {s}: each side a multiple of 32, one at least 64 (the bottleneck's instance norm needs 2 voxels)")
    return v


# --- one step ------------------------------------------------------------------------------------

def bad(what):
    """A dump that does not fit the model (a tensor missing or of another shape): exit 3."""
    sys.stderr.write("unet3d.py: error: " + json.dumps(what) + "\n")
    sys.exit(3)


def load(path):
    """A dump's tensors and metadata; exit 4 when it cannot be read, 3 when it is not a dump."""
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if n > os.fstat(f.fileno()).st_size - 8:
                raise ValueError(f"a header of {n} bytes at offset 8 runs past the end")
            head = json.loads(f.read(n))
        tensors = load_file(path)
    except OSError as e:
        sys.stderr.write(f"unet3d.py: error: {path}: {e.strerror}\n")
        sys.exit(4)
    except Exception as e:  # not safetensors: a bad header, truncated data
        sys.stderr.write(f"unet3d.py: error: {path}: not a safetensors file ({type(e).__name__}: {e})\n")
        sys.exit(3)
    meta = head.get("__metadata__") or {}
    if meta.get("model") != "unet3d" or "width" not in meta:
        sys.stderr.write(f"unet3d.py: error: {path}: no unet3d metadata (model, width: unet3d.py --init writes them)\n")
        sys.exit(3)
    return tensors, meta


def model_from(tensors, meta, dtype, dev):
    width = int(meta["width"])
    layout = meta.get("layout", "torch")
    m = UNet3D(width)
    sd = {}
    for k, v in m.state_dict().items():
        if k not in tensors:
            bad({"type": "error", "missing": k})
        sd[k] = from_file(k, tensors[k], layout).to(torch.float64)
        if sd[k].shape != v.shape:
            bad({"type": "error", "tensor": k, "shape": list(sd[k].shape), "want": list(v.shape)})
    m = m.to(dtype)
    m.load_state_dict(sd)
    return m.to(dev).train()


def batch_from(tensors, meta, dtype, dev):
    layout = meta.get("layout", "torch")
    img, lab = tensors["batch.image"], tensors["batch.label"]
    if img.dim() != 5 or lab.shape != img.shape:
        bad({"type": "error", "batch": [list(img.shape), list(lab.shape)]})
    return volume_from_file(img, layout).to(dev, dtype), volume_from_file(lab, layout).to(dev)


def torch_step(tensors, meta, dtype, dev, lr, momentum):
    """loss, dice, logits, {name: grad}, {name: weight after SGD} in torch's layout (float64 on the CPU)."""
    m = model_from(tensors, meta, dtype, dev)
    img, lab = batch_from(tensors, meta, dtype, dev)
    logits = m(img)
    loss, dice = dice_ce(logits, lab)
    loss.backward()
    grads = {k: p.grad.detach().double().cpu() for k, p in m.named_parameters()}
    # the reference's optimizer: SGD(momentum, nesterov=True, weight_decay 0), first step (zero buffer)
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=momentum, nesterov=True, weight_decay=0.0)
    opt.step()
    after = {k: p.detach().double().cpu() for k, p in m.named_parameters()}
    return loss.item(), dice.detach().double().cpu(), logits.detach().double().cpu(), grads, after


def rel(a, b):
    d, n = (a.double() - b.double()).norm().item(), b.double().norm().item()
    return d / n if n > 0 else d


def set_precise():
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.deterministic = True


def save(tensors, path, meta):
    """Through a temporary file and a rename: a failed write leaves no partial file."""
    tmp = path + ".tmp"
    try:
        save_file(tensors, tmp, metadata=meta)
        os.replace(tmp, path)
    except Exception as e:  # OSError, or safetensors' own error for an I/O failure
        if os.path.exists(tmp):
            os.unlink(tmp)
        sys.stderr.write(f"unet3d.py: error: cannot write {path}: {getattr(e, 'strerror', None) or e}\n")
        sys.exit(4)


def step_dump(a):
    set_precise()
    t, meta = load(a.step_dump)
    layout = meta.get("layout", "torch")
    dtype = getattr(torch, a.dtype)
    loss, dice, logits, grads, after = torch_step(t, meta, dtype, torch.device(a.device), a.lr, a.momentum)
    out = dict(t)
    out["loss"] = torch.tensor([loss], dtype=dtype)
    out["dice"] = dice.to(dtype)
    out["logits"] = volume_to_file(logits, layout).to(dtype)
    for k in grads:
        out["grad." + k] = to_file(k, grads[k], layout).to(dtype)
        out["after." + k] = to_file(k, after[k], layout).to(dtype)
    meta = dict(meta, step_dtype=a.dtype, lr=repr(a.lr), momentum=repr(a.momentum), nesterov="true")
    save(out, a.out, meta)
    print(json.dumps({"type": "unet3d_step", "loss": loss, "dice": dice.tolist(), "tensors": len(grads),
                      "dtype": a.dtype, "layout": layout, "out": a.out}))
    return 0


def compare(a):
    set_precise()
    t, meta = load(a.compare)
    layout = meta.get("layout", "torch")
    lr = float(meta.get("lr", a.lr))
    mom = float(meta.get("momentum", a.momentum))
    dev = torch.device(a.device)
    want = ["loss"] + ["grad." + k for k, _ in UNet3D(int(meta["width"])).named_parameters()]
    missing = [k for k in want if k not in t]
    if missing:  # before the step: a dump without them is refused at once
        bad({"type": "error", "missing": missing[0], "nmissing": len(missing)})
    loss, dice, logits, grads, after = torch_step(t, meta, getattr(torch, a.dtype), dev, lr, mom)
    out = {"type": "unet3d_compare", "reference": f"torch {a.dtype} on {a.device}", "layout": layout,
           "loss": loss, "ours": t["loss"].double().item(), "tensors": len(grads)}
    out["loss_rel"] = abs(out["ours"] - loss) / max(abs(loss), 1e-30)
    ok = out["loss_rel"] <= a.tol_loss
    if "dice" in t:
        out["dice_abs"] = (t["dice"].double() - dice).abs().max().item()
        ok &= out["dice_abs"] <= a.tol_loss
    if "logits" in t:
        out["logits_rel"] = rel(volume_from_file(t["logits"], layout), logits)
        ok &= out["logits_rel"] <= a.tol_grad
    for pre, ref in (("grad", grads), ("after", after)):
        have = [k for k in ref if f"{pre}.{k}" in t]
        w, wn = 0.0, ""
        d2 = n2 = 0.0
        for k in have:
            ours = from_file(k, t[f"{pre}.{k}"], layout).double()
            if ours.shape != ref[k].shape:
                bad({"type": "error", "tensor": f"{pre}.{k}", "shape": list(ours.shape), "want": list(ref[k].shape)})
            e = rel(ours, ref[k])
            d2 += (ours - ref[k]).norm().item() ** 2
            n2 += ref[k].norm().item() ** 2
            if e >= w:
                w, wn = e, k
        if have:
            out[f"{pre}_rel_max"], out[f"{pre}_worst"] = w, wn
            out[f"{pre}_rel_all"] = (d2 / n2) ** 0.5 if n2 > 0 else d2 ** 0.5
            ok &= w <= a.tol_grad
    if a.dtype == "float64" and not a.no_floor:  # how far torch's own fp32 step is from the same reference
        l32, _, _, g32, _ = torch_step(t, meta, torch.float32, dev, lr, mom)
        errs = {k: rel(g32[k], grads[k]) for k in grads}
        wk = max(errs, key=errs.get)
        out.update(torch_fp32_loss_rel=abs(l32 - loss) / max(abs(loss), 1e-30),
                   torch_fp32_grad_rel_max=errs[wk], torch_fp32_grad_worst=wk)
    out["ok"] = bool(ok)
    print(json.dumps(out))
    return 0 if ok else 1


def fd_check(a):
    """Central differences in float64 against the dump's gradients."""
    t, meta = load(a.fd_check)
    layout = meta.get("layout", "torch")
    m = model_from(t, meta, torch.float64, torch.device("cpu"))
    img, lab = batch_from(t, meta, torch.float64, torch.device("cpu"))
    params = dict(m.named_parameters())
    grads = {}
    for k in params:
        if "grad." + k not in t:
            bad({"type": "error", "missing": "grad." + k})
        grads[k] = from_file(k, t["grad." + k], layout).double()
    gen = torch.Generator().manual_seed(a.seed)
    names = list(params)
    if a.tensors != "all":
        idx = torch.randperm(len(names), generator=gen)[:int(a.tensors)].sort().values.tolist()
        names = [names[i] for i in idx]

    # every ReLU's sign pattern, so that a step that crosses a kink (where the loss has no
    # derivative) is seen and not counted: the step is then made 4x shorter (3 times at most)
    masks = []
    for mod in m.modules():
        if isinstance(mod, nn.ReLU):
            mod.register_forward_hook(lambda _m, _i, out: masks.append(out > 0))

    def loss_at(dirs, s):
        masks.clear()
        with torch.no_grad():
            for k, v in dirs.items():
                params[k].add_(v, alpha=s)
            l, _ = dice_ce(m(img), lab)
            for k, v in dirs.items():
                params[k].sub_(v, alpha=s)
        return l.item(), list(masks)

    l0, base = loss_at({}, 0.0)
    same = lambda ms: all(torch.equal(x, y) for x, y in zip(ms, base))

    def one(dirs):
        eps = a.eps
        for tries in range(4):
            (lp, mp), (lm, mm) = loss_at(dirs, eps), loss_at(dirs, -eps)
            if same(mp) and same(mm):
                break
            eps /= 4
        else:
            return None, None, None, eps
        fd = (lp - lm) / (2 * eps)
        an = sum((grads[k] * v).sum().item() for k, v in dirs.items())
        # the central difference's rounding: ~ u |L| / eps per evaluation, u = 2^-52; 10 u |L| / eps
        # leaves a margin of ~4 over what the check measures at width 2 (the deep blocks'
        # derivatives are ~1e-6, their errors ~5e-10 at eps 1e-6). The error in units of the
        # allowance (<= 1 passes): tol relative plus the rounding.
        atol = 10 * 2.0 ** -52 * abs(l0) / eps
        return fd, an, abs(fd - an) / (a.tol * max(abs(fd), abs(an)) + atol), eps

    groups = [[k] for k in names] if a.groups == "tensors" else block_groups(names)
    worst, wn, rows, kinks = 0.0, "", 0, 0
    for grp in groups + [list(params)]:
        for draw in range(4):  # a direction whose every step length crosses a kink is drawn again
            dirs = {k: torch.randn(params[k].shape, generator=gen, dtype=torch.float64) for k in grp}
            nrm = math.sqrt(sum(v.norm().item() ** 2 for v in dirs.values()))
            fd, an, e, eps = one({k: v / nrm for k, v in dirs.items()})
            if fd is not None:
                break
        label = grp[0] if len(grp) == 1 else grp[0].rsplit(".", 3)[0] + f" ({len(grp)} tensors)"
        if len(grp) == len(params) and len(groups) > 1:
            label = f"all ({len(grp)} tensors)"
        if fd is None:
            e = float("inf")
        kinks += eps < a.eps
        rows += 1
        if a.verbose:
            print(f"{label:<40} eps {eps:.2g} fd {fd} grad {an} err {e:.2f}", file=sys.stderr)
        if e >= worst:
            worst, wn = e, label
    ok = worst <= 1
    print(json.dumps({"type": "unet3d_fd_check", "groups": a.groups, "directions": rows, "eps": a.eps,
                      "tol": a.tol, "shortened": kinks, "err_max": worst, "worst": wn, "ok": ok}))
    return 0 if ok else 1


def block_groups(names):
    """The parameter names by block: input_block, downsample.i, bottleneck, upsample.j, output."""
    out = {}
    for k in names:
        p = k.split(".")
        out.setdefault(".".join(p[:2]) if p[0] in ("downsample", "upsample") else p[0], []).append(k)
    return list(out.values())


def init(a):
    gen = torch.Generator().manual_seed(a.seed)
    m = UNet3D(a.width)
    init_reference(m, gen)
    dtype = getattr(torch, a.dtype)
    out = {k: to_file(k, v.to(dtype), a.layout) for k, v in m.state_dict().items()}
    img, lab = random_batch(a.batch, a.crop, gen)
    out["batch.image"] = volume_to_file(img, a.layout).to(dtype)
    out["batch.label"] = volume_to_file(lab, a.layout)
    meta = {"model": "unet3d", "width": str(a.width), "layout": a.layout, "crop": ",".join(map(str, a.crop)),
            "batch": str(a.batch), "seed": str(a.seed), "init": "reference (torch module defaults)"}
    save(out, a.init, meta)
    return 0


def names(a):
    m = UNet3D(a.width)
    for k, v in m.state_dict().items():
        shape = list(v.shape)
        fshape = list(to_file(k, v, a.layout).shape)
        if isinstance_norm(k):
            ini = "1" if k.endswith("weight") else "0"
        else:
            w = m.state_dict()[k[:-len("bias")] + "weight"] if k.endswith("bias") else v
            fan = w.shape[1] * math.prod(w.shape[2:])
            ini = f"U(+-1/sqrt({fan}))"
        print(f"{k:<36} {'x'.join(map(str, shape)):<16} {'x'.join(map(str, fshape)):<16} {mllog_name(k):<28} {ini}")
    return 0


def check(a):
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    dev = torch.device(a.device)
    m = UNet3D(a.width)
    init_reference(m, gen)
    n = sum(p.numel() for p in m.parameters())
    out = {"type": "unet3d_check", "width": a.width, "filters": filters_of(a.width), "params": n,
           "params_formula": param_count_formula(a.width), "tensors": len(list(m.parameters())),
           "mllog_names": len({mllog_name(k) for k in m.state_dict()})}
    # the init: every conv tensor within its bound and reaching near it; norms exactly 1 / 0
    bad = []
    sd = m.state_dict()
    for k, v in sd.items():
        if isinstance_norm(k):
            if not torch.equal(v, torch.full_like(v, 1.0 if k.endswith("weight") else 0.0)):
                bad.append(k)
            continue
        w = sd[k[:-len("bias")] + "weight"] if k.endswith("bias") else v
        b = 1.0 / math.sqrt(w.shape[1] * math.prod(w.shape[2:]))
        mx = v.abs().max().item()
        if mx > b * (1 + 1e-6) or (v.numel() >= 64 and mx < 0.9 * b):
            bad.append(k)
    out["init_bad"] = bad
    if not a.no_step:
        m = m.to(dev)
        img, lab = random_batch(a.batch, a.crop, gen)
        t0 = time.time()
        loss, dice = dice_ce(m(img.to(dev)), lab.to(dev))
        loss.backward()
        g = math.sqrt(sum(p.grad.double().norm().item() ** 2 for p in m.parameters()))
        out.update(crop=a.crop, batch=a.batch, loss=loss.item(), dice=dice.tolist(), grad_norm=g,
                   grads_finite=all(torch.isfinite(p.grad).all().item() for p in m.parameters()),
                   seconds=round(time.time() - t0, 3))
    print(json.dumps(out))
    ok = n == out["params_formula"] and not bad and out.get("grads_finite", True)
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true")
    g.add_argument("--names", action="store_true")
    g.add_argument("--init", metavar="FILE")
    g.add_argument("--step-dump", metavar="FILE")
    g.add_argument("--compare", metavar="FILE")
    g.add_argument("--fd-check", metavar="FILE")
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--crop", type=parse_crop, default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layout", choices=["torch", "ktrsc"], default="torch")
    p.add_argument("--dtype", choices=["float32", "float64"], default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out")
    p.add_argument("--lr", type=float, default=2.0)  # NVIDIA v1.1's base rate (after warm-up)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--tol-loss", type=float, default=1e-5)
    p.add_argument("--tol-grad", type=float, default=2e-3)
    p.add_argument("--no-floor", action="store_true", help="--compare: skip torch's own fp32 step")
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--tensors", default="all")
    p.add_argument("--groups", choices=["blocks", "tensors"], default="blocks")
    p.add_argument("--no-step", action="store_true", help="--check: the count and the init only")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args()
    if a.width < 1 or (a.batch is not None and a.batch < 1):
        p.error("--width and --batch must be positive")
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        sys.stderr.write("unet3d.py: error: no CUDA device\n")
        return 5
    if save_file is None and not (a.check or a.names):
        sys.stderr.write("unet3d.py: error: safetensors is not installed (pip install safetensors)\n")
        return 77
    if a.step_dump and not a.out:
        p.error("--step-dump needs --out OUT")
    if a.crop is None:
        a.crop = [128] * 3 if a.check and a.width >= 32 else [64] * 3
    if a.batch is None:
        a.batch = 1 if a.check else 2
    if a.dtype is None:
        a.dtype = "float32" if a.init or a.step_dump else "float64"
    if a.check:
        return check(a)
    if a.names:
        return names(a)
    if a.init:
        return init(a)
    if a.step_dump:
        return step_dump(a)
    if a.compare:
        return compare(a)
    return fd_check(a)


if __name__ == "__main__":
    sys.exit(main())
