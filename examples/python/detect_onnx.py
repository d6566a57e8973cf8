#!/usr/bin/env python3
"""Faces and smiles in photos with grin's ONNX export, giving the answers
`grin-detect --json` gives: the same JSON line per image (boxes in the
photo's pixels, rounded to 0.1 px; face score and smile probability to 3
decimals).

    pip install onnxruntime numpy pillow
    grin export --model assets/default.grin --format onnx --out grin.onnx
    python3 detect_onnx.py --model grin.onnx photo.jpg [more.png ...]

Flags as grin-detect's: `--size WxH` runs every photo at that size instead
of its own; `--threshold T` sets the face score a detection needs (and, as
in grin-detect, the smile vote floor with it); `--photo-pixels N` bounds the
photo's own size; `--json` is accepted (JSON is the only output).

Each step below follows one piece of grin's Rust code, with its arithmetic
(float32 where grin uses f32, the same order of sums, the same rounding), so
that the network sees the same bytes as in grin-detect:

  1. decode (Pillow), turn by the EXIF orientation      crates/features/src/io.rs
  2. grey: the image crate's `to_luma8` (or RGB)        crates/features/src/raster.rs
  3. run size: own size x sqrt(2) per side, capped      crates/infer/src/runner.rs
  4. letterbox: one scale, triangle resize, grey 114    crates/features/src/letterbox.rs, raster.rs
  5. the pyramid: the frame again at half size          crates/net/src/pyramid.rs
  6. threshold, NMS and the smile votes                 crates/net/src/decode.rs
  7. boxes back to the photo's pixels                   crates/infer/src/frame.rs

The decoding settings come from the ONNX file's metadata (docs/onnx.md).
Where the two can still differ: the network's own float sums (onnxruntime's
kernels against grin's, in the last bits: scores and boxes agree to about
1e-4), and JPEG decoding (Pillow's libjpeg-turbo and the image crate's
zune-jpeg may differ by a level or two on some pixels, so a JPEG photo's
scores agree to about 1e-2 rather than 1e-4; a PNG's pixels are the same).
16-bit colour PNGs are read by Pillow at 8 bits its own way, not grin's.
"""

import argparse
import json
import math
import sys

import numpy as np
import onnxruntime as ort
from PIL import Image

F32 = np.float32

# crates/infer/src/runner.rs: a photo with no --size runs at its own size
# times sqrt(2) per side (twice its pixels), at most Full HD's pixels, each
# side within 32..=4096.
PHOTO_UPSCALE = math.sqrt(2)
PHOTO_MAX_PIXELS = 1920 * 1080
MIN_SIDE, MAX_SIDE = 32, 4096
# crates/features/src/letterbox.rs: the grey of the bars.
LETTERBOX_FILL = 114


# --- 1. decoding --------------------------------------------------------

