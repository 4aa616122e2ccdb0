#!/usr/bin/env python3
"""SSD300's evaluation post-processing in PyTorch, against trainkit's CPU reference.

Two peers of kernels/ssd_nms_ref.c on the same random inputs, fed to build/tests/unit/test_ssd_nms
in its driver mode (TK_SSD_NMS_DRIVE):
  - "reference": a transcription of the MLPerf v1.x reference (mlcommons/training
    single_stage_detector/ssd/utils.py before v2.0: DefaultBoxes/dboxes300_coco,
    Encoder.scale_back_batch, decode_single with criteria 0.5, max_output 200, max_num 200 and
    nms_valid_thresh 0.05 as train.py's coco_eval calls it), with its sorts made stable
    (torch.sort(stable=True)), which is how kernels/ssd_nms.h closes the reference's ties;
  - "torchvision": the same filter and per-class top 200, then torchvision.ops.batched_nms and
    the best 200 (an independent NMS; it suppresses IoU > 0.5 where the reference does >= 0.5,
    which random inputs never meet).
The inputs come anchors-major, loc (N, A, 4) and conf (N, A, C): the reference's ploc and plabel
permuted, as its scale_back_batch does first.

  ssd_eval.py check DRIVER [--perturb]

Cases: SSD300 logits in fp32 and in bf16 (boxes within 2e-6, scores within 1e-5 relative, labels
and counts exact; the exp and the softmax's sum order differ from torch's by an ulp), and
quantised probabilities full of ties with zero width/height offsets (everything exact there: the
tie rules). One line per case and peer, "NAME  DETAIL  ok" (or FAIL); exit 0 when all pass, 1
when one fails, 2 when the driver fails. --perturb runs the peers with the reference's
decode_batch default criteria 0.45 instead of coco_eval's 0.5 (a wrong oracle the check must
catch).

  ssd_eval.py check-batched

The time mode's batched post-processing (below) against the two per-image peers above on random
SSD300 logits of 3 images (one class over max_num candidates, one image with few): the same
detections in the same order, scores and boxes within 1e-6; one line per image and peer, exit 0
when all match, 1 not.

  ssd_eval.py time --coco DIR [--images N] [--batch 64] [--mode eager|compile] [--checkpoint CKPT]
                   [--width 64] [--amp bf16|none] [--device cuda] [--logit-scale 1] [--no-cocoeval]

The SPEED peer of trainkit's SSD evaluation (issue 30; contrib/bench/ssd.sh runs it): the
reference's coco_eval (train.py before v2.0) done the fast PyTorch way on DIR, a COCO 2017 layout
(DIR/val2017/*.jpg, DIR/annotations/instances_val2017.json: what `prep synth coco -o DIR`
writes). The first --images images (by id; 0: all) are decoded (torchvision.io.decode_jpeg, on
the GPU (nvJPEG) when the device is one),
resized to 300x300 (bilinear, antialiased: the reference's Resize), normalized with ImageNet's
mean and std and kept on the device, channels_last: that load is reported (load_s), not timed.
Timed, batch by batch of --batch images: the model of ssd.py in eval mode (BatchNorm's running
statistics; bf16 autocast, channels_last; --mode compile: torch.compile, the last batch padded
to --batch), then the post-processing on the device for the whole batch at once: scale_back
(Encoder.scale_back_batch: offsets x 0.1 / 0.2 on the default boxes, softmax), per image and
class the best 200 scores above 0.05 (decode_single's max_num and nms_valid_thresh), one
torchvision.ops.batched_nms over the batch (IoU 0.5, coco_eval's criteria; torchvision
suppresses IoU > 0.5 where the reference does >= 0.5), each image's best 200 (max_output), and
the detections to the host as the reference's rows (image id, x, y, w, h in the image's pixels,
score, COCO category id); then pycocotools: loadRes, COCOeval bbox evaluate, accumulate,
summarize (its table goes to stderr). One JSON line {"type": "bench_eval", "impl", "images",
"forward_s", "nms_s" (post-processing and the copy to the host), "infer_s" (both),
"cocoeval_s", "total_s" (infer_s + cocoeval_s), "images_per_s" (images / total_s),
"candidates", "detections", "map", ...}; cocoeval_s and map are null with --no-cocoeval or
without pycocotools. --checkpoint: a trainkit SSD checkpoint or ssd.py --init file (the
reference's tensor names; 4-D weights in (K, R, S, C) or torch's (K, C, R, S)); without one, the
reference's random init, whose near-uniform softmax leaves few scores above 0.05, so NMS has
little work: --logit-scale S multiplies the class logits first (S = 8 gives a trained model's
thousands of candidates an image; the same on both sides only if ours does the same).
--device cpu --amp none --width 8 --images 4 --batch 2 runs anywhere (a check of the script).
"""
import argparse
import contextlib
import itertools
import json
import math
import os
import struct
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

