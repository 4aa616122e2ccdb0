#!/usr/bin/env python3
"""The MLPerf 3D U-Net in idiomatic PyTorch, as the SPEED peer of trainkit's unet3d step and
sliding-window evaluation.

  unet3d_perf.py --mode eager|compile [--batch 2] [--crop 128] [--warmup 10] [--iters 30]
                 [--windows 3] [--compile-mode max-autotune] [--width 32] [--device cuda]
  unet3d_perf.py --eval --mode eager|compile [--cases 42] [--case-shape 256,256,256 |
                 --shapes-file FILE] [--roi 128] [--overlap 0.5] [--sw-batch 4]

Training (the default): times whole training steps (forward, MLPerf's DiceCE loss, backward, the
reference's SGD with Nesterov momentum 0.9, lr 2.0 as NVIDIA's v1.1 logs, no weight decay) and
prints one JSON line {"type": "bench", "impl": "torch-eager"|"torch-compile", ..., "samples_per_s",
"ms_per_iter_median", "peak_mem_gib"}.
How the peer runs (the fastest idiomatic PyTorch we know, not a strawman): the model of
contrib/peers/unet3d.py (the reference's layers, names and init) in channels_last_3d memory
format, torch.autocast(bf16) with fp32 master weights (the loss's softmax and cross-entropy run in
fp32 under autocast), cudnn.benchmark on, torch.optim.SGD(fused=True), zero_grad(set_to_none);
inputs ALREADY ON THE GPU (--nbatches random crops with kidney/tumor labels made on the device
before timing and cycled: no data loader, no augmentation). --mode compile wraps the model and the
loss in torch.compile (default mode; --compile-mode max-autotune etc.); compilation happens in the
warm-up, its time is reported as compile_s. Steady state: --warmup steps (not timed), then
--windows windows of --iters steps each between two CUDA events with no host synchronization
inside a window; samples_per_s = batch / median window ms per step; ms_per_iter_windows lists every
window. peak_mem_gib: torch.cuda.max_memory_allocated over the timed steps (reset after the
warm-up; the warm-up's peak, cuDNN's benchmark trials included, as peak_mem_warmup_gib).

--eval: the sliding-window evaluation as the reference's runtime/inference.py does it for each
case (crop the volume to the stride grid where the remainder is under half a stride, pad it with
-2.2 (inference.py's padding_val) to at least the window and a multiple of the stride, windows of
--roi with stride roi * (1 - overlap), each window's logits times a Gaussian importance map (the
reference's: the cube root of the product of three 1-D Gaussians of std 0.125 roi, divided by its
maximum), summed into the case's logits and normalized by the summed map), then the case's
argmax Dice of the two foreground classes (the reference's DiceScore) and DiceCE loss, as its
evaluate() does; the windows go through the model --sw-batch at a time (the reference: 1), bf16
autocast, channels_last_3d, no gradients. The cases are synthetic (random intensities, a labelled
blob) of --case-shape or the shapes listed in --shapes-file (one "D H W" a line, e.g. the shapes
prep kits19 writes for the 42 evaluation cases), made on the device before timing; --eval-warmup
cases (not timed) first. Prints one JSON line {"type": "bench_eval", ..., "eval_s" (the N
cases), "cases_per_s", "windows", "ms_per_case_median"}. With --mode compile the last batch of
windows of a case is padded to --sw-batch (so the compiled graph sees one shape;
"padded_windows" counts them).

--device cpu --amp none with a tiny shape (--width 4 --crop 64 --batch 1, --roi 64 --case-shape
96,96,96) runs anywhere; it is for tests of this script, not a benchmark.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import unet3d  # noqa: E402  (the model and the loss)
from dlrm_perf import positive  # noqa: E402


def shape3(s):
    try:
        v = [int(x) for x in s.replace(" ", ",").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected D,H,W, got '{s}'")
    if len(v) == 1:
        v = v * 3
    if len(v) != 3 or min(v) < 1:
        raise argparse.ArgumentTypeError(f"expected D,H,W (positive), got '{s}'")
    return v


def synth(n, shape, dev, gen):
    """n volumes (1, 1, D, H, W) of noise with a brighter labelled ellipsoid (1) and core (2)."""
    D, H, W = shape
    img = torch.randn(n, 1, D, H, W, device=dev, generator=gen)
    z = torch.arange(D, device=dev).view(D, 1, 1)
    y = torch.arange(H, device=dev).view(1, H, 1)
    x = torch.arange(W, device=dev).view(1, 1, W)
    lab = torch.zeros(n, 1, D, H, W, dtype=torch.uint8, device=dev)
    for i in range(n):
        c = [(0.3 + 0.4 * torch.rand(1, device=dev, generator=gen).item()) * s for s in shape]
        r = [s / 6 for s in shape]
        q = ((z - c[0]) / r[0]) ** 2 + ((y - c[1]) / r[1]) ** 2 + ((x - c[2]) / r[2]) ** 2
        lab[i, 0] = (q <= 1).to(torch.uint8) + (q <= 0.2).to(torch.uint8)
        img[i, 0] += 1.5 * (q <= 1).float()
    return img, lab


def gaussian_map(roi, dev):
    """The reference's importance map: cbrt(g(i) g(j) g(k)) / max, g(i) = exp(-(i - (n-1)/2)^2 / 2 s^2),
    s = 0.125 n (scipy.signal.gaussian(n, s))."""
    maps = []
    for n in roi:
        i = torch.arange(n, dtype=torch.float64) - (n - 1) / 2
        maps.append(torch.exp(-0.5 * (i / (0.125 * roi[0])) ** 2))  # the reference uses roi[0]'s std
    g = maps[0].view(-1, 1, 1) * maps[1].view(1, -1, 1) * maps[2].view(1, 1, -1)
    g = torch.pow(g, 1.0 / 3)
    return (g / g.max()).float().to(dev)


def dice_score(logits, label):
    """The reference's DiceScore: argmax, one-hot both, no background; (N, 2)."""
    pred = F.one_hot(logits.argmax(1), 3).movedim(-1, 1)[:, 1:].float()
    t = F.one_hot(label[:, 0].long(), 3).movedim(-1, 1)[:, 1:].float()
    red = tuple(range(2, pred.dim()))
    return (2.0 * (pred * t).sum(red) + 1e-6) / (t.sum(red) + pred.sum(red) + 1e-6)


