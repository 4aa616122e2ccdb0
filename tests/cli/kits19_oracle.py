#!/usr/bin/env python3
"""Oracles for `prep kits19` (tests/cli/prep-kits19.bats).

  kits19_oracle.py make DIR --cases 0,3,7 [--seed S]
      small KiTS19-like cases written with nibabel (not with trainkit's NIfTI writer):
      DIR/case_XXXXX/{imaging,segmentation}.nii.gz with CT-like int16 values (some with
      scl_slope/scl_inter, one big-endian, one float32), labels 0/1/2, spacings that upsample,
      downsample and keep axes, shapes below and above 128 after resampling
  kits19_oracle.py ref DATA_DIR OUT_DIR
      the MLPerf reference's preprocessing (mlcommons/training, unet3d preprocess_dataset.py) done
      with the calls it makes, in its order: nibabel get_fdata, torch's interpolate (trilinear,
      align_corners=True / nearest), np.clip, (x - 101) / 76.9, np.pad(mode="edge"), np.save; for
      CI, where the reference's checkout is absent
  kits19_oracle.py bad CASE_DIR label|shape|4d
      rewrites CASE_DIR/segmentation.nii.gz with a label 3 at voxel (1, 2, 3), one slice short, or
      as a 4-D volume (a fourth axis of 1)
  kits19_oracle.py tks-check DUMP.jsonl NPY_DIR
      the records of a .tks file (contrib/synth/tks_dump.py --hex output) against the .npy pairs:
      each case's records in z order, slabs covering D, image and label bytes equal; prints the
      case names
  kits19_oracle.py run-reference SCRIPT DATA_DIR OUT_DIR
      the reference script itself (its Preprocessor class, imported from SCRIPT), without its
      verify step, which reads checksum.json from the working directory

Needs numpy, nibabel and torch (contrib/setup-deps.sh).
"""
import argparse
import gzip
import importlib.util
import io
import os
import struct
import sys

import numpy as np


def write_nifti(path, arr, spacing, big_endian=False, slope=None, inter=None):
    import nibabel
    hdr = nibabel.Nifti1Header(endianness=">" if big_endian else "<")
    hdr.set_data_dtype(arr.dtype)
    img = nibabel.Nifti1Image(arr, np.diag(list(spacing) + [1.0]), hdr)
    img.header.set_zooms(tuple(spacing) + (1.0,) * (arr.ndim - len(spacing)))
    raw = io.BytesIO()
    img.to_file_map({"image": nibabel.FileHolder(fileobj=raw), "header": nibabel.FileHolder(fileobj=raw)})
    b = bytearray(raw.getvalue())
    if slope is not None:  # scl_slope and scl_inter at bytes 112 and 116 (float32)
        fmt = ">f" if big_endian else "<f"
        b[112:116] = struct.pack(fmt, slope)
        b[116:120] = struct.pack(fmt, inter)
    with open(path, "wb") as f:
        f.write(gzip.compress(bytes(b), mtime=0))


def make(args):
    rng = np.random.default_rng(args.seed)
    ids = [int(c) for c in args.cases.split(",")]
    # (shape, spacing, kind): kind picks the image's dtype and byte order
    plans = [((24, 40, 36), (3.0, 2.5, 2.0), "i2"),          # upsample, pad every axis
             ((120, 30, 150), (2.0, 0.9, 1.1), "i2-slope"),  # D and W > 128 after resampling
             ((40, 48, 44), (1.6, 1.2, 1.2), "f4"),          # the target spacing already (float32)
             ((20, 33, 35), (4.5, 3.1, 2.7), ">i2"),         # big-endian
             ((150, 20, 24), (0.8, 5.0, 4.0), "i2-slope")]   # downsample D
    for n, cid in enumerate(ids):
        shape, spacing, kind = plans[n % len(plans)]
        d = os.path.join(args.dir, "case_%05d" % cid)
        os.makedirs(d, exist_ok=True)
        z, y, x = np.meshgrid(*[np.linspace(-1, 1, s) for s in shape], indexing="ij")
        body = (z * z * 0.3 + y * y + x * x) < 0.8
        ct = np.where(body, 40.0, -1000.0) + 60.0 * np.sin(7 * x + 3 * z) + rng.normal(0, 25, shape)
        kid = ((y - 0.3) ** 2 + (x + 0.35) ** 2 + 0.5 * z * z) < 0.08
        tum = ((y - 0.35) ** 2 + (x + 0.3) ** 2 + (z - 0.1) ** 2) < 0.015
        ct = np.where(kid, ct + 150, ct)
        lab = np.where(tum, 2, np.where(kid, 1, 0)).astype(np.uint8)
        slope = inter = None
        if kind == "f4":
            img = ct.astype(np.float32)
        else:
            if kind == "i2-slope":  # stored = (HU - inter) / slope
                slope, inter = 0.5, -1024.0
                ct = (ct - inter) / slope
            img = np.clip(np.rint(ct), -32768, 32767).astype(np.int16)
        write_nifti(os.path.join(d, "imaging.nii.gz"), img, spacing, big_endian=kind == ">i2", slope=slope,
                    inter=inter)
        write_nifti(os.path.join(d, "segmentation.nii.gz"), lab, spacing, big_endian=kind == ">i2")


