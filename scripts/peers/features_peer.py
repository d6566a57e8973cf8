#!/usr/bin/env python3
"""The grin crops pipeline, written twice for comparison: PIL+NumPy and OpenCV.

Same inputs (a smile/ + no_smile/ crop folder), same operations, same output
size as `grin features bench` with the crops source and the augment stages
flip, brightness, contrast, blur and noise applied to every sample:

  scene   two octaves of value noise (coarse W/40+2 x H/40+2 and fine
          W/10+2 x H/10+2 random grids, bilinearly upsampled) around a random
          mean and contrast; 0..max_faces crops, each scaled to a log-uniform
          side in [min_face, max_face], rotated by up to +-rotation_deg,
          placed without heavy overlap (<= 25% of the smaller face) and
          blended through a feathered ellipse mask (bilinear sampling)
  augment horizontal flip; brightness +-0.2*255; contrast x[0.7, 1.3] about
          the mean; gaussian blur sigma in [0.5, 1.5]; gaussian noise sigma
          in [0.3, 1] * 6

Prints one JSON object: samples/s (single thread, best of --rounds rounds, as
grin reports), median/p95 per sample.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

from scoring import area, intersection, percentile

FEATHER = 0.2
MAX_OVERLAP = 0.25
PLACE_TRIES = 12


def list_images(folder):
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith((".jpg", ".jpeg", ".png", ".bmp")))
    return [os.path.join(folder, n) for n in names]


def feathered_mask(w, h):
    """Alpha 1 inside the ellipse inscribed in the crop, fading to 0 at its rim."""
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    u = (xs + 0.5 - w / 2) / (w / 2)
    v = (ys + 0.5 - h / 2) / (h / 2)
    r = np.sqrt(u * u + v * v)
    return np.clip((1.0 - r) / FEATHER, 0.0, 1.0).astype(np.float32)


def overlap_share(a, b):
    return intersection(a, b) / max(min(area(a), area(b)), 1e-6)


class Scenes:
    """Backend-independent scene logic; `backend` does the pixel work."""

    def __init__(self, backend, crops, width, height, max_faces=4, min_face=16.0, max_face=160.0, rotation=15.0):
        self.b = backend
        self.crops = crops  # {True: [...], False: [...]} of backend crop objects
        self.w, self.h = width, height
        self.max_faces = max_faces
        self.max_side = min(max_face, 0.9 * min(width, height))
        self.min_side = min(min_face, self.max_side)
        self.rotation = rotation

    def pick(self, rng):
        smile = bool(rng.integers(0, 2)) if self.crops[True] and self.crops[False] else bool(self.crops[True])
        pool = self.crops[smile]
        return pool[int(rng.integers(0, len(pool)))], smile

    def sample(self, rng):
        w, h = self.w, self.h
        mean = 60.0 + rng.random() * 130.0
        contrast = 40.0 + rng.random() * 80.0
        coarse = rng.random((h // 40 + 2, w // 40 + 2), dtype=np.float32)
        fine = rng.random((h // 10 + 2, w // 10 + 2), dtype=np.float32)
        img = self.b.background(coarse, fine, mean, contrast, w, h)
        boxes, labels = [], []
        for _ in range(int(rng.integers(0, self.max_faces + 1))):
            crop, smile = self.pick(rng)
            cw, ch = self.b.crop_size(crop)
            side = math.exp(math.log(self.min_side) + rng.random() * (math.log(self.max_side) - math.log(self.min_side)))
            angle = (rng.random() * 2.0 - 1.0) * math.radians(self.rotation)
            scale = side / cw
            ax, ay = side / 2.0, ch * scale / 2.0
            s, c = math.sin(angle), math.cos(angle)
            hw = math.sqrt((ax * c) ** 2 + (ay * s) ** 2)
            hh = math.sqrt((ax * s) ** 2 + (ay * c) ** 2)
            for _ in range(PLACE_TRIES):
                cx = hw + rng.random() * max(w - 2 * hw, 0.0)
                cy = hh + rng.random() * max(h - 2 * hh, 0.0)
                box = (cx - hw, cy - hh, cx + hw, cy + hh)
                if all(overlap_share(b, box) <= MAX_OVERLAP for b in boxes):
                    img = self.b.paste(img, crop, scale, angle, cx, cy, hw, hh)
                    boxes.append(box)
                    labels.append(smile)
                    break
        # Augmentation: every stage on every sample.
        img = self.b.flip(img)
        boxes = [(w - b[2], b[1], w - b[0], b[3]) for b in boxes]
        delta = (rng.random() * 0.4 - 0.2) * 255.0
        img = self.b.lut(img, lambda v: v + delta)
        factor = 0.7 + rng.random() * 0.6
        m = self.b.mean(img)
        img = self.b.lut(img, lambda v: m + (v - m) * factor)
        img = self.b.blur(img, 0.5 + rng.random())
        img = self.b.noise(img, (0.3 + rng.random() * 0.7) * 6.0, rng)
        pixels = self.b.to_array(img)
        return pixels, np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(labels, np.int8)


def lut_table(f):
    return np.clip(np.round(f(np.arange(256, dtype=np.float32))), 0, 255).astype(np.uint8)


class PilBackend:
    def __init__(self):
        from PIL import Image, ImageFilter, ImageStat

        self.Image, self.ImageFilter, self.ImageStat = Image, ImageFilter, ImageStat

    def load(self, path):
        img = self.Image.open(path)
        img.load()
        img = img.convert("L")
        mask = self.Image.fromarray((feathered_mask(*img.size) * 255.0 + 0.5).astype(np.uint8), "L")
        return img, mask

    def crop_size(self, crop):
        return crop[0].size

    def background(self, coarse, fine, mean, contrast, w, h):
        up = lambda g: np.asarray(self.Image.fromarray(g, "F").resize((w, h), self.Image.BILINEAR))
        field = mean + contrast * 2.0 * (0.7 * up(coarse) + 0.3 * up(fine) - 0.5)
        return self.Image.fromarray(np.clip(field, 0, 255).astype(np.uint8), "L")

    def paste(self, img, crop, scale, angle, cx, cy, hw, hh):
        face, mask = crop
        cw, ch = face.size
        x0, y0 = int(math.floor(cx - hw)), int(math.floor(cy - hh))
        pw, ph = int(math.ceil(cx + hw)) - x0, int(math.ceil(cy + hh)) - y0
        # Inverse map: patch pixel -> crop pixel (PIL's AFFINE takes the inverse).
        s, c = math.sin(angle), math.cos(angle)
        ox, oy = x0 - cx, y0 - cy
        a, b = c / scale, s / scale
        d, e = -s / scale, c / scale
        data = (a, b, a * ox + b * oy + cw / 2, d, e, d * ox + e * oy + ch / 2)
        f = face.transform((pw, ph), self.Image.AFFINE, data, resample=self.Image.BILINEAR)
        m = mask.transform((pw, ph), self.Image.AFFINE, data, resample=self.Image.BILINEAR)
        img.paste(f, (x0, y0), m)
        return img

    def flip(self, img):
        return img.transpose(self.Image.FLIP_LEFT_RIGHT)

    def lut(self, img, f):
        return img.point(lut_table(f).tolist())

    def mean(self, img):
        return self.ImageStat.Stat(img).mean[0]

    def blur(self, img, sigma):
        return img.filter(self.ImageFilter.GaussianBlur(sigma))

    def noise(self, img, sigma, rng):
        a = np.asarray(img, np.float32) + rng.normal(0.0, sigma, (img.size[1], img.size[0])).astype(np.float32)
        return self.Image.fromarray(np.clip(np.round(a), 0, 255).astype(np.uint8), "L")

    def to_array(self, img):
        return np.asarray(img)


class Cv2Backend:
    def __init__(self):
        import cv2

        cv2.setNumThreads(1)
        self.cv2 = cv2

    def load(self, path):
        img = self.cv2.imread(path, self.cv2.IMREAD_GRAYSCALE)
        if img is None:
            raise ValueError(f"{path}: cannot decode")
        return img, feathered_mask(img.shape[1], img.shape[0])

    def crop_size(self, crop):
        return crop[0].shape[1], crop[0].shape[0]

    def background(self, coarse, fine, mean, contrast, w, h):
        up = lambda g: self.cv2.resize(g, (w, h), interpolation=self.cv2.INTER_LINEAR)
        field = mean + contrast * 2.0 * (0.7 * up(coarse) + 0.3 * up(fine) - 0.5)
        return np.clip(field, 0, 255).astype(np.uint8)

    def paste(self, img, crop, scale, angle, cx, cy, hw, hh):
        face, mask = crop
        ch, cw = face.shape
        h, w = img.shape
        x0, y0 = max(int(math.floor(cx - hw)), 0), max(int(math.floor(cy - hh)), 0)
        x1, y1 = min(int(math.ceil(cx + hw)), w), min(int(math.ceil(cy + hh)), h)
        # Forward map: crop pixel -> patch pixel.
        s, c = math.sin(angle), math.cos(angle)
        m = np.array(
            [[c * scale, -s * scale, 0.0], [s * scale, c * scale, 0.0]],
            np.float64,
        )
        m[:, 2] = [cx - x0, cy - y0] - m[:, :2] @ [cw / 2, ch / 2]
        size = (x1 - x0, y1 - y0)
        f = self.cv2.warpAffine(face, m, size, flags=self.cv2.INTER_LINEAR).astype(np.float32)
        a = self.cv2.warpAffine(mask, m, size, flags=self.cv2.INTER_LINEAR)
        roi = img[y0:y1, x0:x1].astype(np.float32)
        img[y0:y1, x0:x1] = (roi + (f - roi) * a + 0.5).astype(np.uint8)
        return img

    def flip(self, img):
        return self.cv2.flip(img, 1)

    def lut(self, img, f):
        return self.cv2.LUT(img, lut_table(f))

    def mean(self, img):
        return self.cv2.mean(img)[0]

    def blur(self, img, sigma):
        return self.cv2.GaussianBlur(img, (0, 0), sigma)

    def noise(self, img, sigma, rng):
        n = np.empty(img.shape, np.float32)
        self.cv2.randn(n, 0.0, sigma)
        return self.cv2.add(img, n, dtype=self.cv2.CV_8U)

    def to_array(self, img):
        return img


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["pil", "cv2"], required=True)
    p.add_argument("--root", required=True, help="folder with smile/ and no_smile/ crops")
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3, help="timed rounds of --samples; the best rate is reported")
    p.add_argument("--save", help="write the first sample as a PNG (to eyeball parity)")
    args = p.parse_args()
    backend = PilBackend() if args.backend == "pil" else Cv2Backend()
    t0 = time.perf_counter()
    crops = {
        True: [backend.load(f) for f in list_images(os.path.join(args.root, "smile"))],
        False: [backend.load(f) for f in list_images(os.path.join(args.root, "no_smile"))],
    }
    load_s = time.perf_counter() - t0
    scenes = Scenes(backend, crops, args.width, args.height)
    rng = np.random.default_rng(args.seed)
    warmup = max(3, min(50, args.samples // 10))
    for i in range(warmup):
        pixels, _, _ = scenes.sample(rng)
        if i == 0 and args.save:
            from PIL import Image

            Image.fromarray(pixels).save(args.save)
    times, best = [], 0.0
    for _ in range(args.rounds):
        start = time.perf_counter()
        for _ in range(args.samples):
            t = time.perf_counter()
            pixels, boxes, labels = scenes.sample(rng)
            times.append(time.perf_counter() - t)
        best = max(best, args.samples / (time.perf_counter() - start))
    assert pixels.shape == (args.height, args.width) and pixels.dtype == np.uint8
    json.dump(
        {
            "peer": {"pil": "PIL+NumPy", "cv2": "OpenCV"}[args.backend],
            "samples": args.samples,
            "samples_per_s": best,
            "rounds": args.rounds,
            "median_s": statistics.median(times),
            "p95_s": percentile(times, 0.95),
            "load_s": load_s,
            "crops": len(crops[True]) + len(crops[False]),
        },
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    main()
