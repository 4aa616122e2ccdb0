#!/usr/bin/env python3
"""SSD300-ResNet34 (the MLPerf v1.x reference) training in idiomatic PyTorch, as the SPEED peer of
trainkit's ssd training step (issue 30).

  ssd_perf.py [--mode eager|compile] [--compile-mode max-autotune-no-cudagraphs] [--batch 114]
              [--warmup 10] [--iters 20] [--windows 3] [--boxes 1-4] [--width 64] [--classes 81]
              [--amp bf16|none] [--device cuda] [--explain]
  ssd_perf.py --check-match [--seed S]

Times whole training steps on one fixed batch resident on the device and prints one JSON line
{"type": "bench", "impl": "torch-eager"|"torch-compile", "compile_mode", "batch", "images_per_s",
"ms_per_step", "compile_s", ...}.

The batch: NVIDIA's v1.1 per-GPU batch, 114 by default: their one-node SSD result
(training_results_v1.1/NVIDIA/results/dgxa100_ngc21.09_mxnet/ssd/result_*.txt) logs
global_batch_size 912 on one DGX A100 of 8 GPUs (systems/dgxa100_ngc21.09_mxnet.json:
accelerators_per_node 8), 912 / 8 = 114 images a GPU (their code is MXNet; share/workloads/ssd/
config.json takes the same). Random 300x300 images (N(0, 1): as normalized pixels), each with a
random number of random ground-truth boxes (--boxes MIN-MAX, default 1-4, as the benchmark of
tests/gpu/test_ssd_step.c draws) of random labels 1..80, made on the device before timing; the
images are channels_last.

The step, as the reference trains (mlcommons/training single_stage_detector/ssd before v2.0):
  - the model of contrib/peers/ssd.py (ssd300.py's SSD300 on base_model.py's ResNet34 trunk,
    the reference's init; imported, not copied), BatchNorm in training mode;
  - the targets: utils.py's Encoder.encode (IoU of every ground truth with the 8732 default boxes
    of dboxes300_coco, each default box's best ground truth, each ground truth forced onto its
    best default box (IoU 2, the later ground truth winning a shared box, as the reference's
    loop), matched where IoU > 0.5, boxes in xywh) for the whole batch at once on the device
    inside the timed step (the reference encodes on the CPU in its data loader, one image at a
    time; trainkit and NVIDIA's implementations match on the GPU: the work belongs to the step);
    ground truths padded to the batch's most, pads with IoU -1 so they never match;
  - the loss: base_model.py's Loss.forward through contrib/peers/ssd_ops.py's ssd_loss (smooth L1
    of the positives' offsets against the encoded targets with scale_xy 0.1, scale_wh 0.2,
    cross-entropy with hard-negative mining: the 3 x positives highest-loss negatives by a sort
    and a rank, loss normalized per image by its positives, averaged), in fp32 on the model's
    bf16 outputs;
  - torch.optim.SGD, momentum 0.9, weight decay 5e-4 on every tensor (train.py's), lr 1e-3
    (the steady state's speed does not depend on it), fused=True on CUDA; zero_grad(set_to_none).
How the peer runs (the fastest idiomatic PyTorch we know, not a strawman): torch.autocast(bf16)
with fp32 master weights, channels_last model and input, cudnn.benchmark on; --mode compile
wraps the whole loss function (matching, model, loss) in torch.compile (default mode;
--compile-mode names another: max-autotune-no-cudagraphs compiles for many minutes). Compilation
happens in the first warm-up step; its time is reported as compile_s. Steady state: --warmup
steps (not timed), then --windows windows of --iters steps each between two CUDA events, no host
synchronization inside a window; images_per_s = batch / median window ms per step.
--explain adds dynamo's counters (graph breaks and their reasons, graphs, recompilations) to the
line, as bert_perf.py does: where compile is slower than eager, look there first.
--compile-backend eager traces with dynamo but runs the graphs eagerly: on a CPU, where
inductor's compilation of the full model takes many minutes, it shows the graph breaks in seconds.

--check-match compares the batched matcher with ssd_ops.py's per-image transcription of
Encoder.encode (float32, CPU) on random ground truths (a repeated box under another label, a box
equal to a default box): matched boxes bit for bit, labels equal; exit 0 when equal, 1 not.

--device cpu --amp none --width 8 --batch 2 --iters 1 --warmup 1 --windows 1 runs anywhere in a
few seconds: it checks this script, it is not a benchmark.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ssd  # noqa: E402  (the reference model)
import ssd_ops  # noqa: E402  (dboxes300_coco, encode, ssd_loss)
from dlrm_perf import positive  # noqa: E402
from unet3d_perf import Timer  # noqa: E402

NVIDIA_V11_PER_GPU_BATCH = 114  # 912 images over 8 A100s (see above)


def box_range(s):
    try:
        lo, _, hi = s.partition("-")
        lo, hi = int(lo), int(hi or lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN-MAX, got '{s}'")
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(f"expected 1 <= MIN <= MAX, got '{s}'")
    return lo, hi


def synth_targets(n, lo, hi, classes, dev, gen):
    """n images' ground truths, padded: boxes (n, G, 4) ltrb in [0, 1], valid (n, G), labels (n, G)."""
    counts = torch.randint(lo, hi + 1, (n,), generator=gen, device=dev)
    g = hi
    xy = torch.rand(n, g, 2, generator=gen, device=dev) * 0.8
    wh = 0.05 + torch.rand(n, g, 2, generator=gen, device=dev) * 0.6
    boxes = torch.cat([xy, (xy + wh).clamp(max=1.0)], dim=2)
    valid = torch.arange(g, device=dev).unsqueeze(0) < counts.unsqueeze(1)
    labels = torch.randint(1, classes, (n, g), generator=gen, device=dev)
    return boxes, valid, labels


