#!/usr/bin/env python3
"""Runs grin's ONNX export (`grin export`) with onnxruntime and with
OpenCV's DNN module on the photos grin-detect ran on, decodes as grin does,
and compares the detections with grin-detect's JSON; then times all three
on one thread. Run by `scripts/onnx-check.sh`.

It is also the reference decoder of the export's `detections` output
(`[batch, points, 6]`: x0, y0, x1, y1, face score, smile probability per
point), written to follow crates/net/src/decode.rs and pyramid.rs:

  - per pass: points scoring above `score_threshold`, boxes clipped to the
    pass's frame, then greedy NMS (best first; a box is kept unless it
    overlaps a kept one by more than `nms_iou`; at most `max_detections`);
    each kept face's smile is the score-weighted mean, in logits, over the
    boxes it suppresses that score at least `smile_vote_floor`, itself
    included;
  - the pyramid: when a face may be longer than `pyramid_above` px, the
    frame again at half size (2x2 means, sides rounded down) while the half
    is at least `pyramid_min_side` px a side; pass k keeps faces up to
    `pyramid_above` px (the last: any), and past the first down to
    `pyramid_seam` * pyramid_above / 2; its
    boxes are scaled by 2^k and all passes merged by the same NMS.

The settings come from the model's metadata (`score_threshold`, `nms_iou`,
`max_detections`, `smile_vote_floor`, `pyramid_above`, `pyramid_min_side`,
`pyramid_seam`).

Modes:
  --onnx F --photos DIR --size WxH --grin F --results R
      every photo of DIR through both runtimes; appends one JSON row per
      runtime (detections compared, max differences) to R;
  --time --onnx F --photos DIR --size WxH --grin-bench F --times T
      one timing round: appends grin-detect's median (its --bench JSON, run
      just before) and each runtime's to T;
  --table R --times T   prints the table; exits 1 when a row disagrees;
  --make-photos DIR --photos ORIGINALS
      writes photos of made-up shapes for the example's check (see
      make_photos);
  --frames DIR --photos ORIGINALS --size WxH
      the example's letterboxed frames of ORIGINALS against grin's (DIR,
      from export_scenes), byte for byte;
  --example-output F --grin F [--label L]
      examples/python/detect_onnx.py's JSON lines against grin-detect's on
      the same photos: prints "N of M photos agree", exits 1 when a
      lossless photo disagrees.
"""

import argparse
import json
import os
import statistics
import sys

import cv2
import numpy as np
import onnxruntime as ort

from haar_peer import load_images, read_grin_bench, time_ms
from scoring import grin_detections, iou, nms

# Agreement required with grin-detect's JSON (boxes rounded to 0.1 px,
# probabilities to 3 decimals).
BOX_TOLERANCE_PX = 0.5
SCORE_TOLERANCE = 1e-3


def settings(path):
    meta = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_modelmeta().custom_metadata_map
    return {
        "score_threshold": float(meta["score_threshold"]),
        "nms_iou": float(meta["nms_iou"]),
        # Exports from before nested suppression have neither key: off.
        "nested_cover": float(meta.get("nested_cover", 0)),
        "nested_area": float(meta.get("nested_area", 0)),
        "max_detections": int(meta["max_detections"]),
        "smile_vote_floor": float(meta["smile_vote_floor"]),
        "pyramid_above": float(meta["pyramid_above"]),
        "pyramid_min_side": int(meta["pyramid_min_side"]),
        "pyramid_seam": float(meta["pyramid_seam"]),
        "channels": int(meta["channels"]),
    }


def decode(rows, width, height, s):
    """One pass's `detections` rows ([points, 6]) to NMS'd faces."""
    rows = rows[rows[:, 4] > s["score_threshold"]]
    boxes = rows[:, :4].clip(0, [width, height, width, height])
    return nms([list(map(float, b)) + [float(r[4]), float(r[5])] for b, r in zip(boxes, rows)], s)


def pass_sizes(width, height, s):
    above, least = s["pyramid_above"], s["pyramid_min_side"]
    sizes = [(width, height)]
    if above <= 0:
        return sizes
    w, h, reach = width, height, above
    while reach < min(width, height) and w // 2 >= least and h // 2 >= least:
        w, h, reach = w // 2, h // 2, reach * 2
        sizes.append((w, h))
    return sizes