def ref(args):
    import nibabel
    import torch
    from torch.nn.functional import interpolate
    os.makedirs(args.out, exist_ok=True)
    for case in sorted(f for f in os.listdir(args.data) if "case" in f and os.path.isdir(os.path.join(args.data, f))):
        if int(case.split("_")[1]) >= 210:
            continue
        im = nibabel.load(os.path.join(args.data, case, "imaging.nii.gz"))
        lb = nibabel.load(os.path.join(args.data, case, "segmentation.nii.gz"))
        spacing = im.header["pixdim"][1:4].tolist()
        image = np.expand_dims(im.get_fdata().astype(np.float32), 0)
        label = np.expand_dims(lb.get_fdata().astype(np.uint8), 0)
        if spacing != [1.6, 1.2, 1.2]:
            size = (np.array(spacing) / np.array([1.6, 1.2, 1.2]) * np.array(image.shape[1:])).astype(int).tolist()
            image = interpolate(torch.from_numpy(np.expand_dims(image, 0)), size=size, mode="trilinear",
                                align_corners=True).numpy()[0]
            label = interpolate(torch.from_numpy(np.expand_dims(label, 0)), size=size, mode="nearest").numpy()[0]
        image = (np.clip(image, -79.0, 304.0) - 101.0) / 76.9
        bounds = [max(0, 128 - s) for s in image.shape[1:]]
        pads = [(0, 0)] + [(b // 2, b - b // 2) for b in bounds]
        image, label = np.pad(image, pads, mode="edge"), np.pad(label, pads, mode="edge")
        np.save(os.path.join(args.out, case + "_x.npy"), image.astype(np.float32), allow_pickle=False)
        np.save(os.path.join(args.out, case + "_y.npy"), label.astype(np.uint8), allow_pickle=False)


def bad(args):
    import nibabel
    path = os.path.join(args.case, "segmentation.nii.gz")
    seg = nibabel.load(path)
    lab = np.asarray(seg.dataobj).copy()
    spacing = tuple(float(v) for v in seg.header.get_zooms()[:3])
    if args.kind == "label":
        lab[1, 2, 3] = 3
    elif args.kind == "4d":
        lab = lab[..., None]
    else:
        lab = lab[:-1]
    write_nifti(path, lab, spacing)


def tks_check(args):
    import json
    import collections
    cases = collections.OrderedDict()
    with open(args.dump) as f:
        for line in f:
            r = json.loads(line)
            cases.setdefault(r["case"], []).append(r)
    for cid, recs in cases.items():
        name = "case_%05d" % cid
        x = np.load(os.path.join(args.npy, name + "_x.npy"))
        y = np.load(os.path.join(args.npy, name + "_y.npy"))
        d, h, w = x.shape[1:]
        assert all(r["shape"] == [d, h, w] for r in recs), name
        z = 0
        img, lab = b"", b""
        for r in recs:
            assert r["z"] == z, (name, r["z"], z)
            n = len(r["label"]) // 2 // (h * w)
            assert n >= 1 and len(r["label"]) // 2 == n * h * w and len(r["image"]) // 2 == 4 * n * h * w
            z += n
            img += bytes.fromhex(r["image"])
            lab += bytes.fromhex(r["label"])
        assert z == d, (name, z, d)
        assert img == x.tobytes() and lab == y.tobytes(), name
        print(name)


def run_reference(args):
    spec = importlib.util.spec_from_file_location("kits19_reference", args.script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.Preprocessor(argparse.Namespace(data_dir=args.data, results_dir=args.out)).preprocess_dataset()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--cases", required=True)
    m.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("ref")
    r.add_argument("data")
    r.add_argument("out")
    b = sub.add_parser("bad")
    b.add_argument("case")
    b.add_argument("kind", choices=["label", "shape", "4d"])
    t = sub.add_parser("tks-check")
    t.add_argument("dump")
    t.add_argument("npy")
    x = sub.add_parser("run-reference")
    x.add_argument("script")
    x.add_argument("data")
    x.add_argument("out")
    a = p.parse_args()
    {"make": make, "ref": ref, "bad": bad, "tks-check": tks_check, "run-reference": run_reference}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