def match(gt, valid, labels, dbox_ltrb, criteria=0.5):
    """Encoder.encode for a batch: gt (N, G, 4) ltrb, valid (N, G), labels (N, G) ->
    gloc (N, 4, D) xywh, glabel (N, D). Per image exactly ssd_ops.encode's arithmetic."""
    n, g = gt.shape[:2]
    a = gt.unsqueeze(2)                      # (N, G, 1, 4)
    b = dbox_ltrb.unsqueeze(0).unsqueeze(0)  # (1, 1, D, 4)
    span = (torch.min(a[..., 2:], b[..., 2:]) - torch.max(a[..., :2], b[..., :2])).clamp(min=0)
    inter = span[..., 0] * span[..., 1]
    wa, wb = a[..., 2:] - a[..., :2], b[..., 2:] - b[..., :2]
    ious = inter / (wa[..., 0] * wa[..., 1] + wb[..., 0] * wb[..., 1] - inter)
    ious = torch.where(valid.unsqueeze(2), ious, torch.full_like(ious, -1.0))  # (N, G, D)
    best_iou, best_gt = ious.max(dim=1)      # (N, D): each default box's best ground truth
    best_db = ious.argmax(dim=2)             # (N, G): each ground truth's best default box
    gi = torch.arange(g, device=gt.device).expand(n, g)
    # best_iou.index_fill_(0, best_db, 2.0); best_gt[best_db[gi]] = gi (the later gi wins)
    forced = torch.full_like(best_gt, -1).scatter_reduce(1, best_db, torch.where(valid, gi, -1), "amax")
    best_iou = torch.where(forced >= 0, torch.full_like(best_iou, 2.0), best_iou)
    best_gt = torch.where(forced >= 0, forced, best_gt)
    keep = best_iou > criteria
    glabel = torch.where(keep, labels.gather(1, best_gt), torch.zeros_like(best_gt))
    box = torch.where(keep.unsqueeze(2), gt.gather(1, best_gt.unsqueeze(2).expand(n, -1, 4)),
                      dbox_ltrb.unsqueeze(0).expand(n, -1, -1))
    gloc = torch.stack([0.5 * (box[..., 0] + box[..., 2]), 0.5 * (box[..., 1] + box[..., 3]),
                        -box[..., 0] + box[..., 2], -box[..., 1] + box[..., 3]], dim=1)
    return gloc, glabel


def check_match(a):
    """The batched matcher against ssd_ops.encode, image by image (float32, CPU)."""
    gen = torch.Generator().manual_seed(a.seed)
    xywh, ltrb = ssd_ops.dboxes300_coco()
    gt, valid, labels = synth_targets(6, 1, 24, 81, torch.device("cpu"), gen)
    gt[1, 3], labels[1, 3] = gt[1, 2], labels[1, 2] % 80 + 1  # the same box twice, another label
    valid[1, :5] = True
    gt[2, 0] = ltrb[5776 + 100]                                 # exactly a default box
    gloc, glabel = match(gt, valid, labels, ltrb)
    bad = 0
    for i in range(gt.shape[0]):
        k = int(valid[i].sum())
        box, lab = ssd_ops.encode(gt[i, :k], labels[i, :k], ltrb)
        nb = int((gloc[i].t().contiguous().view(torch.int32) != box.contiguous().view(torch.int32)).sum())
        nl = int((glabel[i] != lab).sum())
        print(f"image {i}: {k} ground truths, {int((lab > 0).sum())} positives, boxes diff {nb}, labels diff {nl}",
              file=sys.stderr)
        bad += nb + nl
    print(json.dumps({"type": "ssd_check_match", "images": gt.shape[0], "differences": bad}))
    return 0 if bad == 0 else 1


def explain_counters():
    from torch._dynamo.utils import counters
    return {k: {str(r): n for r, n in v.items()} for k, v in counters.items()
            if k in ("graph_break", "stats", "recompiles", "unimplemented")}


