#!/usr/bin/env python3
"""Makes copies of photos that look like old prints, for `scripts/bench-latency.sh`'s
aged row: grey, faded (45-70% of the contrast, blacks lifted 10-25%), soft (Gaussian blur,
sigma 0.6-1.4 px), grainy (noise, sigma 2-5% of white) and vignetted, each drawn per photo
from its file name, so a rerun makes the same files. The faces do not move: the photos' truth
file is copied with them.

Usage: age_photos.py SRC DST   (SRC holds export_scenes --original output: PNGs and truth.json)
Needs numpy and Pillow.
"""

import json
import os
import sys
import zlib

import numpy as np
from PIL import Image, ImageFilter


def age(image, rng):
    grey = image.convert("L").filter(ImageFilter.GaussianBlur(rng.uniform(0.6, 1.4)))
    a = np.asarray(grey).astype(np.float32) / 255
    contrast, black = rng.uniform(0.45, 0.7), rng.uniform(0.1, 0.25)
    a = black + (a - a.mean()) * contrast + a.mean() * (1 - black) * contrast + (1 - contrast) * 0.5 * (1 - black)
    h, w = a.shape
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot((xx - w / 2) / (w / 2), (yy - h / 2) / (h / 2))
    a *= 1 - rng.uniform(0.1, 0.3) * np.clip(r - 0.5, 0, 1)
    a = np.clip(a + rng.normal(0, rng.uniform(0.02, 0.05), a.shape), 0, 1)
    return Image.fromarray((a * 255).astype(np.uint8))


def main():
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "truth.json")) as f:
        truth = json.load(f)
    for scene in truth["scenes"]:
        rng = np.random.default_rng(zlib.crc32(scene["image"].encode()))
        age(Image.open(os.path.join(src, scene["image"])), rng).save(os.path.join(dst, scene["image"]))
    with open(os.path.join(dst, "truth.json"), "w") as f:
        json.dump(truth, f)
    print(f"aged {len(truth['scenes'])} photos into {dst}")


if __name__ == "__main__":
    main()
