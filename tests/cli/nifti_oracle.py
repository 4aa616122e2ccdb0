#!/usr/bin/env python3
"""nibabel as the oracle of trainkit's NIfTI-1 reader and writer (lib/nifti).

The reader is driven through `test_nifti --dump FILE PREFIX` (tests/unit/test_nifti.c): one JSON
line with the header, PREFIX.raw (the voxels in host order, the file's datatype) and PREFIX.f32
(the scaled values as float32). Each check prints "NAME ok" or "NAME FAIL: why"; exit 1 on a failure.

  nifti_oracle.py nibabel-data DRIVER WORK   nibabel's own test files (nibabel/tests/data), each one
                                             our reader supports; NIfTI-2 files must be refused
  nifti_oracle.py big-endian DRIVER WORK     files nibabel writes big-endian, every datatype, scaled
  nifti_oracle.py synth DRIVER DIR           prep synth kits19's cases: nibabel reads what we wrote
"""
import glob
import json
import os
import subprocess
import sys

import nibabel as nib
import numpy as np

NAMES = {np.dtype(k): v for k, v in [("u1", "uint8"), ("i1", "int8"), ("i2", "int16"), ("u2", "uint16"),
                                      ("i4", "int32"), ("u4", "uint32"), ("i8", "int64"), ("f4", "float32"),
                                      ("f8", "float64")]}
failed = 0


def report(name, why):
    global failed
    if why:
        failed += 1
        print(f"{name} FAIL: {why}")
    else:
        print(f"{name} ok")


def dump(driver, path, prefix):
    r = subprocess.run([driver, "--dump", path, prefix], capture_output=True, text=True)
    if r.returncode:
        return None, r
    return json.loads(r.stdout), r


def raw_header(path):
    with nib.openers.ImageOpener(path) as f:
        return nib.Nifti1Header.from_fileobj(f)


def sizeof_hdr(path):
    with nib.openers.ImageOpener(path) as f:
        head = f.read(4)
    return 540 if 540 in (int.from_bytes(head, "little"), int.from_bytes(head, "big")) else 348


def compare(driver, path, work, img=None):
    """Our reader against nibabel on one file: '' when they agree, else why not."""
    img = img if img is not None else nib.load(path)
    hdr = raw_header(path)  # as stored: a loaded image's header has its scaling moved to dataobj
    prefix = os.path.join(work, "dump")
    ours, r = dump(driver, path, prefix)
    if ours is None:
        return f"exit {r.returncode}: {r.stderr.strip()}"
    dt = hdr.get_data_dtype()
    if ours["datatype"] != NAMES.get(dt.newbyteorder("="), "?"):
        return f"datatype {ours['datatype']} vs {dt}"
    if ours["dim"] != [int(x) for x in hdr["dim"]][:1] + [int(x) if i <= hdr["dim"][0] else 1
                                                            for i, x in enumerate(hdr["dim"]) if i > 0]:
        return f"dim {ours['dim']} vs {hdr['dim']}"
    if not np.array_equal(np.array(ours["pixdim"], np.float32), hdr["pixdim"].astype(np.float32)):
        return f"pixdim {ours['pixdim']} vs {hdr['pixdim']}"
    for key in ("scl_slope", "scl_inter"):
        a, b = np.float32(ours[key]), hdr[key].astype(np.float32)
        if not (a == b or (np.isnan(a) and np.isnan(b))):
            return f"{key} {a} vs {b}"
    for key in ("qform_code", "sform_code", "xyzt_units"):
        if ours[key] != int(hdr[key]):
            return f"{key} {ours[key]} vs {hdr[key]}"
    quat = [hdr["quatern_b"], hdr["quatern_c"], hdr["quatern_d"]]
    qoff = [hdr["qoffset_x"], hdr["qoffset_y"], hdr["qoffset_z"]]
    srow = np.concatenate([hdr["srow_x"], hdr["srow_y"], hdr["srow_z"]])
    for key, want in (("quatern", quat), ("qoffset", qoff), ("srow", srow)):
        if not np.array_equal(np.array(ours[key], np.float32), np.array(want, np.float32)):
            return f"{key} {ours[key]} vs {list(want)}"
    shape = img.shape
    if ours["nvox"] != int(np.prod(shape)):
        return f"nvox {ours['nvox']} vs shape {shape}"
    raw = np.fromfile(prefix + ".raw", dtype=dt.newbyteorder("="))
    want_raw = np.asanyarray(img.dataobj.get_unscaled()).ravel(order="F")
    if not np.array_equal(raw, want_raw.astype(raw.dtype), equal_nan=dt.kind == "f"):
        return "raw voxels differ"
    f32 = np.fromfile(prefix + ".f32", dtype=np.float32)
    want = np.asanyarray(img.get_fdata()).astype(np.float32).ravel(order="F")
    if f32.tobytes() != want.tobytes():
        bad = np.flatnonzero(f32.view(np.uint32) != want.view(np.uint32))
        return f"{len(bad)} scaled values differ, first at {bad[0]}: {f32[bad[0]]!r} vs {want[bad[0]]!r}"
    return ""


