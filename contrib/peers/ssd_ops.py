#!/usr/bin/env python3
"""SSD300's box math in PyTorch, against trainkit's CPU ops (kernels/ssd_box.h).

A transcription, written for this check, of the MLPerf v1.x SSD300-ResNet34 reference
(mlcommons/training single_stage_detector/ssd at commit b06269d9, before the RetinaNet rewrite):
utils.py's DefaultBoxes (as dboxes300_coco builds it), calc_iou_tensor and Encoder.encode, run in
float32 as the reference's data loader runs them, and base_model.py's Loss.forward in float64, its
gradients by autograd. One choice is ours: the mining's sorts are stable (the reference calls an
unstable sort, whose order of equal keys torch leaves open); kernels/ssd_box.h documents the same.

  ssd_ops.py check DRIVER [--perturb]

DRIVER is build/tests/unit/test_ssd_box (its --drive mode runs tk_ssd_match and tk_ssd_loss on the
cpu backend). Cases: "ssd300", 3 images of 1, 6 and 24 random ground truths against the 8732
default boxes (one ground truth repeated under another label, one equal to a default box), 81
classes, random predictions; "grid", 16 default boxes on a 4 x 4 grid of cells, 2 images, 5
classes: 5 positives in the first (one ground truth straddling two cells: an IoU tie), so that the
mining ranks 4 of the 5 positives in as negatives, and one positive in the second with all logits
equal (every cross-entropy tied). One line per case ending "ok" or "FAIL ...": the default boxes
(ssd300) and the matched boxes bit for bit, labels and mining weights identical, the loss and both
gradients within 1e-6 (relative, norm-wise). Exit 0 when all pass, 1 when one fails, 2 when the
driver fails. --perturb ranks equal keys by index descending in the reference (a wrong oracle the
check must catch).
"""
import itertools
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

PERTURB = False


# ---- utils.py: DefaultBoxes, dboxes300_coco ----

def xywh_to_ltrb(xywh):
    ltrb = xywh.clone()
    ltrb[:, 0] = xywh[:, 0] - 0.5 * xywh[:, 2]
    ltrb[:, 1] = xywh[:, 1] - 0.5 * xywh[:, 3]
    ltrb[:, 2] = xywh[:, 0] + 0.5 * xywh[:, 2]
    ltrb[:, 3] = xywh[:, 1] + 0.5 * xywh[:, 3]
    return ltrb


def default_boxes(fig_size, feat_size, steps, scales, aspect_ratios):
    """Per map, per size ((s, s), (s', s'), then each ratio's pair), cells row by row."""
    fk = fig_size / np.array(steps)
    out = []
    for k, f in enumerate(feat_size):
        s1, s2 = scales[k] / fig_size, scales[k + 1] / fig_size
        sizes = [(s1, s1), (math.sqrt(s1 * s2), math.sqrt(s1 * s2))]
        for a in aspect_ratios[k]:
            sizes += [(s1 * math.sqrt(a), s1 / math.sqrt(a)), (s1 / math.sqrt(a), s1 * math.sqrt(a))]
        for w, h in sizes:
            for i, j in itertools.product(range(f), repeat=2):
                out.append(((j + 0.5) / fk[k], (i + 0.5) / fk[k], w, h))
    xywh = torch.tensor(out, dtype=torch.float)
    xywh.clamp_(min=0, max=1)
    return xywh, xywh_to_ltrb(xywh)


def dboxes300_coco():
    return default_boxes(300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300],
                         [21, 45, 99, 153, 207, 261, 315], [[2], [2, 3], [2, 3], [2, 3], [2], [2]])


# ---- utils.py: calc_iou_tensor, Encoder.encode (float32) ----

def iou_table(a, b):
    """(N, 4) x (M, 4) ltrb -> (N, M)."""
    n, m = a.size(0), b.size(0)
    ea = a.unsqueeze(1).expand(-1, m, -1)
    eb = b.unsqueeze(0).expand(n, -1, -1)
    span = torch.min(ea[:, :, 2:], eb[:, :, 2:]) - torch.max(ea[:, :, :2], eb[:, :, :2])
    span[span < 0] = 0
    inter = span[:, :, 0] * span[:, :, 1]
    wa = ea[:, :, 2:] - ea[:, :, :2]
    wb = eb[:, :, 2:] - eb[:, :, :2]
    return inter / (wa[:, :, 0] * wa[:, :, 1] + wb[:, :, 0] * wb[:, :, 1] - inter)


