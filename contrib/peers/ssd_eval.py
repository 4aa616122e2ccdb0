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
"""
import itertools
import math
import struct
import subprocess
import sys

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


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "check":
        sys.stderr.write("usage: ssd_eval.py check DRIVER [--perturb]\n")
        sys.exit(2)
    crit = 0.45 if "--perturb" in sys.argv[3:] else 0.5
    dbox = dboxes300()
    ok = case_logits(sys.argv[2], dbox, crit, False)
    ok &= case_logits(sys.argv[2], dbox, crit, True)
    ok &= case_ties(sys.argv[2], dbox, crit)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
