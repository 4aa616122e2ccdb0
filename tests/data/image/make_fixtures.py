#!/usr/bin/env python3
"""Writes the JPEG fixtures of tests/unit/test_image.c and Pillow's decodes of them (the oracle).

  python3 tests/data/image/make_fixtures.py DIR          # write fixtures + references into DIR
  python3 tests/data/image/make_fixtures.py DIR --check  # re-decode DIR's JPEGs with this Pillow
                                                         # and compare with DIR's references
The JPEGs are encoded with Pillow (baseline 4:2:0, 4:2:2, 4:4:4, progressive, grayscale, CMYK
with an Adobe marker, restart markers, 1x1) from a smooth test pattern plus noise. For each JPEG
NAME.jpg the references are NAME.ppm (Pillow's full decode, converted to RGB) and, for the
boxes below, NAME.crop<k>.ppm = img.crop(box).resize(size, Image.BILINEAR): torchvision's
resized_crop on PIL images.
"""
import io
import math
import os
import random
import sys

from PIL import Image

# (box left, top, right, bottom) -> (out width, height): downscale, upscale, strong downscale
CROPS = [((3, 5, 90, 58), (32, 24)), ((10, 10, 50, 30), (64, 48)), ((0, 0, 97, 61), (13, 11))]


def pattern(w, h, seed):
    rnd = random.Random(seed)
    img = Image.new("RGB", (w, h))
    px = img.load()
    for y in range(h):
        for x in range(w):
            r = 128 + 100 * math.sin(x / 7.0 + seed) + rnd.randint(-20, 20)
            g = 128 + 100 * math.cos(y / 5.0 - x / 11.0) + rnd.randint(-20, 20)
            b = (x * 255 // max(w - 1, 1) + y * 3) % 256
            px[x, y] = (max(0, min(255, int(r))), max(0, min(255, int(g))), int(b))
    return img


def fixtures():
    base = pattern(97, 61, 1)
    out = {}

    def save(name, img, **kw):
        b = io.BytesIO()
        img.save(b, "JPEG", **kw)
        out[name] = b.getvalue()

    save("baseline_420", base, quality=90, subsampling=2)
    save("baseline_422", base, quality=90, subsampling=1)
    save("baseline_444", base, quality=90, subsampling=0)
    save("progressive", pattern(120, 80, 2), quality=85, progressive=True, subsampling=2)
    save("gray", pattern(65, 43, 3).convert("L"), quality=90)
    save("cmyk", pattern(50, 37, 4).convert("CMYK"), quality=90)
    save("restart", base, quality=90, subsampling=2, restart_marker_blocks=1)
    save("tiny", Image.new("RGB", (1, 1), (200, 30, 90)), quality=90)
    return out


def refs(name, data):
    img = Image.open(io.BytesIO(data))
    img.load()
    rgb = img.convert("RGB")
    r = {name + ".ppm": rgb}
    if rgb.size == (97, 61):
        for k, (box, size) in enumerate(CROPS):
            r["%s.crop%d.ppm" % (name, k)] = rgb.crop(box).resize(size, Image.BILINEAR)
    return r


def main():
    d = sys.argv[1]
    if "--check" in sys.argv:
        bad = 0
        for f in sorted(os.listdir(d)):
            if not f.endswith(".jpg"):
                continue
            for rn, img in refs(f[:-4], open(os.path.join(d, f), "rb").read()).items():
                if Image.open(os.path.join(d, rn)).tobytes() != img.tobytes():
                    print("differs:", rn)
                    bad += 1
        sys.exit(1 if bad else 0)
    os.makedirs(d, exist_ok=True)
    for name, data in fixtures().items():
        open(os.path.join(d, name + ".jpg"), "wb").write(data)
        for rn, img in refs(name, data).items():
            img.save(os.path.join(d, rn))


if __name__ == "__main__":
    main()