def encode(gt, labels, dbox_ltrb, criteria=0.5):
    ious = iou_table(gt, dbox_ltrb)
    best_iou, best_gt = ious.max(dim=0)
    _, best_db = ious.max(dim=1)
    best_iou.index_fill_(0, best_db, 2.0)
    gi = torch.arange(0, best_db.size(0), dtype=torch.int64)
    best_gt[best_db[gi]] = gi
    keep = best_iou > criteria
    lab = torch.zeros(dbox_ltrb.size(0), dtype=torch.long)
    lab[keep] = labels[best_gt[keep]]
    box = dbox_ltrb.clone()
    box[keep, :] = gt[best_gt[keep], :]
    x, y = 0.5 * (box[:, 0] + box[:, 2]), 0.5 * (box[:, 1] + box[:, 3])
    w, h = -box[:, 0] + box[:, 2], -box[:, 1] + box[:, 3]
    box[:, 0], box[:, 1], box[:, 2], box[:, 3] = x, y, w, h
    return box, lab


# ---- base_model.py: Loss.forward (float64, scale_xy 0.1, scale_wh 0.2) ----

def ssd_loss(ploc, plabel, gloc, glabel, dbox_xywh):
    """ploc (N, 4, D), plabel (N, C, D), gloc (N, 4, D) xywh, glabel (N, D); returns loss, weights.
    In ploc's dtype (float64 here; contrib/peers/ssd_perf.py runs it in float32 on the GPU, where
    it also goes through torch.compile: no boolean-index assignment, no host reads)."""
    dt = ploc.dtype
    d = dbox_xywh.t().unsqueeze(0)
    target = torch.cat(((1.0 / 0.1) * (gloc[:, :2, :] - d[:, :2, :]) / d[:, 2:, :],
                        (1.0 / 0.2) * (gloc[:, 2:, :] / d[:, 2:, :]).log()), dim=1)
    pos = glabel > 0
    npos = pos.sum(dim=1)
    sl1 = (pos.to(dt) * F.smooth_l1_loss(ploc, target, reduction="none").sum(dim=1)).sum(dim=1)
    con = F.cross_entropy(plabel, glabel, reduction="none")
    key = con.detach().masked_fill(pos, 0)
    if PERTURB:  # equal keys by index descending: a wrong tie order
        _, order = key.flip(1).sort(dim=1, descending=True, stable=True)
        order = key.size(1) - 1 - order
    else:
        _, order = key.sort(dim=1, descending=True, stable=True)
    _, rank = order.sort(dim=1, stable=True)
    neg = rank < torch.clamp(3 * npos, max=pos.size(1)).unsqueeze(-1)
    w = pos.to(dt) + neg.to(dt)
    total = sl1 + (con * w).sum(dim=1)
    loss = (total * (npos > 0).to(dt) / npos.to(dt).clamp(min=1e-6)).mean(dim=0)
    return loss, w


# ---- cases ----

def case_ssd300(rng):
    xywh, ltrb = dboxes300_coco()
    gts, labels = [], []
    for count in (1, 6, 24):
        x0, y0 = rng.uniform(0, 0.8, count), rng.uniform(0, 0.8, count)
        w, h = rng.uniform(0.02, 0.6, count), rng.uniform(0.02, 0.6, count)
        g = np.stack([x0, y0, np.minimum(x0 + w, 1), np.minimum(y0 + h, 1)], 1).astype(np.float32)
        gts.append(g)
        labels.append(rng.integers(1, 81, count).astype(np.int32))
    gts[1][3] = gts[1][2]            # the same box twice, other labels: the later one wins
    labels[1][3] = labels[1][2] % 80 + 1
    gts[1][4] = ltrb[5776 + 100].numpy()  # exactly a default box
    return "ssd300", 0, xywh, ltrb, gts, labels, 81, 2.0


def case_grid(rng):
    cells = [((j + 0.5) / 4, (i + 0.5) / 4, 0.25, 0.25) for i in range(4) for j in range(4)]
    xywh = torch.tensor(cells, dtype=torch.float)
    ltrb = xywh_to_ltrb(xywh)
    g0 = ltrb[[1, 4, 6, 9]].numpy()
    g0 = np.concatenate([g0, np.array([[0, 0.75, 0.5, 1.0]], np.float32)])  # cells 12 and 13: IoU 0.5 each
    g1 = np.array([[0.5, 0.5, 0.75, 0.75]], np.float32)
    return "grid", 16, xywh, ltrb, [g0, g1], [np.array([1, 2, 3, 4, 2], np.int32), np.array([3], np.int32)], 5, 1.0