def nibabel_data(driver, work):
    data = os.path.join(os.path.dirname(nib.__file__), "tests", "data")
    files = sorted(glob.glob(os.path.join(data, "*.nii")) + glob.glob(os.path.join(data, "*.nii.gz")))
    for path in files:
        name = os.path.basename(path)
        if sizeof_hdr(path) == 540:
            _, r = dump(driver, path, os.path.join(work, "dump"))
            ok = r.returncode == 3 and f"{path}: offset 0: " in r.stderr and "NIfTI-2" in r.stderr
            report(name + " (NIfTI-2, refused)", "" if ok else f"exit {r.returncode}: {r.stderr.strip()}")
            continue
        report(name, compare(driver, path, work))


def big_endian(driver, work):
    rng = np.random.default_rng(29)
    shape = (7, 5, 3)
    affine = np.array([[0, 0, -0.8, 10], [0, -0.8, 0, 20], [-2.5, 0, 0, 30], [0, 0, 0, 1]])
    for dt in ("u1", "i1", "i2", "u2", "i4", "u4", "i8", "f4", "f8"):
        dtype = np.dtype(dt)
        if dtype.kind == "f":
            arr = rng.normal(0, 100, shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            arr = rng.integers(max(info.min, -2**40), min(info.max, 2**40), shape, endpoint=True).astype(dtype)
        hdr = nib.Nifti1Header(endianness=">")
        hdr.set_data_dtype(dtype)
        img = nib.Nifti1Image(arr, affine, hdr)
        img.header.set_slope_inter(1.0, 0.0)
        path = os.path.join(work, f"be_{dt}.nii.gz" if dt in ("i2", "f4") else f"be_{dt}.nii")
        img.to_filename(path)
        with open(path, "rb") as f:
            head = f.read(4)
        assert path.endswith(".gz") or head == b"\x00\x00\x01\x5c", head
        report(f"big-endian {NAMES[dtype]}", compare(driver, path, work))
    # int16 storage of float data: nibabel picks a slope and an intercept itself
    arr = rng.normal(40, 300, shape)
    hdr = nib.Nifti1Header(endianness=">")
    hdr.set_data_dtype(np.int16)
    path = os.path.join(work, "be_scaled.nii")
    nib.Nifti1Image(arr, affine, hdr).to_filename(path)
    slope, inter = raw_header(path).get_slope_inter()
    why = compare(driver, path, work)
    if not why and (slope in (None, 1.0) or inter in (None, 0.0)):
        why = f"nibabel wrote no scaling (slope {slope}, inter {inter})"
    report("big-endian int16 with scl_slope and scl_inter", why)


def synth(driver, root):
    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)
    work = os.path.join(root, ".oracle")
    os.makedirs(work, exist_ok=True)
    for case in manifest["cases"]:
        name = case["case"]
        img = nib.load(os.path.join(root, name, "imaging.nii.gz"))
        seg = nib.load(os.path.join(root, name, "segmentation.nii.gz"))
        why = ""
        spacing = case["spacing"]  # slice thickness, then the in-plane pixel size twice
        if img.shape != tuple(case["shape"]) or seg.shape != img.shape:
            why = f"shape {img.shape} / {seg.shape} vs {case['shape']}"
        elif img.get_data_dtype() != np.dtype("<f4") or seg.get_data_dtype() != np.dtype("u1"):
            why = f"dtypes {img.get_data_dtype()} / {seg.get_data_dtype()}"
        elif not np.allclose(img.header.get_zooms(), spacing, rtol=0, atol=1e-6):
            why = f"zooms {img.header.get_zooms()} vs {spacing}"
        else:
            # KiTS19's orientation: the first axis is the slices, all three axes negated
            want = np.array([[0, 0, -spacing[2], 0], [0, -spacing[1], 0, 0], [-spacing[0], 0, 0, 0], [0, 0, 0, 1]])
            for im in (img, seg):
                if not np.allclose(im.affine, want, rtol=0, atol=1e-6) or int(im.header["sform_code"]) == 0:
                    why = f"affine {im.affine.tolist()} (sform_code {im.header['sform_code']})"
            labels = set(np.unique(np.asanyarray(seg.dataobj)).tolist())
            if not why and not labels <= {0, 1, 2}:
                why = f"labels {labels}"
            if not why and (1 not in labels or (2 in labels) != case["tumor"]):
                why = f"labels {labels}, tumor {case['tumor']}"
        why = why or compare(driver, os.path.join(root, name, "imaging.nii.gz"), work, img)
        why = why or compare(driver, os.path.join(root, name, "segmentation.nii.gz"), work, seg)
        report(name, why)
    for p in glob.glob(os.path.join(work, "*")):
        os.unlink(p)
    os.rmdir(work)


def main():
    mode, driver, where = sys.argv[1:4]
    {"nibabel-data": nibabel_data, "big-endian": big_endian, "synth": synth}[mode](driver, where)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
