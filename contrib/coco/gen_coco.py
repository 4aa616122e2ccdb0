#!/usr/bin/env python3
"""Seeded generator of a COCO-style detection case (ours): ground truth with polygon masks and
some crowd regions as uncompressed RLE, and results as boxes (dt_bbox.json) and compressed RLE
masks (dt_segm.json). Defaults are COCO val2017's size: 5,000 images, ~36,800 annotations,
80 categories with val2017's ids, 100 detections per image.

  contrib/coco/gen_coco.py --out /tmp/coco-val --seed 1
  contrib/coco/gen_coco.py --out /tmp/coco-small --images 20 --dets-per-image 20 --seed 7

Masks are rasterized with pycocotools' mask API (only to write the RLE strings); the same seed
gives the same bytes.
"""
import argparse
import json
import math
import os

import numpy as np
from pycocotools import mask as mask_api

CAT_IDS = [i for i in range(1, 91) if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]


def star_polygon(rng, cx, cy, rx, ry, n):
    ang = np.sort(rng.uniform(0, 2 * math.pi, n))
    rad = rng.uniform(0.6, 1.0, n)
    xs = cx + rx * rad * np.cos(ang)
    ys = cy + ry * rad * np.sin(ang)
    return np.round(np.stack([xs, ys], 1).reshape(-1), 2)


def clip_poly(p, w, h):
    q = p.copy()
    q[0::2] = np.clip(q[0::2], 0, w - 1)
    q[1::2] = np.clip(q[1::2], 0, h - 1)
    return q


def poly_box(p):
    x0, x1 = p[0::2].min(), p[0::2].max()
    y0, y1 = p[1::2].min(), p[1::2].max()
    return [float(x0), float(y0), float(round(x1 - x0, 2)), float(round(y1 - y0, 2))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--mean-objects", type=float, default=7.36)
    ap.add_argument("--dets-per-image", type=int, default=100)
    ap.add_argument("--crowd-frac", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out, exist_ok=True)
    images, anns, dts_box, dts_seg = [], [], [], []
    ann_id = 1
    for i in range(a.images):
        img_id = 100000 + i * 7 + int(rng.integers(0, 7))
        w, h = int(rng.choice([640, 480, 500, 427, 612])), int(rng.choice([480, 640, 375, 427, 333]))
        images.append({"id": img_id, "width": w, "height": h, "file_name": "%012d.jpg" % img_id})
        nobj = int(rng.poisson(a.mean_objects))
        objs = []
        for _ in range(nobj):
            cat = int(rng.choice(CAT_IDS[:40] if rng.random() < 0.7 else CAT_IDS))
            scale = float(np.exp(rng.uniform(math.log(4), math.log(min(w, h) / 2.2))))
            rx, ry = scale * rng.uniform(0.6, 1.4), scale * rng.uniform(0.6, 1.4)
            cx, cy = rng.uniform(rx * 0.5, w - rx * 0.5), rng.uniform(ry * 0.5, h - ry * 0.5)
            poly = clip_poly(star_polygon(rng, cx, cy, rx, ry, int(rng.integers(6, 24))), w, h)
            crowd = rng.random() < a.crowd_frac
            rle = mask_api.merge(mask_api.frPyObjects([poly.tolist()], h, w))
            area = float(mask_api.area(rle))
            if area < 1:
                continue
            box = [float(v) for v in mask_api.toBbox(rle)] if crowd else poly_box(poly)
            if crowd:  # crowd regions as uncompressed RLE, like COCO's
                m = mask_api.decode(rle).reshape(-1, order="F")
                change = np.flatnonzero(np.diff(np.concatenate([[0], m, [1 - m[-1]]])))
                counts = np.diff(np.concatenate([[0], change])).tolist()
                seg = {"counts": [int(c) for c in counts], "size": [h, w]}
            else:
                seg = [poly.tolist()]
            anns.append({"id": ann_id, "image_id": img_id, "category_id": cat, "iscrowd": int(crowd),
                         "area": area, "bbox": box, "segmentation": seg})
            objs.append((cat, cx, cy, rx, ry, crowd))
            ann_id += 1
        polys, meta = [], []
        for d in range(a.dets_per_image):
            if objs and rng.random() < 0.35:
                cat, cx, cy, rx, ry, _ = objs[int(rng.integers(0, len(objs)))]
                j = rng.normal(0, 0.15, 4)
                cx, cy, rx, ry = cx + j[0] * rx, cy + j[1] * ry, rx * math.exp(j[2]), ry * math.exp(j[3])
                if rng.random() < 0.1:
                    cat = int(rng.choice(CAT_IDS))
                score = float(rng.beta(4, 2))
            else:
                cat = int(rng.choice(CAT_IDS[:40] if rng.random() < 0.7 else CAT_IDS))
                s = float(np.exp(rng.uniform(math.log(4), math.log(min(w, h) / 2.5))))
                rx, ry = s * rng.uniform(0.6, 1.4), s * rng.uniform(0.6, 1.4)
                cx, cy = rng.uniform(0, w), rng.uniform(0, h)
                score = float(rng.beta(2, 4))
            poly = clip_poly(star_polygon(rng, cx, cy, max(rx, 1.5), max(ry, 1.5), 12), w, h)
            polys.append(poly.tolist())
            meta.append((cat, round(score, 5), poly_box(poly)))
        rles = mask_api.frPyObjects(polys, h, w) if polys else []
        for (cat, score, box), rle in zip(meta, rles):
            dts_box.append({"image_id": img_id, "category_id": cat, "bbox": box, "score": score})
            dts_seg.append({"image_id": img_id, "category_id": cat, "score": score,
                            "segmentation": {"size": [h, w], "counts": rle["counts"].decode()}})
    cats = [{"id": c, "name": "class_%d" % c, "supercategory": "thing"} for c in CAT_IDS]
    with open(os.path.join(a.out, "gt.json"), "w") as f:
        json.dump({"info": {"description": "trainkit synthetic COCO", "seed": a.seed},
                   "images": images, "annotations": anns, "categories": cats}, f)
    with open(os.path.join(a.out, "dt_bbox.json"), "w") as f:
        json.dump(dts_box, f)
    with open(os.path.join(a.out, "dt_segm.json"), "w") as f:
        json.dump(dts_seg, f)
    print("%d images, %d annotations (%d crowd), %d results" %
          (len(images), len(anns), sum(x["iscrowd"] for x in anns), len(dts_box)))


if __name__ == "__main__":
    main()