def halve(frame):
    """2x2 means, odd edge dropped, summed in pyramid.rs's order."""
    h, w = frame.shape[-2] // 2 * 2, frame.shape[-1] // 2 * 2
    f = frame[..., :h, :w]
    return (f[..., 0::2, 0::2] + f[..., 0::2, 1::2] + f[..., 1::2, 0::2] + f[..., 1::2, 1::2]) * np.float32(0.25)


def merge(passes, s):
    above, last, banded = s["pyramid_above"], len(passes) - 1, []
    if last == 0:
        return passes[0]
    for k, found in enumerate(passes):
        for d in found:
            side = max(d[2] - d[0], d[3] - d[1])
            if (k < last and side > above) or (k > 0 and side < s["pyramid_seam"] * above / 2):
                continue
            banded.append([v * 2**k for v in d[:4]] + d[4:])
    return nms(banded, s)


def detect(forward, frame, s):
    """Faces in one `[channels, height, width]` frame (0..1) through
    `forward` (blob -> detections rows), every pyramid pass."""
    passes = []
    for k, (w, h) in enumerate(pass_sizes(frame.shape[2], frame.shape[1], s)):
        if k > 0:
            frame = halve(frame)
        passes.append(decode(forward(frame[None]), w, h, s))
    return merge(passes, s)


def runtimes(path):
    """Each runtime as a function from a `[1, C, H, W]` blob to the
    `detections` rows of its one image, on one thread."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    found = {"onnxruntime": lambda blob: session.run(["detections"], {"image": blob})[0][0]}
    cv2.setNumThreads(1)
    # The export builds its top-down fusion without `Shape` (which OpenCV's
    # importer refuses on a dynamic input): a model OpenCV cannot load is a
    # failure of the check, not a row left out.
    net = cv2.dnn.readNetFromONNX(path)

    def opencv(blob):
        net.setInput(np.ascontiguousarray(blob))
        return net.forward("detections")[0]

    found["opencv-dnn"] = opencv
    return found


def to_frame(image, channels):
    if channels == 1:
        grey = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        return (grey.astype(np.float32) / 255)[None]
    rgb = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB if image.ndim == 2 else cv2.COLOR_BGR2RGB)
    return rgb.astype(np.float32).transpose(2, 0, 1) / 255


def compare(found, expected):
    """Pairs each of grin's detections with the best-overlapping one found.
    Returns (all paired, max box, score and smile differences)."""
    worst = [0.0, 0.0, 0.0]
    if len(found) != len(expected):
        return False, worst
    free = list(found)
    for box, score, smile in expected:
        best = max(free, key=lambda d: iou(d, box))
        free.remove(best)
        diffs = [max(abs(a - b) for a, b in zip(best[:4], box)), abs(best[4] - score), abs(best[5] - smile)]
        worst = [max(w, d) for w, d in zip(worst, diffs)]
    return True, worst


def load_frames(folder, channels):
    names = sorted(n for n in os.listdir(folder) if n.endswith(".png"))
    if not names:
        sys.exit(f"{folder}: no .png photos")
    if channels == 1:
        images = load_images(folder, names)
    else:
        images = [cv2.imread(os.path.join(folder, n), cv2.IMREAD_COLOR) for n in names]
    return names, [to_frame(img, channels) for img in images]


def measure(args):
    """Agreement with grin-detect's JSON, one row per runtime."""
    s = settings(args.onnx)
    names, frames = load_frames(args.photos, s["channels"])
    expected = grin_detections(args.grin, names)
    with open(args.results, "a") as out:
        for name, forward in runtimes(args.onnx).items():
            agree, worst, faces = 0, [0.0, 0.0, 0.0], 0
            for image_name, frame in zip(names, frames):
                found = detect(forward, frame, s)
                faces += len(found)
                same, diffs = compare(found, expected[image_name])
                agree += same
                worst = [max(w, d) for w, d in zip(worst, diffs)]
                if not same:
                    print(f"{name}: {image_name}: {len(found)} faces, grin-detect {len(expected[image_name])}")
            out.write(json.dumps({
                "size": args.size,
                "runtime": name,
                "version": ort.__version__ if name == "onnxruntime" else cv2.__version__,
                "images": len(names),
                "images_agreeing": agree,
                "faces": faces,
                "grin_faces": sum(len(v) for v in expected.values()),
                "max_box_px": worst[0],
                "max_score": worst[1],
                "max_smile": worst[2],
                "passes": len(pass_sizes(frames[0].shape[2], frames[0].shape[1], s)),
            }) + "\n")


