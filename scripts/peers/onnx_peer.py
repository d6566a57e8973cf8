#!/usr/bin/env python3
"""Runs grin's ONNX export (`grin export`) with onnxruntime and with
OpenCV's DNN module on the photos grin-detect ran on, decodes as grin does,
and compares the detections with grin-detect's JSON; then times all three
on one thread. Run by `scripts/onnx-check.sh`.

It is also the reference decoder of the export's `detections` output
(`[batch, points, 6]`: x0, y0, x1, y1, face score, smile probability per
point), written to follow crates/model/src/decode.rs and pyramid.rs:

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
  --snippet-output F --grin F
      the README's camera snippet's output (one line per face, `--` per
      frame) against grin-detect's one-pass JSON on the same frames.
"""

import argparse
import json
import math
import os
import statistics
import sys

import cv2
import numpy as np
import onnxruntime as ort

from haar_peer import grin_detections, iou, load_images, read_grin_bench, time_ms

# Agreement required with grin-detect's JSON (boxes rounded to 0.1 px,
# probabilities to 3 decimals).
BOX_TOLERANCE_PX = 0.5
SCORE_TOLERANCE = 1e-3


def settings(path):
    meta = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_modelmeta().custom_metadata_map
    return {
        "score_threshold": float(meta["score_threshold"]),
        "nms_iou": float(meta["nms_iou"]),
        "max_detections": int(meta["max_detections"]),
        "smile_vote_floor": float(meta["smile_vote_floor"]),
        "pyramid_above": float(meta["pyramid_above"]),
        "pyramid_min_side": int(meta["pyramid_min_side"]),
        "pyramid_seam": float(meta["pyramid_seam"]),
        "channels": int(meta["channels"]),
    }


def logit(p):
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def nms(found, s):
    """found: [x0, y0, x1, y1, score, smile] lists; decode.rs's nms."""
    found = sorted(found, key=lambda d: -d[4])
    kept = []
    for d in found:
        if len(kept) == s["max_detections"]:
            break
        if all(iou(k, d) <= s["nms_iou"] for k in kept):
            kept.append(list(d))
    for k in kept:
        votes = [d for d in found if d[4] >= s["smile_vote_floor"] and iou(k, d) > s["nms_iou"]]
        weight = sum(d[4] for d in votes)
        if weight > 0:
            k[5] = 1 / (1 + math.exp(-sum(d[4] * logit(d[5]) for d in votes) / weight))
    return kept


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
    cv2.setNumThreads(1)
    net = cv2.dnn.readNetFromONNX(path)

    def opencv(blob):
        net.setInput(np.ascontiguousarray(blob))
        return net.forward("detections")[0]

    return {
        "onnxruntime": lambda blob: session.run(["detections"], {"image": blob})[0][0],
        "opencv-dnn": opencv,
    }


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


def snippet(args):
    """The snippet prints `x0 y0 x1 y1 score smile` per face and `--` after
    each frame, frames in file-name order."""
    with open(args.snippet_output) as f:
        frames, current = [], []
        for line in f:
            if line.strip() == "--":
                frames.append(current)
                current = []
            elif line.strip():
                current.append([float(v) for v in line.split()])
    with open(args.grin) as f:
        reports = [json.loads(line) for line in f]
    reports.sort(key=lambda r: os.path.basename(r["image"]))
    if len(frames) != len(reports):
        print(f"MISMATCH: the snippet printed {len(frames)} frames for {len(reports)} images")
        return 1
    agree, worst_box, worst_score, faces = 0, 0.0, 0.0, 0
    for found, report in zip(frames, reports):
        # The snippet keeps each face's own smile (no votes): boxes and scores only.
        expected = [(d["box"], d["score"], 0.0) for d in report["detections"]]
        same, diffs = compare([d[:5] + [0.0] for d in found], expected)
        agree += same
        faces += len(found)
        if same:
            worst_box, worst_score = max(worst_box, diffs[0]), max(worst_score, diffs[1])
    ok = agree == len(reports) and worst_box <= BOX_TOLERANCE_PX and worst_score <= SCORE_TOLERANCE
    print(f"README camera snippet (OpenCV DNN, one pass, cv2.dnn.NMSBoxes) vs grin-detect --pyramid-above 0: "
          f"{agree} / {len(reports)} frames agree, {faces} faces, max box diff {worst_box:.3f} px, "
          f"max score diff {worst_score:.4f}{'' if ok else '  MISMATCH'}")
    return 0 if ok else 1


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
    p.add_argument("--snippet-output")
    args = p.parse_args()
    if args.table:
        sys.exit(table(args))
    if args.snippet_output:
        sys.exit(snippet(args))
    if args.time:
        time_round(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