G = torch.Generator().manual_seed(30)
torch.set_num_threads(1)  # tiny tensors, many of them


def dboxes300():
    """DefaultBoxes(300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300], [21, 45, 99, 153,
    207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]) in (cx, cy, w, h), clamped."""
    feat, steps = [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300]
    scales, ratios = [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
    out = []
    for m, f in enumerate(feat):
        fk = 300 / steps[m]
        s1, s2 = scales[m] / 300, scales[m + 1] / 300
        sizes = [(s1, s1), (math.sqrt(s1 * s2), math.sqrt(s1 * s2))]
        for a in ratios[m]:
            sizes += [(s1 * math.sqrt(a), s1 / math.sqrt(a)), (s1 / math.sqrt(a), s1 * math.sqrt(a))]
        for w, h in sizes:
            for i, j in itertools.product(range(f), repeat=2):
                out.append(((j + 0.5) / fk, (i + 0.5) / fk, w, h))
    return torch.tensor(out).clamp_(min=0, max=1)


def scale_back(loc, conf, dbox, softmax):
    """Encoder.scale_back_batch on anchors-major inputs (fp32, operation by operation)."""
    b = loc.clone()
    d = dbox.unsqueeze(0)
    b[:, :, :2] = 0.1 * b[:, :, :2]
    b[:, :, 2:] = 0.2 * b[:, :, 2:]
    b[:, :, :2] = b[:, :, :2] * d[:, :, 2:] + d[:, :, :2]
    b[:, :, 2:] = b[:, :, 2:].exp() * d[:, :, 2:]
    l, t = b[:, :, 0] - 0.5 * b[:, :, 2], b[:, :, 1] - 0.5 * b[:, :, 3]
    r, bt = b[:, :, 0] + 0.5 * b[:, :, 2], b[:, :, 1] + 0.5 * b[:, :, 3]
    return torch.stack([l, t, r, bt], dim=-1), (F.softmax(conf, dim=-1) if softmax else conf)


def iou(boxes, box):
    """calc_iou_tensor(boxes, box[None]) squeezed."""
    lt = torch.max(boxes[:, :2], box[:2])
    rb = torch.min(boxes[:, 2:], box[2:])
    dl = rb - lt
    dl[dl < 0] = 0
    inter = dl[:, 0] * dl[:, 1]
    a1 = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    a2 = (box[2] - box[0]) * (box[3] - box[1])
    return inter / (a1 + a2 - inter)


def decode_single(bboxes, scores, criteria, max_output=200, max_num=200, thresh=0.05):
    """The reference's decode_single, stable sorts; [] instead of its exception when empty."""
    bo, so, lo = [], [], []
    for i in range(1, scores.shape[1]):
        sc = scores[:, i]
        mask = sc > thresh
        bb, sc = bboxes[mask, :], sc[mask]
        if sc.numel() == 0:
            continue
        _, idx = sc.sort(dim=0, stable=True)
        idx = idx[-max_num:]
        cand = []
        while idx.numel() > 0:
            k = idx[-1].item()
            idx = idx[iou(bb[idx, :], bb[k, :]) < criteria]
            cand.append(k)
        bo.append(bb[cand, :])
        so.append(sc[cand])
        lo += [i] * len(cand)
    if not so:
        return []
    bo, so, lo = torch.cat(bo), torch.cat(so), torch.tensor(lo)
    _, ids = so.sort(dim=0, stable=True)
    ids = ids[-max_output:]
    return [(int(lo[j]), float(so[j]), bo[j].tolist()) for j in ids.tolist()]


def decode_torchvision(bboxes, scores, criteria, max_output=200, max_num=200, thresh=0.05):
    from torchvision.ops import batched_nms
    bs, ss, ls = [], [], []
    for i in range(1, scores.shape[1]):
        sc = scores[:, i]
        keep = (sc > thresh).nonzero().squeeze(1)
        top = sc[keep].argsort(descending=True, stable=True)[:max_num]
        keep = keep[top]
        bs.append(bboxes[keep]), ss.append(sc[keep]), ls.append(torch.full((keep.numel(),), i))
    b, s, lab = torch.cat(bs), torch.cat(ss), torch.cat(ls)
    if s.numel() == 0:
        return []
    k = batched_nms(b, s, lab, criteria)[:max_output]  # kept, by score descending
    return [(int(lab[j]), float(s[j]), b[j].tolist()) for j in reversed(k.tolist())]


def f32(x):  # the fp32 value a %.9g text stands for
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def run_driver(driver, header, tensors):
    text = " ".join(str(v) for v in header) + "\n" + "\n".join(
        " ".join(f"{v:.9g}" for v in t.reshape(-1).tolist()) for t in tensors) + "\n"
    r = subprocess.run([driver], input=text, capture_output=True, text=True,
                       env={"TK_SSD_NMS_DRIVE": "1", "PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        sys.stderr.write(f"ssd_eval.py: the driver failed (exit {r.returncode}): {r.stderr}")
        sys.exit(2)
    lines, out, i = r.stdout.split("\n"), [], 0
    for _ in range(header[0]):
        n = int(lines[i])
        rows = [lines[i + 1 + j].split() for j in range(n)]
        out.append([(int(x[0]), f32(x[1]), [f32(v) for v in x[2:6]]) for x in rows])
        i += 1 + n
    return out


def compare(got, want, box_tol, score_tol):
    """Worst differences of two detection lists (None when counts or labels differ)."""
    if len(got) != len(want) or any(g[0] != w[0] for g, w in zip(got, want)):
        return None
    ds = max((abs(g[1] - w[1]) / w[1] for g, w in zip(got, want)), default=0.0)
    db = max((abs(a - b) for g, w in zip(got, want) for a, b in zip(g[2], w[2])), default=0.0)
    return ds, db, ds <= score_tol and db <= box_tol


def report(name, results, peers, box_tol, score_tol):
    ok = True
    for peer, want in peers:
        worst, n = [0.0, 0.0], 0
        good = True
        for g, w in zip(results, want):
            c = compare(g, w, box_tol, score_tol)
            n += len(g)
            if c is None:
                good = False
                worst = None
                break
            worst = [max(worst[0], c[0]), max(worst[1], c[1])]
            good &= c[2]
        detail = "counts/labels differ" if worst is None else \
            f"{n} detections, score rel {worst[0]:.2g}, box {worst[1]:.2g}"
        print(f"{name}/{peer}  {detail}  {'ok' if good else 'FAIL'}")
        ok &= good
    return ok


def case_logits(driver, dbox, crit, bf16):
    N, A, C = 1, dbox.shape[0], 81
    loc = torch.randn(N, A, 4, generator=G)
    conf = torch.randn(N, A, C, generator=G) * 1.5
    conf[:, :, 1] += 3  # class 1: more than max_num candidates
    if bf16:
        loc, conf = loc.bfloat16().float(), conf.bfloat16().float()
    res = run_driver(driver, [N, A, C, 1, 200, 200, "bf16" if bf16 else "f32"], [dbox, loc, conf])
    bx, pr = scale_back(loc, conf, dbox, True)
    peers = [("reference", [decode_single(bx[n], pr[n], crit) for n in range(N)]),
             ("torchvision", [decode_torchvision(bx[n], pr[n], crit) for n in range(N)])]
    return report("logits-" + ("bf16" if bf16 else "f32"), res, peers, 2e-6, 1e-5)


def case_ties(driver, dbox, crit):
    N, A, C = 2, dbox.shape[0], 21
    loc = torch.randn(N, A, 4, generator=G)
    loc[:, :, 2:] = 0  # widths and heights as the default boxes: exp(0) = 1 on both sides
    conf = torch.randint(0, 8, (N, A, C), generator=G).float() / 32  # ties everywhere
    res = run_driver(driver, [N, A, C, 0, 200, 200, "f32"], [dbox, loc, conf])
    bx, pr = scale_back(loc, conf, dbox, False)
    peers = [("reference", [decode_single(bx[n], pr[n], crit) for n in range(N)])]
    return report("ties-exact", res, peers, 0.0, 0.0)


# ---- time: the peer's evaluation, timed ----

def die(code, msg):
    sys.stderr.write(f"ssd_eval.py: error: {msg}\n")
    sys.exit(code)


def load_checkpoint(model, path):
    """The reference-named tensors of a safetensors file into the model (exit 3 when one is missing
    or of another shape, 4 when the file cannot be read); returns the count of tensors left over."""
    from safetensors.torch import load_file
    try:
        t = load_file(path)
    except OSError as e:
        die(4, f"{path}: {e.strerror or e}")
    except Exception as e:
        die(3, f"{path}: not a safetensors file ({type(e).__name__}: {e})")
    sd, used = {}, 0
    for k, v in model.state_dict().items():
        if k.endswith("num_batches_tracked"):
            sd[k] = v
            continue
        if k not in t:
            die(3, f"{path}: no tensor {k}")
        x = t[k]
        if x.shape != v.shape and x.dim() == 4 and x.permute(0, 3, 1, 2).shape == v.shape:
            x = x.permute(0, 3, 1, 2)  # trainkit's (K, R, S, C)
        if x.shape != v.shape:
            die(3, f"{path}: {k} is {list(x.shape)}, the model's {list(v.shape)}")
        sd[k] = x.to(v.dtype).contiguous()
        used += 1
    model.load_state_dict(sd)
    return len(t) - used


def load_images(d, images, dev):
    """The first `images` images of DIR's val2017 by id: (N, 3, 300, 300) normalized on dev, and
    each one's (id, width, height)."""
    import torchvision.io as tio
    import torchvision.transforms.functional as TF
    ann = os.path.join(d, "annotations", "instances_val2017.json")
    try:
        with open(ann) as f:
            gt = json.load(f)
    except OSError as e:
        die(4, f"{ann}: {e.strerror}")
    except ValueError as e:
        die(3, f"{ann}: not JSON ({e})")
    recs = sorted(gt.get("images", []), key=lambda r: r["id"])[:images or None]
    if not recs:
        die(3, f"{ann}: no images")
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    mean, std = mean.to(dev), std.to(dev)
    out = torch.empty(len(recs), 3, 300, 300, device=dev).contiguous(memory_format=torch.channels_last)
    meta = [(r["id"], r["width"], r["height"]) for r in recs]
    gpu = dev.type == "cuda"  # nvJPEG through torchvision, 64 files a call; the CPU where it fails
    for lo in range(0, len(recs), 64):
        paths = [os.path.join(d, "val2017", r["file_name"]) for r in recs[lo:lo + 64]]
        data = []
        for path in paths:
            try:
                data.append(tio.read_file(path))
            except RuntimeError as e:
                die(4, f"{path}: {e}")
        imgs = None
        if gpu:
            try:
                imgs = tio.decode_jpeg(data, mode=tio.ImageReadMode.RGB, device=dev)
            except RuntimeError as e:
                sys.stderr.write(f"ssd_eval.py: decoding on the GPU failed ({e}): decoding on the CPU\n")
                gpu = False
        if imgs is None:
            imgs = []
            for path, x in zip(paths, data):
                try:
                    imgs.append(tio.decode_jpeg(x, mode=tio.ImageReadMode.RGB))
                except RuntimeError as e:
                    die(3, f"{path}: {e}")
        for i, img in enumerate(imgs):
            img = TF.resize(img.to(dev), [300, 300], antialias=True).float() / 255
            out[lo + i] = (img - mean) / std
    cats = sorted(c["id"] for c in gt.get("categories", []))
    return ann, out, meta, cats


def postprocess(ploc, plabel, dbox, scale, thresh=0.05, max_num=200, max_output=200, criteria=0.5):
    """The batch's detections: image index, label, score, ltrb box (host tensors) and the count of
    candidates, as decode_single does per image and class, with one batched_nms."""
    from torchvision.ops import batched_nms
    n, c = plabel.shape[0], plabel.shape[1]
    loc, conf = ploc.float().permute(0, 2, 1), plabel.float().permute(0, 2, 1)
    boxes, prob = scale_back(loc, conf * scale if scale != 1 else conf, dbox, True)
    sc = prob[:, :, 1:].permute(0, 2, 1)                      # (N, C-1, A)
    val, idx = sc.topk(min(max_num, sc.shape[2]), dim=2)     # each class's best, descending
    keep = (val > thresh).nonzero()                          # (M, 3): image, class-1, rank
    img, cls = keep[:, 0], keep[:, 1]
    score = val[img, cls, keep[:, 2]]
    box = boxes[img, idx[img, cls, keep[:, 2]]]
    k = batched_nms(box, score, img * c + cls, criteria)     # kept, by score descending
    k = k[torch.sort(img[k], stable=True)[1]]                # by image, score descending within
    first = torch.searchsorted(img[k], img[k], right=False)
    k = k[torch.arange(k.numel(), device=k.device) - first < max_output]
    return img[k].cpu(), (cls[k] + 1).cpu(), score[k].cpu(), box[k].cpu(), keep.shape[0]


def check_batched():
    """postprocess (the batch at once, as the time mode runs it) against decode_single and
    decode_torchvision image by image, on random SSD300 logits: the same detections in the same
    order, scores and boxes within 1e-6. Exit 0 when equal, 1 not."""
    dbox = dboxes300()
    n, c, ok = 3, 81, True
    ploc = torch.randn(n, 4, dbox.shape[0], generator=G)
    plabel = torch.randn(n, c, dbox.shape[0], generator=G) * 1.5
    plabel[0, 1] += 3    # class 1 of image 0: more than max_num candidates
    plabel[2] *= 0.05   # image 2: near-uniform scores under 0.05 but 40 boxes of class 5
    plabel[2, 5, :40] += 6
    img, lab, sc, box, cand = postprocess(ploc, plabel, dbox, 1.0)
    bx, pr = scale_back(ploc.permute(0, 2, 1), plabel.permute(0, 2, 1), dbox, True)
    for i in range(n):
        sel = img == i
        got = list(zip(lab[sel].tolist(), sc[sel].tolist(), box[sel].tolist()))[::-1]  # ascending
        for peer, want in (("reference", decode_single(bx[i], pr[i], 0.5)),
                           ("torchvision", decode_torchvision(bx[i], pr[i], 0.5))):
            r = compare(got, want, 1e-6, 1e-6)
            good = r is not None and r[2]
            ok &= good
            print(f"batched/{peer} image {i}  {len(got)} detections of {len(want)}  {'ok' if good else 'FAIL'}")
    return 0 if ok else 1


def time_eval(argv):
    p = argparse.ArgumentParser(prog="ssd_eval.py time", description="the peer's SSD evaluation, timed")
    p.add_argument("--coco", required=True, metavar="DIR")
    p.add_argument("--images", type=int, default=0, help="the first N images by id (0: all)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--compile-mode")
    p.add_argument("--checkpoint")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--amp", choices=["bf16", "none"], default="bf16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--logit-scale", type=float, default=1.0)
    p.add_argument("--no-cocoeval", action="store_true")
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args(argv)
    if a.batch < 1 or a.images < 0 or a.width < 1:
        p.error("--batch and --width must be positive, --images not negative")
    torch.set_num_threads(a.threads or os.cpu_count() or 1)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        die(5, "no CUDA device (torch.cuda.is_available() is False); --device cpu with a tiny width runs anywhere")
    cuda = dev.type == "cuda"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ssd  # noqa: E402  (the reference model)
    coco = None
    if not a.no_cocoeval:
        try:
            from pycocotools.coco import COCO
            from pycocotools.cocoeval import COCOeval
            coco = True
        except ImportError:
            sys.stderr.write("ssd_eval.py: pycocotools is not installed: no COCOeval (cocoeval_s null)\n")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    t0 = time.perf_counter()
    ann, x, meta, cats = load_images(a.coco, a.images, dev)
    load_s = time.perf_counter() - t0
    m = ssd.SSD300(81, a.width)
    extra = load_checkpoint(m, a.checkpoint) if a.checkpoint else None
    m = m.to(dev).to(memory_format=torch.channels_last).eval()
    fwd = torch.compile(m, mode=a.compile_mode) if a.mode == "compile" else m
    dbox = dboxes300().to(dev)
    t0 = time.perf_counter()
    gt = None
    if coco:
        with contextlib.redirect_stdout(sys.stderr):
            gt = COCO(ann)
    coco_load_s = time.perf_counter() - t0
    n = x.shape[0]

    def infer(lo, hi):
        xb = x[lo:hi]
        if a.mode == "compile" and hi - lo < a.batch:  # one shape for the compiled graph
            xb = torch.cat([xb, xb[:1].expand(a.batch - (hi - lo), *xb.shape[1:])])
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp == "bf16"):
            ploc, plabel = fwd(xb)
        return ploc[:hi - lo], plabel[:hi - lo]

    t0 = time.perf_counter()  # warm-up (compilation, cuDNN's choices): one batch, not timed
    with torch.no_grad():
        postprocess(*infer(0, min(a.batch, n)), dbox, a.logit_scale)
    if cuda:
        torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    fwd_s = nms_s = 0.0
    rows, cand = [], 0
    t0 = time.perf_counter()
    for lo in range(0, n, a.batch):
        hi = min(lo + a.batch, n)
        t1 = time.perf_counter()
        ploc, plabel = infer(lo, hi)
        if cuda:
            torch.cuda.synchronize()  # to split forward from post-processing (a few us a batch)
        t2 = time.perf_counter()
        with torch.no_grad():
            img, lab, score, box, c = postprocess(ploc, plabel, dbox, a.logit_scale)
        cand += c
        for i, l, s, b in zip(img.tolist(), lab.tolist(), score.tolist(), box.tolist()):
            iid, w, h = meta[lo + i]
            cat = cats[l - 1] if l - 1 < len(cats) else None
            if cat is not None:
                rows.append([iid, b[0] * w, b[1] * h, (b[2] - b[0]) * w, (b[3] - b[1]) * h, s, cat])
        t3 = time.perf_counter()
        fwd_s += t2 - t1
        nms_s += t3 - t2
    infer_s = time.perf_counter() - t0
    ce_s = mAP = None
    if coco:
        import numpy as np
        t0 = time.perf_counter()
        if rows:
            with contextlib.redirect_stdout(sys.stderr):
                E = COCOeval(gt, gt.loadRes(np.array(rows)), iouType="bbox")
                E.params.imgIds = [r[0] for r in meta]
                E.evaluate()
                E.accumulate()
                E.summarize()
            mAP = float(E.stats[0])
        else:
            mAP = 0.0
        ce_s = time.perf_counter() - t0
    total = infer_s + (ce_s or 0.0)
    out = {"type": "bench_eval", "impl": "torch-" + a.mode, "compile_mode": a.compile_mode if a.mode == "compile" else None,
           "images": n, "batch": a.batch, "width": a.width, "amp": a.amp, "layout": "channels_last",
           "forward_s": round(fwd_s, 4), "nms_s": round(nms_s, 4), "infer_s": round(infer_s, 4),
           "cocoeval_s": None if ce_s is None else round(ce_s, 4), "total_s": round(total, 4),
           "images_per_s": n / total, "candidates": cand, "detections": len(rows), "map": mAP,
           "logit_scale": a.logit_scale, "checkpoint": a.checkpoint, "checkpoint_extra_tensors": extra,
           "warmup_s": round(warm_s, 3), "load_s": round(load_s, 3), "coco_load_s": round(coco_load_s, 3),
           "input": "decoded, resized, normalized images resident on the device (loading excluded)",
           "nms": "torchvision.ops.batched_nms", "torch": torch.__version__,
           "device": torch.cuda.get_device_name(dev) if cuda else "cpu"}
    print(json.dumps(out), flush=True)
    return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "time":
        sys.exit(time_eval(sys.argv[2:]))
    if sys.argv[1:] == ["check-batched"]:
        sys.exit(check_batched())
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        sys.stderr.write("usage: ssd_eval.py check DRIVER [--perturb]\n"
                         "       ssd_eval.py check-batched\n"
                         "       ssd_eval.py time --coco DIR [options] (time --help)\n")
        sys.exit(2)
    crit = 0.45 if "--perturb" in sys.argv[3:] else 0.5
    dbox = dboxes300()
    ok = case_logits(sys.argv[2], dbox, crit, False)
    ok &= case_logits(sys.argv[2], dbox, crit, True)
    ok &= case_ties(sys.argv[2], dbox, crit)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