def time_round(args):
    """One timing round: grin-detect's --bench figure (run just before) and
    each runtime's, appended to the times file."""
    s = settings(args.onnx)
    _, frames = load_frames(args.photos, s["channels"])
    rows = [{"size": args.size, "runtime": "grin-detect", "median_ms": read_grin_bench(args.grin_bench)["median_ms"]}]
    for name, forward in runtimes(args.onnx).items():
        median, _, _ = time_ms(lambda f: detect(forward, f, s), frames, args.iterations, 10)
        rows.append({"size": args.size, "runtime": name, "median_ms": median})
    with open(args.times, "a") as out:
        for r in rows:
            out.write(json.dumps(r) + "\n")


def agrees(r):
    return (r["images_agreeing"] == r["images"] and r["max_box_px"] <= BOX_TOLERANCE_PX
            and r["max_score"] <= SCORE_TOLERANCE and r["max_smile"] <= SCORE_TOLERANCE)


def read_rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def table(args):
    rows = read_rows(args.table)
    times = read_rows(args.times)
    rounds = {}
    for t in times:
        rounds.setdefault((t["size"], t["runtime"]), []).append(t["median_ms"])
    ms = {k: statistics.median(v) for k, v in rounds.items()}
    header = ("size (passes)", "runtime", "images agreeing", "faces (grin-detect's)", "max box diff px",
              "max score diff", "max smile diff", "median ms, 1 thread", "vs grin-detect")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for size in dict.fromkeys(r["size"] for r in rows):
        of_size = [r for r in rows if r["size"] == size]
        grin_ms = ms[(size, "grin-detect")]
        print(f"| {size} ({of_size[0]['passes']}) | grin-detect (fast path) | | {of_size[0]['grin_faces']} | | | | "
              f"{grin_ms:.2f} | 1.00 |")
        for r in of_size:
            runtime_ms = ms[(size, r["runtime"])]
            cells = (f"{size} ({r['passes']})", f"{r['runtime']} {r['version']}",
                     f"{r['images_agreeing']} / {r['images']}", f"{r['faces']} ({r['grin_faces']})",
                     f"{r['max_box_px']:.3f}", f"{r['max_score']:.4f}", f"{r['max_smile']:.4f}",
                     f"{runtime_ms:.2f}", f"{runtime_ms / grin_ms:.2f}")
            print("| " + " | ".join(cells) + " |")
    n_rounds = len(next(iter(rounds.values())))
    print(f"(agreement: the same faces per image, boxes within {BOX_TOLERANCE_PX} px, scores and smiles within "
          f"{SCORE_TOLERANCE}, against grin-detect's JSON, which rounds to 0.1 px and 0.001; latency: every pyramid "
          f"pass, decode and NMS per photo, one thread, median of {n_rounds} interleaved rounds' medians)")
    bad = [r for r in rows if not agrees(r)]
    for r in bad:
        print(f"MISMATCH: {r['runtime']} at {r['size']}: {r['images'] - r['images_agreeing']} images disagree, "
              f"max box {r['max_box_px']:.3f} px, score {r['max_score']:.4f}, smile {r['max_smile']:.4f}")
    return 1 if bad else 0


# --- examples/python/detect_onnx.py against grin-detect -------------------

# Agreement required of the example, JSON line against JSON line. Both print
# rounded values (boxes to 0.1 px, probabilities to 0.001), so where the two
# runs' floats differ by a hair, the printed values can still differ by one
# rounding step. The example feeds the network the same bytes as grin-detect
# (decoding, grey, letterbox and pyramid reproduced exactly for a lossless
# photo), so the only floats that differ are the network's own sums:
# onnxruntime's kernels against grin's fused ones, raw outputs within 1e-4
# (crates/export/tests/parity.rs). A face logit 1e-4 apart moves a score by at
# most 2.5e-5, a smile (a mean of logits) likewise; a log-distance 1e-4 apart
# moves a box side by 1e-4 of its length: 0.2 px on a 2000 px face. Hence:
# one rounding step plus that margin.
EXAMPLE_BOX_PX = 0.1 + 0.4
EXAMPLE_PROBABILITY = 0.001 + 0.0005
JPEG_SUFFIXES = (".jpg", ".jpeg")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pair_up(found, expected):
    """Each of grin-detect's faces with the best-overlapping unpaired one of
    the example's: None when the counts differ, else the largest box, score
    and smile differences."""
    if len(found) != len(expected):
        return None
    worst, free = [0.0, 0.0, 0.0], list(found)
    for e in expected:
        best = max(free, key=lambda d: iou(d["box"], e["box"]))
        free.remove(best)
        diffs = [max(abs(a - b) for a, b in zip(best["box"], e["box"])), abs(best["score"] - e["score"]),
                 abs(best["smile"] - e["smile"])]
        worst = [max(w, d) for w, d in zip(worst, diffs)]
    return worst