def read_image(path):
    """The photo as grin decodes it: `(H, W)` grey, `(H, W, 3)` RGB or
    `(H, W, 4)` RGBA uint8, turned as its EXIF orientation tag says (the tag
    only, as the image crate reads it). Grin's conversions drop alpha."""
    with Image.open(path) as im:
        if im.format not in ("PNG", "JPEG"):
            raise ValueError(f"{im.format} images are not read (grin reads PNG and JPEG)")
        im.load()
        orientation = exif_orientation(im)
        if im.mode in ("L", "RGB"):
            pixels = np.asarray(im)
        elif im.mode in ("I;16", "I;16B", "I"):
            # 16-bit grey: the image crate's u16 -> u8, round(v * 255 / 65535).
            pixels = ((np.asarray(im).astype(np.uint32) + 128) // 257).astype(np.uint8)
        elif im.mode == "LA":
            pixels = np.asarray(im)[:, :, 0]
        elif im.mode == "RGBA":
            pixels = np.asarray(im)  # alpha kept: it picks the grey conversion (to_channels)
        elif im.mode == "1":
            pixels = np.asarray(im.convert("L"))
        else:  # palette, CMYK, ...: their RGB
            pixels = np.asarray(im.convert("RGB"))
    return np.ascontiguousarray(orient(pixels, orientation))


def exif_orientation(im):
    raw = im.info.get("exif")
    if not raw:
        return 1
    try:
        exif = Image.Exif()
        exif.load(raw)
        value = int(exif.get(0x0112, 1))
    except Exception:  # an unreadable tag is ignored, as viewers ignore it
        return 1
    return value if 1 <= value <= 8 else 1


def orient(a, orientation):
    """EXIF orientation 1..8 as the image crate's `apply_orientation`."""
    cw = lambda x: np.rot90(x, -1)  # a quarter turn clockwise
    return {
        1: lambda x: x,
        2: np.fliplr,
        3: lambda x: np.rot90(x, 2),
        4: np.flipud,
        5: lambda x: np.fliplr(cw(x)),
        6: cw,
        7: lambda x: np.fliplr(np.rot90(x, 1)),
        8: lambda x: np.rot90(x, 1),
    }[orientation](a)


# --- 2. grey or RGB -----------------------------------------------------

# The image crate (0.25) makes luma in float32: each u8 times 1/255, summed
# with the Y row of sRGB's RGB -> XYZ matrix as moxcms 0.8 computes it in
# f32 (these are its exact bits), times 255, rounded half away from zero.
# Not BT.601's 0.299/0.587/0.114, nor integer arithmetic.
LUMA = np.array([0x3E59C05B, 0x3F3715FC, 0x3D93CF75], dtype=np.uint32).view(F32)  # 0.21264784 0.7151792 0.07217304
ONE_255TH = F32(1.0) / F32(255.0)


def round_half_away(x):
    """float32 >= 0 rounded as Rust's `f32::round`."""
    floor = np.floor(x)
    return floor + (x - floor >= F32(0.5))


# RGB pixels (a JPEG, an RGB PNG) take grin's own luma instead: the same
# weights times 65536 as integers, (13933 R + 46871 G + 4732 B + 32768) >> 16
# (`raster::luma_of_rgb`); other images (RGBA) keep the image crate's.
LUMA_FIXED = np.array([13_933, 46_871, 4_732], dtype=np.uint32)


def to_channels(pixels, channels):
    """`Raster::from_image`: grey by `luma_of_rgb` for RGB, else
    `image.to_luma8()`; or `image.to_rgb8()`."""
    if channels == 1:
        if pixels.ndim == 2:
            return pixels
        if pixels.shape[2] == 3:
            weighted = (pixels.astype(np.uint32) * LUMA_FIXED).sum(axis=2)
            return ((weighted + 32_768) >> 16).astype(np.uint8)
        r, g, b = (pixels[:, :, k].astype(F32) * ONE_255TH for k in range(3))
        # Summed without fused multiply-adds, as in an x86-64 build (an aarch64
        # build of the crate fuses them: one grey level apart on rare pixels).
        y = ((r * LUMA[0]) + g * LUMA[1]) + b * LUMA[2]
        return np.clip(round_half_away(y * F32(255.0)), 0, 255).astype(np.uint8)
    if pixels.ndim == 3:
        return pixels[:, :, :3]
    # Grey to RGB goes through v / 255 * 255, which gives v back.
    return np.repeat(pixels[:, :, None], 3, axis=2)


# --- 3. the run size ----------------------------------------------------

def own_size(width, height, max_pixels):
    """`own_size`: the photo's size times sqrt(2) per side, or one smaller
    factor to stay within max_pixels; each side within 32..=4096."""
    scale = min(math.sqrt(max_pixels / (max(width, 1) * max(height, 1))), PHOTO_UPSCALE)
    side = lambda v: min(max(math.floor(v * scale), MIN_SIDE), MAX_SIDE)
    return side(max(width, 1)), side(max(height, 1))


# --- 4. the letterbox ---------------------------------------------------

class Letterbox:
    """`Letterbox::fit`: the photo scaled by one factor (in f32) to fit
    width x height, centred."""

    def __init__(self, source_width, source_height, width, height):
        scale = min(F32(width) / F32(source_width), F32(height) / F32(source_height))
        fit = lambda side, most: min(max(int(round_half_away(F32(side) * scale)), 1), most)
        self.source_width, self.source_height = source_width, source_height
        self.width, self.height = width, height
        self.scaled_width, self.scaled_height = fit(source_width, width), fit(source_height, height)
        self.x, self.y = (width - self.scaled_width) // 2, (height - self.scaled_height) // 2

    def to_source(self, box):
        """A box in frame pixels back in the photo's, clipped to it; None
        when it lies wholly in the bars."""
        sx = F32(self.scaled_width) / F32(self.source_width)
        sy = F32(self.scaled_height) / F32(self.source_height)
        x = lambda v: min(max((v - F32(self.x)) / sx, F32(0)), F32(self.source_width))
        y = lambda v: min(max((v - F32(self.y)) / sy, F32(0)), F32(self.source_height))
        out = [x(box[0]), y(box[1]), x(box[2]), y(box[3])]
        return out if out[2] > out[0] and out[3] > out[1] else None

    def window_to_source(self, b):
        """`window_to_source`: a window in frame pixels in the photo's, not clipped."""
        sx = F32(self.scaled_width) / F32(self.source_width)
        sy = F32(self.scaled_height) / F32(self.source_height)
        x, y = F32(self.x), F32(self.y)
        return [(b[0] - x) / sx, (b[1] - y) / sy, (b[2] - x) / sx, (b[3] - y) / sy]


def round_f64(x):
    """Rust's `f64::round` for x >= 0: halves away from zero (Python's
    round() goes to even)."""
    whole = math.floor(x)
    return whole + (1 if x - whole >= 0.5 else 0)


def convolution_taps(n_src, n_out):
    """`fast_image_resize`'s coefficients for its bilinear (triangle)
    filter, widened by the downscale factor, on one axis: each output
    sample's first source index and its weights as the crate's i16 fixed
    point, with the number of fraction bits (the `precompute_coefficients`
    and `Normalizer16` of its 6.x, in f64 as there)."""
    scale = n_src / n_out
    radius = max(scale, 1.0)
    window = math.ceil(radius) * 2 + 1
    recip = 1.0 / radius
    starts, rows = [], []
    for o in range(n_out):
        in_centre = (o + 0.5) * scale
        first = max(math.floor(in_centre - radius), 0)
        last = min(math.ceil(in_centre + radius), n_src)
        centre = in_centre - 0.5
        start, weights = first, []
        for x in range(first, last):
            w = max(1.0 - abs((x - centre) * recip), 0.0)
            if x == start and w == 0.0:
                start += 1  # no zero weights at a window's start
            else:
                weights.append(w)
        while weights and weights[-1] == 0.0:
            weights.pop()  # nor at its end
        total = 0.0
        for w in weights:
            total += w  # summed in order, as the crate sums them
        starts.append(start)
        rows.append([w / total for w in weights] if total != 0.0 else weights)
    widest = max(w for row in rows for w in row) if any(rows) else 0.0
    # The most fraction bits that keep the largest weight within i16.
    bits = 0
    for bits in range(22):
        if round_f64(widest * (1 << (bits + 1))) >= 1 << 15:
            break
    fixed = np.zeros((n_out, max(window, 1)), dtype=np.int64)
    for o, row in enumerate(rows):
        fixed[o, :len(row)] = [round_f64(w * (1 << bits)) for w in row]
    return np.array(starts, dtype=np.int64), fixed, bits


def convolve(src, starts, fixed, bits):
    """One pass along axis 0 in the crate's integers: a half for rounding,
    the weighted sum, shifted back and clamped to u8."""
    last = src.shape[0] - 1
    total = np.full((len(starts),) + src.shape[1:], 1 << (bits - 1), dtype=np.int64)
    for k in range(fixed.shape[1]):
        rows = src[np.minimum(starts + k, last)].astype(np.int64)
        total += rows * fixed[:, k].reshape((-1,) + (1,) * (src.ndim - 1))
    return np.clip(total >> bits, 0, 255).astype(np.uint8)


def halve_grey(pixels):
    """`raster::halve_grey`: the triangle filter at exactly half size (taps
    1, 3, 3, 1 on source lines 2o-1 .. 2o+2, renormalised at the edges),
    exact integer sums, one f32 rounding."""
    h, w = pixels.shape
    ow = w // 2

    def taps(o, n):
        return [(2 * o + k - 2, weight) for k, weight in ((1, 1), (2, 3), (3, 3), (4, 1)) if 0 <= 2 * o + k - 2 < n]

    src = pixels.astype(np.int64)
    out = np.zeros((h // 2, ow), dtype=np.uint8)
    for o in range(h // 2):
        row_taps = taps(o, h)
        column = sum(weight * src[r] for r, weight in row_taps)
        vertical = sum(weight for _, weight in row_taps)
        # Inside: all four taps, times 1 / (8 * vertical) in f32.
        inner = column[1:w - 3:2] + 3 * (column[2:w - 2:2] + column[3:w - 1:2]) + column[4:w:2]
        line = (inner.astype(F32) * (F32(1.0) / F32(8 * vertical)) + F32(0.5)).astype(np.uint8)
        out[o, 1:ow - 1] = line[:max(ow - 2, 0)]
        # The two edge pixels: their own taps, divided by their weight.
        for x in {0, ow - 1}:
            col_taps = taps(x, w)
            total = sum(weight * int(column[i]) for i, weight in col_taps)
            weight = sum(weight for _, weight in col_taps)
            out[o, x] = int(F32(total) / F32(weight * vertical) + F32(0.5))
    return out


def resize(pixels, width, height):
    """`raster::resize`: grey at exactly half size by `halve_grey`, else
    `fast_image_resize`'s convolution, rows first (to u8), then columns."""
    h, w = pixels.shape[:2]
    if (w, h) == (width, height):
        return pixels
    if pixels.ndim == 2 and (2 * width, 2 * height) == (w, h):
        return halve_grey(pixels)
    if height != h:
        pixels = convolve(pixels, *convolution_taps(h, height))
    if width != w:
        pixels = convolve(pixels.swapaxes(0, 1), *convolution_taps(w, width)).swapaxes(0, 1)
    return pixels


def letterbox(pixels, width, height):
    """`letterbox`: the photo resized into the frame, centred on grey 114;
    returns the frame `[channels, height, width]` in 0..1 and the placement."""
    box = Letterbox(pixels.shape[1], pixels.shape[0], width, height)
    canvas = np.full((height, width) + pixels.shape[2:], LETTERBOX_FILL, dtype=np.uint8)
    canvas[box.y:box.y + box.scaled_height, box.x:box.x + box.scaled_width] = resize(
        pixels, box.scaled_width, box.scaled_height)
    planes = canvas[None] if canvas.ndim == 2 else canvas.transpose(2, 0, 1)
    return planes.astype(F32) / F32(255.0), box


# --- 5. the pyramid -----------------------------------------------------

def pass_sizes(width, height, s):
    """`pass_sizes`: the run size, then halves (sides rounded down) while a
    face may be longer than the last pass reaches and a half keeps at least
    pyramid_min_side px a side."""
    sizes, above = [(width, height)], s["pyramid_above"]
    if above <= 0:
        return sizes
    w, h, reach = width, height, above
    while reach < F32(min(width, height)) and w // 2 >= s["pyramid_min_side"] and h // 2 >= s["pyramid_min_side"]:
        w, h, reach = w // 2, h // 2, reach * F32(2)
        sizes.append((w, h))
    return sizes


def halve(frame):
    """`halve`: 2x2 means, an odd last row or column dropped."""
    h, w = frame.shape[1] // 2 * 2, frame.shape[2] // 2 * 2
    f = frame[:, :h, :w]
    return (f[:, 0::2, 0::2] + f[:, 0::2, 1::2] + f[:, 1::2, 0::2] + f[:, 1::2, 1::2]) * F32(0.25)


def merge(passes, s):
    """`merge`: pass k keeps faces up to pyramid_above px (the last pass:
    any) and, past the first, down to pyramid_seam * pyramid_above / 2; its
    boxes are scaled by 2^k, and all passes go through NMS once more."""
    if len(passes) == 1:
        return passes[0]
    above, last, banded = s["pyramid_above"], len(passes) - 1, []
    least = s["pyramid_seam"] * above / F32(2)
    for k, found in enumerate(passes):
        for d in found:
            side = max(d[2] - d[0], d[3] - d[1])
            if (k < last and side > above) or (k > 0 and side < least):
                continue
            banded.append([v * F32(2 ** k) for v in d[:4]] + d[4:])
    return nms(banded, s)


# --- 6. threshold, NMS, smile votes -------------------------------------

def sigmoid(x):
    return F32(1) / (F32(1) + np.exp(-F32(x)))


def logit(p):
    p = min(max(F32(p), F32(1e-6)), F32(1) - F32(1e-6))
    return np.log(p / (F32(1) - p))


def iou(a, boxes):
    """`iou` of box `a` with each row of `boxes`, in float32."""
    iw = np.maximum(np.minimum(a[2], boxes[:, 2]) - np.maximum(a[0], boxes[:, 0]), F32(0))
    ih = np.maximum(np.minimum(a[3], boxes[:, 3]) - np.maximum(a[1], boxes[:, 1]), F32(0))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, F32(1)), F32(0))


def area(boxes):
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def nested(a, kept, s):
    """`nested`: box `a` lies mostly inside a kept (better) box: their
    intersection covers at least nested_cover of `a`, and `a` is at most
    nested_area of that box's area. nested_cover 0 turns it off."""
    if s["nested_cover"] == 0:
        return False
    iw = np.maximum(np.minimum(a[2], kept[:, 2]) - np.maximum(a[0], kept[:, 0]), F32(0))
    ih = np.maximum(np.minimum(a[3], kept[:, 3]) - np.maximum(a[1], kept[:, 1]), F32(0))
    own = area(a)
    inside = (own > 0) & (iw * ih >= s["nested_cover"] * own)
    return bool((inside & (own <= s["nested_area"] * area(kept))).any())


def nms(found, s):
    """`nms`: best score first (ties in their order), each box kept unless
    it overlaps a kept one by more than nms_iou or is nested in one, at
    most max_detections.
    Then each kept face's smile is the score-weighted mean, in logits, over
    every box (itself included) that overlaps it by more than nms_iou and
    scores at least smile_vote_floor."""
    if not found:
        return []
    found = [found[i] for i in np.argsort([-d[4] for d in found], kind="stable")]
    boxes = np.array([d[:4] for d in found], dtype=F32)
    scores = np.array([d[4] for d in found], dtype=F32)
    kept = []
    for i, d in enumerate(found):
        if len(kept) == s["max_detections"]:
            break
        if not kept or ((iou(boxes[i], boxes[kept]) <= s["nms_iou"]).all() and not nested(boxes[i], boxes[kept], s)):
            kept.append(i)
    faces = []
    for i in kept:
        votes = np.nonzero((scores >= s["smile_vote_floor"]) & (iou(boxes[i], boxes) > s["nms_iou"]))[0]
        weight, total = F32(0), F32(0)
        for j in votes:  # summed in order, in float32, as grin folds them
            weight = weight + scores[j]
            total = total + scores[j] * logit(found[j][5])
        smile = sigmoid(total / weight) if weight > 0 else found[i][5]
        faces.append(list(found[i][:5]) + [F32(smile)])
    return faces


def decode(detections, raw, width, height, s):
    """`decode` for one pass: the points whose face logit is above the
    threshold's, their boxes clipped to the pass's frame, then NMS."""
    keep = raw[0] > logit(s["score_threshold"])
    rows = detections[keep]
    limit = np.array([width, height, width, height], dtype=F32)
    boxes = np.minimum(np.maximum(rows[:, :4], F32(0)), limit)
    found = [list(b) + [r[4], r[5]] for b, r in zip(boxes, rows)]
    return nms(found, s)


def detect(session, frame, s):
    """Every pyramid pass of one frame through the network, merged."""
    passes = []
    for k, (w, h) in enumerate(pass_sizes(frame.shape[2], frame.shape[1], s)):
        if k > 0:
            frame = halve(frame)
        detections, raw = session.run(["detections", "raw"], {"image": frame[None]})
        passes.append(decode(detections[0], raw[0], w, h, s))
    return merge(passes, s)


def crop_square(pixels, window, side):
    """`crop_square`: the square window (source pixels, may reach past the
    picture) cut and scaled to side x side; grey 114 outside the picture,
    and only the part inside is scaled."""
    cut = np.full((side, side) + pixels.shape[2:], LETTERBOX_FILL, dtype=np.uint8)
    h, w = pixels.shape[:2]
    scale = F32(side) / max(F32(window[2]) - F32(window[0]), F32(1))
    x0, y0 = int(np.floor(max(window[0], F32(0)))), int(np.floor(max(window[1], F32(0))))
    x1 = min(int(np.ceil(max(window[2], F32(0)))), w)
    y1 = min(int(np.ceil(max(window[3], F32(0)))), h)
    if x1 <= x0 or y1 <= y0:
        return cut
    at = lambda v, start: min(int(max(round_half_away(F32((F32(v) - start) * scale)), 0)), side - 1)
    ax, ay = at(x0, window[0]), at(y0, window[1])
    cw = min(max(int(round_half_away(F32(F32(x1 - x0) * scale))), 1), side - ax)
    ch = min(max(int(round_half_away(F32(F32(y1 - y0) * scale))), 1), side - ay)
    cut[ay:ay + ch, ax:ax + cw] = resize(np.ascontiguousarray(pixels[y0:y1, x0:x1]), cw, ch)
    return cut


def second_look(session, found, pixels, box, s):
    """`second_look`: each box scoring below second_look_below (frame
    pixels) is searched again on a close cut from the picture (and on its
    mirror image with second_look_mirror); each view scores its best face
    overlapping the cut's centre square at IoU 0.3 (0: none), and the box
    stays when the mean of the views reaches second_look_confirm (0: the
    threshold)."""
    side, context = s["second_look_side"], s["second_look_context"]
    confirm = s["second_look_confirm"] or s["score_threshold"]
    mirror = s["second_look_mirror"]
    # `cut_params`: one pass when one pass holds the box (side / context px).
    one_pass = F32(side) / context <= s["pyramid_above"]
    cut_s = dict(s, score_threshold=s["second_look_mirror_floor"] if mirror else confirm,
                 pyramid_above=F32(0) if one_pass else s["pyramid_above"])
    mid, half = F32(side) / F32(2), F32(side) / F32(2) / context
    place = np.array([mid - half, mid - half, mid + half, mid + half], dtype=F32)
    kept = []
    for f in found:
        if f[4] < s["second_look_below"]:
            r = F32(0.5) * context * max(f[2] - f[0], f[3] - f[1])
            cx, cy = F32(0.5) * (f[0] + f[2]), F32(0.5) * (f[1] + f[3])
            window = box.window_to_source([cx - r, cy - r, cx + r, cy + r])
            cut = crop_square(pixels, window, side)
            total = F32(0)
            for view in ([cut, np.ascontiguousarray(cut[:, ::-1])] if mirror else [cut]):
                frame, _ = letterbox(view, side, side)
                at_place = [d[4] for d in detect(session, frame, cut_s)
                            if iou(place, np.array([d[:4]], dtype=F32))[0] >= F32(0.3)]
                total = F32(total + max(at_place, default=F32(0)))
            if F32(total / F32(2 if mirror else 1)) < confirm:
                continue
        kept.append(f)
    return kept


# --- 7. the report ------------------------------------------------------

def round_to(v, scale):
    """grin-detect's rounding: the f32 widened to f64, times 10 or 1000,
    rounded half away from zero."""
    x = float(v) * scale
    return (math.floor(x) + (1 if x - math.floor(x) >= 0.5 else 0)) / scale


def report(name, pixels, faces):
    return {
        "image": name,
        "width": int(pixels.shape[1]),
        "height": int(pixels.shape[0]),
        "detections": [
            {"box": [round_to(v, 10) for v in f[:4]], "score": round_to(f[4], 1000), "smile": round_to(f[5], 1000)}
            for f in faces
        ],
    }


def settings(session, threshold):
    """Decoding settings from the export's metadata; `--threshold` sets the
    smile vote floor too, as grin-detect's does."""
    meta = session.get_modelmeta().custom_metadata_map
    s = {key: F32(meta[key]) for key in ("score_threshold", "nms_iou", "smile_vote_floor", "pyramid_above",
                                          "pyramid_seam")}
    # Exports written before nested suppression existed decode without it.
    s.update({key: F32(meta.get(key, "0")) for key in ("nested_cover", "nested_area")})
    s.update({key: int(meta[key]) for key in ("max_detections", "pyramid_min_side", "channels")})
    # Exports written before the second look existed decode without it.
    s.update({key: F32(meta.get(key, "0")) for key in ("second_look_below", "second_look_confirm")})
    s.update(second_look_context=F32(meta.get("second_look_context", "3")),
             second_look_side=int(meta.get("second_look_side", "144")),
             second_look_mirror=meta.get("second_look_mirror", "false") == "true",
             second_look_mirror_floor=F32(meta.get("second_look_mirror_floor", "0")))
    if threshold is not None:
        s["score_threshold"] = s["smile_vote_floor"] = F32(threshold)
    return s


def parse_size(text):
    w, _, h = text.lower().partition("x")
    try:
        size = int(w), int(h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not WxH (e.g. 320x240)")
    if not all(MIN_SIDE <= v <= MAX_SIDE for v in size):
        raise argparse.ArgumentTypeError(f"{text}: each side must be within {MIN_SIDE}..={MAX_SIDE}")
    return size


def parse_threshold(text):
    t = float(text)
    if not 0 <= t <= 1:
        raise argparse.ArgumentTypeError(f"`{text}` is not a score in 0..=1")
    return t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("images", nargs="+", help="PNG or JPEG photos")
    p.add_argument("--model", default="grin.onnx", help="a `grin export --format onnx` file (default: grin.onnx)")
    p.add_argument("--size", type=parse_size, metavar="WxH", help="run size (default: each photo's own, x1.41)")
    p.add_argument("--threshold", type=parse_threshold, help="face score needed (default: the model's)")
    p.add_argument("--second-look-below", type=parse_threshold, metavar="SCORE",
                   help="look again at boxes scoring below this on a close cut (default: the model's; 0: off)")
    p.add_argument("--second-look-mirror", action="store_true",
                   help="search each close cut's mirror image too; keep a box on the mean of the two (default: the model's)")
    p.add_argument("--photo-pixels", type=int, default=PHOTO_MAX_PIXELS, metavar="N",
                   help="most pixels a photo is run at without --size (default 1920x1080)")
    p.add_argument("--json", action="store_true", help="JSON lines (the only output; for grin-detect's flags)")
    args = p.parse_args()

    session = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    s = settings(session, args.threshold)
    if args.second_look_below is not None:
        s["second_look_below"] = F32(args.second_look_below)
    s["second_look_mirror"] |= args.second_look_mirror
    ok = True
    for name in args.images:
        try:
            pixels = read_image(name)
        except (OSError, ValueError) as e:
            print(f"error: {name}: {e}", file=sys.stderr)
            ok = False
            continue
        width, height = args.size or own_size(pixels.shape[1], pixels.shape[0], args.photo_pixels)
        frame, box = letterbox(to_channels(pixels, s["channels"]), width, height)
        faces = []
        found = detect(session, frame, s)
        if s["second_look_below"] > 0:
            found = second_look(session, found, to_channels(pixels, s["channels"]), box, s)
        for f in found:
            mapped = box.to_source(f[:4])
            if mapped is not None:
                faces.append(mapped + f[4:])
        print(json.dumps(report(name, pixels, faces), separators=(",", ":"), ensure_ascii=False), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