def run_case(case, driver, rng):
    name, dparam, xywh, ltrb, gts, labels, C, scale = case
    D, N = xywh.size(0), len(gts)
    ploc = rng.standard_normal((N, 4, D)).astype(np.float32)
    plabel = (scale * rng.standard_normal((N, C, D))).astype(np.float32)
    if name == "grid":
        plabel[0, :, 3] = plabel[0, :, 0]  # equal rows: equal keys
        plabel[0, :, 7] = plabel[0, :, 0]
        plabel[1] = 0                      # every cross-entropy log 5
    off = np.concatenate([[0], np.cumsum([len(g) for g in gts])]).astype(np.int32)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "params.txt"), "w") as f:
            f.write(f"{N} {dparam} {C} {off[-1]}\n")
        np.concatenate(gts).astype(np.float32).tofile(os.path.join(d, "gt.f32"))
        np.concatenate(labels).astype(np.int32).tofile(os.path.join(d, "gt_label.i32"))
        off.tofile(os.path.join(d, "gt_off.i32"))
        ploc.tofile(os.path.join(d, "ploc.f32"))
        plabel.tofile(os.path.join(d, "plabel.f32"))
        if dparam:
            xywh.numpy().tofile(os.path.join(d, "dbox_xywh.f32"))
            ltrb.numpy().tofile(os.path.join(d, "dbox_ltrb.f32"))
        r = subprocess.run([driver, "--drive", d], capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(f"{name}: driver exit {r.returncode}: {r.stderr}")
            sys.exit(2)
        loss_c = float(r.stdout.split()[1])
        rd = lambda n, t, shape: np.fromfile(os.path.join(d, n), t).reshape(shape)
        c_xywh, c_ltrb = rd("dbox_xywh.f32", np.float32, (D, 4)), rd("dbox_ltrb.f32", np.float32, (D, 4))
        c_box, c_lab = rd("box.f32", np.float32, (N, D, 4)), rd("label.i32", np.int32, (N, D))
        c_sel = rd("sel.u8", np.uint8, (N, D))
        c_dloc, c_dconf = rd("dloc.f32", np.float32, (N, 4, D)), rd("dconf.f32", np.float32, (N, C, D))
    boxes, labs = zip(*[encode(torch.from_numpy(g), torch.from_numpy(l).long(), ltrb) for g, l in zip(gts, labels)])
    box, lab = torch.stack(boxes), torch.stack(labs)
    pl = torch.from_numpy(ploc).double().requires_grad_()
    pc = torch.from_numpy(plabel).double().requires_grad_()
    loss, w = ssd_loss(pl, pc, box.transpose(1, 2).double(), lab, xywh.double())
    loss.backward()
    rel = lambda a, b: float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))
    bits = lambda a, b: int((a.view(np.uint32) != np.ascontiguousarray(b).view(np.uint32)).sum())
    fails = []
    db = bits(c_xywh, xywh.numpy()) + bits(c_ltrb, ltrb.numpy())
    nb, nl = bits(c_box, box.numpy()), int((c_lab != lab.numpy()).sum())
    ns = int((c_sel != w.numpy().astype(np.uint8)).sum())
    el = abs(loss_c - loss.item()) / abs(loss.item())
    eg, ec = rel(c_dloc, pl.grad.numpy()), rel(c_dconf, pc.grad.numpy())
    for what, bad in (("dboxes", db), ("boxes", nb), ("labels", nl), ("sel", ns), ("loss", el > 1e-6),
                      ("dloc", eg > 1e-6), ("dconf", ec > 1e-6)):
        if bad:
            fails.append(what)
    print(f"{name} N {N} D {D} C {C} positives {int((lab > 0).sum())} weight-2 {int((w == 2).sum())} "
          f"dboxes diff {db} boxes diff {nb} labels diff {nl} sel diff {ns} loss rel {el:.1e} "
          f"dloc rel {eg:.1e} dconf rel {ec:.1e}  " + ("ok" if not fails else "FAIL " + " ".join(fails)))
    return not fails


def main():
    global PERTURB
    if len(sys.argv) < 3 or sys.argv[1] != "check" or sys.argv[3:] not in ([], ["--perturb"]):
        sys.stderr.write("usage: ssd_ops.py check DRIVER [--perturb]\n")
        return 2
    PERTURB = sys.argv[3:] == ["--perturb"]
    rng = np.random.default_rng(30)
    ok = True
    for make in (case_ssd300, case_grid):
        ok &= run_case(make(rng), sys.argv[2], rng)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