def example_agreement(args):
    """The example's JSON lines against grin-detect's on the same photos, in
    the same order. Lossless photos must agree within the tolerance; JPEGs
    are decoded by another library in the example (Pillow's libjpeg-turbo,
    not the image crate's zune-jpeg), so theirs is reported, and only their
    size (the EXIF orientation) must agree."""
    ours, grin = read_jsonl(args.example_output), read_jsonl(args.grin)
    if [r["image"] for r in ours] != [r["image"] for r in grin]:
        print(f"MISMATCH ({args.label}): the example reported {len(ours)} images, grin-detect {len(grin)}, "
              "or in another order")
        return 1
    groups = {"lossless": [], "jpeg": []}
    for mine, theirs in zip(ours, grin):
        group = "jpeg" if theirs["image"].lower().endswith(JPEG_SUFFIXES) else "lossless"
        same_size = (mine["width"], mine["height"]) == (theirs["width"], theirs["height"])
        worst = pair_up(mine["detections"], theirs["detections"]) if same_size else None
        agree = worst is not None and worst[0] <= EXAMPLE_BOX_PX and max(worst[1:]) <= EXAMPLE_PROBABILITY
        groups[group].append((theirs["image"], same_size, agree, worst, len(theirs["detections"]),
                              len(mine["detections"])))
    status = 0
    for group, rows in groups.items():
        if not rows:
            continue
        agreeing = sum(r[2] for r in rows)
        paired = [r[3] for r in rows if r[3] is not None]
        worst = [max((w[k] for w in paired), default=0.0) for k in range(3)]
        faces = sum(r[4] for r in rows)
        same_faces = "" if group == "lossless" else (
            f"; {len(paired)} with the same faces, decoded by another library")
        print(f"{args.label}, {group}: {agreeing} of {len(rows)} photos agree{same_faces} ({faces} faces by "
              f"grin-detect; largest differences where paired: box {worst[0]:.1f} px, score {worst[1]:.3f}, "
              f"smile {worst[2]:.3f})")
        for image, same_size, agree, diffs, theirs, mine in rows:
            # A JPEG's small differences are the decoders'; a face more or less is named.
            if agree or (group == "jpeg" and same_size and diffs is not None):
                continue
            if not same_size:
                why = "a different picture size (orientation?)"
            elif diffs is None:
                why = f"{mine} faces, grin-detect {theirs}"
            else:
                why = f"box {diffs[0]:.1f} px, score {diffs[1]:.3f}, smile {diffs[2]:.3f}"
            fatal = group == "lossless" or not same_size
            print(f"  {'MISMATCH' if fatal else 'decoder difference'}: {image}: {why}")
            status |= fatal
    return status