def timed_steps(step, dev, warmup, windows, iters):
    """step() warmup times (the first timed alone: compilation), then windows windows of iters
    steps between two CUDA events: the last loss, the first step's and the warm-up's seconds, and
    each window's ms a step (the peak memory statistics reset after the warm-up)."""
    cuda = dev.type == "cuda"
    tm = Timer(dev)
    t0 = time.time()
    loss = step()
    if cuda:
        torch.cuda.synchronize()
    first_s = time.time() - t0
    for _ in range(1, warmup):
        loss = step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(dev)
    warm_s = time.time() - t0
    ms = []
    for _ in range(windows):
        s = tm.mark()
        for _ in range(iters):
            loss = step()
        ms.append(tm.ms(s, tm.mark()) / iters)
    return loss, first_s, warm_s, ms


def train(a, dev):
    cuda = dev.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(a.seed)
    m = ssd.SSD300(a.classes, a.width).to(dev).to(memory_format=torch.channels_last)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=a.lr, momentum=0.9, weight_decay=a.wd, fused=cuda)
    xywh, ltrb = (t.to(dev) for t in ssd_ops.dboxes300_coco())
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    img = torch.randn(a.batch, 3, 300, 300, generator=gen, device=dev).contiguous(memory_format=torch.channels_last)
    gt, valid, labels = synth_targets(a.batch, a.boxes[0], a.boxes[1], a.classes, dev, gen)

    def loss_fn(x, gt, valid, labels):
        with torch.no_grad():
            gloc, glabel = match(gt, valid, labels, ltrb)
        ploc, plabel = m(x)
        return ssd_ops.ssd_loss(ploc.float(), plabel.float(), gloc, glabel, xywh)[0]

    fn = torch.compile(loss_fn, mode=a.compile_mode, backend=a.compile_backend) if a.mode == "compile" else loss_fn

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            loss = fn(img, gt, valid, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    loss, first_s, warm_s, windows = timed_steps(step, dev, a.warmup, a.windows, a.iters)
    med = statistics.median(windows)
    out = {"type": "bench", "impl": "torch-" + a.mode, "compile_mode": a.compile_mode if a.mode == "compile" else None,
           "compile_backend": a.compile_backend if a.mode == "compile" else None,
           "batch": a.batch, "images_per_s": a.batch / (med / 1e3), "ms_per_step": med,
           "ms_per_step_windows": [round(v, 4) for v in windows],
           "compile_s": round(first_s, 3) if a.mode == "compile" else None,
           "first_step_s": round(first_s, 3), "warmup_s": round(warm_s, 3),
           "warmup": a.warmup, "iters": a.iters, "windows": a.windows,
           "width": a.width, "classes": a.classes, "size": 300, "boxes_per_image": list(a.boxes),
           "positives": int(match(gt, valid, labels, ltrb)[1].gt(0).sum()),
           "amp": a.amp, "layout": "channels_last",
           "optimizer": f"sgd momentum 0.9 wd {a.wd}" + (" fused" if cuda else ""),
           "match": "batched on the device, in the step", "loss": float(loss.item()),
           "peak_mem_gib": round(torch.cuda.max_memory_allocated(dev) / 2**30, 2) if cuda else None,
           "input": "one synthetic batch resident on the device (input pipeline excluded)",
           "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if cuda else "cpu"}
    if a.explain:
        out["dynamo"] = explain_counters() if a.mode == "compile" else None
    return out


def main():
    p = argparse.ArgumentParser(formatter_class=argparse.RawDescriptionHelpFormatter,
                                description=__doc__.split("\n")[0], epilog=__doc__)
    p.add_argument("--batch", type=positive, default=NVIDIA_V11_PER_GPU_BATCH)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--compile-mode", help="torch.compile's mode (max-autotune-no-cudagraphs, ...)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile's backend (eager: dynamo's tracing alone, for --explain on a CPU)")
    p.add_argument("--warmup", type=positive, default=10)
    p.add_argument("--iters", type=positive, default=20)
    p.add_argument("--windows", type=positive, default=3)
    p.add_argument("--boxes", type=box_range, default=(1, 4), help="ground truths an image, MIN-MAX")
    p.add_argument("--width", type=positive, default=64)
    p.add_argument("--classes", type=positive, default=81)
    p.add_argument("--amp", choices=["bf16", "none"], default="bf16")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--wd", type=float, default=5e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--threads", type=positive, default=None)
    p.add_argument("--explain", action="store_true", help="dynamo's counters in the line")
    p.add_argument("--check-match", action="store_true", help="the batched matcher against ssd_ops.encode")
    a = p.parse_args()
    if a.classes < 2:
        p.error("--classes: at least 2 (background and one class)")
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.check_match:
        return check_match(a)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.stderr.write("ssd_perf.py: error: no CUDA device (torch.cuda.is_available() is False); "
                         "--device cpu with a tiny width runs anywhere\n")
        return 5
    print(json.dumps(train(a, dev)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