def sliding_window(fwd, img, lab, roi, overlap, sw_batch, pad_batch, gmap):
    """One case: the reference's crop, pad, windows, Gaussian weighting; returns logits, label,
    windows run, windows padded."""
    shape = list(img.shape[2:])
    strides = [int(roi[i] * (1 - overlap)) for i in range(3)]
    rem = [shape[i] % strides[i] for i in range(3)]
    rem = [rem[i] if rem[i] < strides[i] // 2 else 0 for i in range(3)]
    sl = tuple(slice(rem[i] // 2, shape[i] - (rem[i] - rem[i] // 2)) for i in range(3))
    img, lab = img[(..., *sl)], lab[(..., *sl)]
    shape = list(img.shape[2:])
    b = [(strides[i] - shape[i] % strides[i]) % strides[i] for i in range(3)]
    b = [b[i] if shape[i] + b[i] >= roi[i] else b[i] + strides[i] for i in range(3)]
    pads = [b[2] // 2, b[2] - b[2] // 2, b[1] // 2, b[1] - b[1] // 2, b[0] // 2, b[0] - b[0] // 2]
    img = F.pad(img, pads, mode="constant", value=-2.2)
    full = list(img.shape[2:])
    n = [(full[i] - roi[i]) // strides[i] + 1 for i in range(3)]
    result = torch.zeros(1, 3, *full, device=img.device)
    norm = torch.zeros(1, 1, *full, device=img.device)
    starts = [(i * strides[0], j * strides[1], k * strides[2])
              for i in range(n[0]) for j in range(n[1]) for k in range(n[2])]
    padded = 0
    for s in range(0, len(starts), sw_batch):
        grp = starts[s:s + sw_batch]
        x = torch.cat([img[..., i:i + roi[0], j:j + roi[1], k:k + roi[2]] for i, j, k in grp])
        if pad_batch and len(grp) < sw_batch:
            padded += sw_batch - len(grp)
            x = torch.cat([x, x[:1].expand(sw_batch - len(grp), *x.shape[1:])])
        x = x.contiguous(memory_format=torch.channels_last_3d)
        y = fwd(x).float()
        for w, (i, j, k) in enumerate(grp):
            result[..., i:i + roi[0], j:j + roi[1], k:k + roi[2]] += y[w:w + 1] * gmap
            norm[..., i:i + roi[0], j:j + roi[1], k:k + roi[2]] += gmap
    result /= norm
    result = result[..., pads[4]:shape[0] + pads[4], pads[2]:shape[1] + pads[2], pads[0]:shape[2] + pads[0]]
    return result, lab, len(starts), padded


def no_cuda(dev):
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.stderr.write("unet3d_perf.py: error: no CUDA device (torch.cuda.is_available() is False); "
                         "--device cpu with a tiny shape runs anywhere\n")
        return True
    return False


class Timer:
    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def ms(self, a, b):
        if self.cuda:
            b.synchronize()
            return a.elapsed_time(b)
        return (b - a) * 1e3


def common(a, dev):
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(a.seed)
    m = unet3d.UNet3D(a.width).to(dev).to(memory_format=torch.channels_last_3d)
    return m


def train(a, dev):
    m = common(a, dev)
    opt = torch.optim.SGD(m.parameters(), lr=a.lr, momentum=0.9, nesterov=True, weight_decay=0.0,
                          fused=dev.type == "cuda")
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    data = [synth(a.batch, a.crop, dev, gen) for _ in range(a.nbatches)]
    data = [(x.contiguous(memory_format=torch.channels_last_3d), y) for x, y in data]

    def loss_fn(x, y):
        return unet3d.dice_ce(m(x), y)[0]

    fn = torch.compile(loss_fn, mode=a.compile_mode) if a.mode == "compile" else loss_fn

    def step(i):
        x, y = data[i % a.nbatches]
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            loss = fn(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    cuda = dev.type == "cuda"
    tm = Timer(dev)
    t0 = time.time()
    step(0)
    if cuda:
        torch.cuda.synchronize()
    first_s = time.time() - t0
    for i in range(1, a.warmup):
        step(i)
    if cuda:
        torch.cuda.synchronize()
    warm_s = time.time() - t0
    peak_warm = torch.cuda.max_memory_allocated(dev) / 2**30 if cuda else None
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    windows = []
    for w in range(a.windows):
        s = tm.mark()
        for i in range(a.iters):
            loss = step(a.warmup + w * a.iters + i)
        windows.append(tm.ms(s, tm.mark()) / a.iters)
    med = statistics.median(windows)
    out = {"type": "bench", "impl": "torch-" + a.mode, "compile_mode": a.compile_mode if a.mode == "compile" else None,
           "batch": a.batch, "crop": a.crop, "width": a.width, "amp": a.amp, "layout": "channels_last_3d",
           "optimizer": "sgd nesterov 0.9" + (" fused" if cuda else ""), "warmup": a.warmup, "iters": a.iters, "windows": a.windows,
           "samples_per_s": a.batch / (med / 1e3), "ms_per_iter_median": med,
           "ms_per_iter_windows": [round(v, 4) for v in windows], "loss": float(loss.item()),
           "first_step_s": round(first_s, 3), "warmup_s": round(warm_s, 3),
           "compile_s": round(first_s, 3) if a.mode == "compile" else None,
           "peak_mem_gib": round(torch.cuda.max_memory_allocated(dev) / 2**30, 2) if cuda else None,
           "peak_mem_warmup_gib": round(peak_warm, 2) if cuda else None,
           "input": "synthetic batches resident on the device (input pipeline excluded)",
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if cuda else "cpu"}
    print(json.dumps(out), flush=True)
    return 0


def read_shapes(path):
    shapes = []
    try:
        f = open(path)
    except OSError as e:
        sys.stderr.write(f"unet3d_perf.py: error: {path}: {e.strerror}\n")
        sys.exit(4)
    with f:
        for no, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                shapes.append(shape3(line.strip()))
            except argparse.ArgumentTypeError as e:
                sys.stderr.write(f"unet3d_perf.py: error: {path}:{no}: {e}\n")
                sys.exit(3)
    if not shapes:
        sys.stderr.write(f"unet3d_perf.py: error: {path}: no shapes\n")
        sys.exit(3)
    return shapes


def evaluate(a, dev):
    m = common(a, dev).eval()
    fwd = torch.compile(m, mode=a.compile_mode) if a.mode == "compile" else m
    roi = [a.roi] * 3
    gmap = gaussian_map(roi, dev)
    shapes = read_shapes(a.shapes_file) if a.shapes_file else [a.case_shape] * a.cases
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    # the distinct shapes' volumes made once (a case's time does not depend on its values)
    vols = {tuple(s): synth(1, s, dev, gen) for s in shapes}
    cuda = dev.type == "cuda"
    tm = Timer(dev)

    def case(shape):
        img, lab = vols[tuple(shape)]
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            logits, lab, nw, npad = sliding_window(fwd, img, lab, roi, a.overlap, a.sw_batch,
                                                   a.mode == "compile", gmap)
            loss, _ = unet3d.dice_ce(logits, lab)
            score = dice_score(logits, lab)
        return nw, npad, loss, score

    t0 = time.time()
    for s in shapes[:a.eval_warmup]:
        case(s)
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(dev)
    warm_s = time.time() - t0
    per, windows, padded = [], 0, 0
    start = tm.mark()
    for s in shapes:
        c0 = tm.mark()
        nw, npad, loss, score = case(s)
        per.append((c0, tm.mark()))
        windows += nw
        padded += npad
    total = tm.ms(start, tm.mark())
    ms = [tm.ms(x, y) for x, y in per]
    out = {"type": "bench_eval", "impl": "torch-" + a.mode, "compile_mode": a.compile_mode if a.mode == "compile" else None,
           "cases": len(shapes), "shapes": sorted({"x".join(map(str, s)) for s in shapes}), "roi": a.roi,
           "overlap": a.overlap, "sw_batch": a.sw_batch, "width": a.width, "amp": a.amp,
           "windows": windows, "padded_windows": padded, "eval_s": total / 1e3,
           "cases_per_s": len(shapes) / (total / 1e3), "windows_per_s": windows / (total / 1e3),
           "ms_per_case_median": statistics.median(ms), "warmup_s": round(warm_s, 3),
           "last_loss": float(loss.item()), "last_dice": [float(v) for v in score[0]],
           "peak_mem_gib": round(torch.cuda.max_memory_allocated(dev) / 2**30, 2) if cuda else None,
           "input": "synthetic volumes resident on the device (loading excluded)",
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if cuda else "cpu"}
    print(json.dumps(out), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--compile-mode", default=None, help="torch.compile's mode (max-autotune, ...)")
    p.add_argument("--eval", action="store_true", help="time the sliding-window evaluation instead")
    p.add_argument("--amp", choices=["bf16", "none"], default="bf16",
                   help="none: fp32 (for CPU tests: bf16 3-D convolutions are very slow on the CPU)")
    p.add_argument("--width", type=positive, default=32)
    p.add_argument("--batch", type=positive, default=2)
    p.add_argument("--crop", type=unet3d.parse_crop, default=[128] * 3)
    p.add_argument("--warmup", type=positive, default=10)
    p.add_argument("--iters", type=positive, default=20)
    p.add_argument("--windows", type=positive, default=3)
    p.add_argument("--nbatches", type=positive, default=2)
    p.add_argument("--lr", type=float, default=2.0)
    p.add_argument("--cases", type=positive, default=42)
    p.add_argument("--case-shape", type=shape3, default=[256] * 3)
    p.add_argument("--shapes-file")
    p.add_argument("--roi", type=positive, default=128)
    p.add_argument("--overlap", type=float, default=0.5)
    p.add_argument("--sw-batch", type=positive, default=4)
    p.add_argument("--eval-warmup", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--threads", type=positive, default=None)
    a = p.parse_args()
    if not 0 <= a.overlap < 1 or int(a.roi * (1 - a.overlap)) < 1:
        p.error(f"--overlap {a.overlap}: in [0, 1) with a stride of at least 1")
    if a.roi % 32:
        p.error(f"--roi {a.roi}: a multiple of 32 (the network's five halvings)")
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if no_cuda(dev):
        return 5
    return evaluate(a, dev) if a.eval else train(a, dev)


if __name__ == "__main__":
    sys.exit(main())