def example_frames(args):
    """The example's frames (decoding, grey, letterbox) against export_scenes'
    letterboxed grey photos (grin's photo path), byte for byte: each photo
    of args.frames that args.photos holds at its own size."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
    import detect_onnx
    from PIL import Image

    width, height = map(int, args.size.split("x"))
    names = sorted(n for n in os.listdir(args.frames) if n.endswith(".png")
                   and os.path.exists(os.path.join(args.photos, n)))
    differ = []
    for name in names:
        grin = np.asarray(Image.open(os.path.join(args.frames, name)).convert("L"))
        pixels = detect_onnx.read_image(os.path.join(args.photos, name))
        frame, _ = detect_onnx.letterbox(detect_onnx.to_channels(pixels, 1), width, height)
        ours = np.rint(frame[0] * 255).astype(np.uint8)
        if ours.shape != grin.shape or (ours != grin).any():
            differ.append(name)
    print(f"detect_onnx.py's frames at {args.size}: {len(names) - len(differ)} of {len(names)} byte-identical "
          f"to grin's letterboxed photos")
    for name in differ:
        print(f"  MISMATCH: {name}")
    return 1 if differ or not names else 0


def make_photos(args):
    """Photos of made-up shapes for the example's check, written to
    args.make_photos: the test scene tiled to odd aspect ratios and sizes
    (wide, tall, past the pixel cap, below the smallest run side), and one
    validation photo (the largest in args.photos) as RGBA, palette, grey and
    16-bit grey PNGs, stored turned with each EXIF orientation tag 2-8 (so
    that, turned as the tag says, it is upright again), and as JPEGs (plain,
    tagged 6 and 8, grey)."""
    from PIL import Image

    out = args.make_photos
    os.makedirs(out, exist_ok=True)
    scene = Image.open("assets/test-scene.png").convert("L")

    def tiled(width, height, tile_height):
        tile = scene.resize((round(scene.width * tile_height / scene.height), tile_height), Image.BICUBIC)
        canvas = Image.new("L", (width, height))
        for y in range(0, height, tile.height):
            for x in range(0, width, tile.width):
                canvas.paste(tile, (x, y))
        return canvas

    made = {
        "scene-1000x300": tiled(1000, 300, 300),
        "scene-300x1000": tiled(300, 1000, 225),
        "scene-3000x200": tiled(3000, 200, 200),  # its run size is clamped to 4096 wide
        "scene-2400x1800": scene.resize((2400, 1800), Image.BICUBIC),  # past 1920x1080 pixels
        "scene-961x541": tiled(961, 541, 270),
        "scene-20x15": scene.resize((20, 15), Image.BICUBIC),  # below the 32 px side
    }
    names = sorted(n for n in os.listdir(args.photos) if n.endswith(".png"))
    photo = max((Image.open(os.path.join(args.photos, n)).convert("RGB") for n in names),
                key=lambda im: im.width * im.height)
    rgba = photo.copy()
    rgba.putalpha(Image.linear_gradient("L").resize(photo.size))
    grey = np.asarray(photo.convert("L")).astype(np.int32)
    wobble = (np.arange(grey.size).reshape(grey.shape) * 37 % 255) - 127
    made.update({
        "photo-rgba": rgba,
        "photo-palette": photo.convert("P", palette=Image.ADAPTIVE, colors=200),
        "photo-grey": photo.convert("L"),
        "photo-grey16": Image.fromarray(np.clip(grey * 257 + wobble, 0, 65535).astype(np.uint16)),
    })
    # Stored so that the tag's turn shows it upright: the inverse of each turn.
    stored_as = {2: Image.FLIP_LEFT_RIGHT, 3: Image.ROTATE_180, 4: Image.FLIP_TOP_BOTTOM, 5: Image.TRANSPOSE,
                 6: Image.ROTATE_90, 7: Image.TRANSVERSE, 8: Image.ROTATE_270}
    for name, im in made.items():
        im.save(os.path.join(out, name + ".png"))
    for tag, turn in stored_as.items():
        exif = Image.Exif()
        exif[0x0112] = tag
        turned = photo.transpose(turn)
        turned.save(os.path.join(out, f"photo-exif{tag}.png"), exif=exif.tobytes())
        if tag in (6, 8):
            turned.save(os.path.join(out, f"photo-exif{tag}.jpg"), exif=exif.tobytes(), quality=92)
    photo.save(os.path.join(out, "photo.jpg"), quality=92)
    photo.convert("L").save(os.path.join(out, "photo-grey.jpg"), quality=92)
    print(f"wrote {len(os.listdir(out))} made-up photos to {out} (from a {photo.width}x{photo.height} photo)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--onnx")
    p.add_argument("--photos")
    p.add_argument("--size")
    p.add_argument("--grin")
    p.add_argument("--grin-bench")
    p.add_argument("--results")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--time", action="store_true")
    p.add_argument("--times")
    p.add_argument("--table")
    p.add_argument("--example-output")
    p.add_argument("--label", default="detect_onnx.py")
    p.add_argument("--make-photos")
    p.add_argument("--frames")
    args = p.parse_args()
    if args.table:
        sys.exit(table(args))
    if args.example_output:
        sys.exit(example_agreement(args))
    if args.make_photos:
        sys.exit(make_photos(args))
    if args.frames:
        sys.exit(example_frames(args))
    if args.time:
        time_round(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
