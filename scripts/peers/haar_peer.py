#!/usr/bin/env python3
"""Peer for `scripts/bench-detect.sh`: OpenCV's Haar cascade face detector
(haarcascade_frontalface_default.xml, shipped inside the opencv wheel) on the
same held-out scenes grin-detect ran on, single-threaded.

Latency: `detectMultiScale` with OpenCV's defaults (scaleFactor 1.1,
minNeighbors 3, minSize = the 24x24 window) on images already decoded to
grayscale, as grin-detect's --bench times from decoded images.

AP@0.5 is computed exactly as grin_model::metrics does it (greedy matching,
highest score first, each face matched once at IoU >= 0.5; all-point
interpolated precision-recall area), for grin's detections (from its --json
output) and for Haar's. Haar gives no scores: its AP is reported with
`detectMultiScale3` levelWeights as scores, and for plain detectMultiScale
with every score 1.

Modes:
  --size WxH --scenes DIR --grin-detections F --grin-bench F --results R
      measures one size and appends a row to R (JSON lines);
  --table R   prints the table of all rows in R.
"""

import argparse
import json
import os
import statistics
import sys
import time

import cv2
import numpy as np

MATCH_IOU = 0.5


def iou(a, b):
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


class Evaluation:
    """A port of grin_model::metrics::Evaluation (face AP only)."""

    def __init__(self):
        self.scored = []
        self.faces = 0

    def add(self, detections, faces):
        # detections: [(box, score)], faces: [box]
        order = sorted(range(len(detections)), key=lambda i: -detections[i][1])
        taken = [False] * len(faces)
        for i in order:
            box, score = detections[i]
            best, best_iou = None, -1.0
            for j, face in enumerate(faces):
                if taken[j]:
                    continue
                o = iou(box, face)
                # max_by keeps the last of equal maxima.
                if o >= MATCH_IOU and o >= best_iou:
                    best, best_iou = j, o
            if best is None:
                self.scored.append((score, False))
            else:
                taken[best] = True
                self.scored.append((score, True))
        self.faces += len(faces)

    def average_precision(self):
        if self.faces == 0:
            return 0.0 if any(not hit for _, hit in self.scored) else 1.0
        scored = sorted(self.scored, key=lambda s: -s[0])
        tp = fp = 0
        curve = []
        for _, hit in scored:
            if hit:
                tp += 1
            else:
                fp += 1
            curve.append((tp / self.faces, tp / (tp + fp)))
        ap, best_precision = 0.0, 0.0
        previous_recall = curve[-1][0] if curve else 0.0
        for recall, precision in reversed(curve):
            ap += (previous_recall - recall) * best_precision
            best_precision = max(best_precision, precision)
            previous_recall = recall
        return ap + previous_recall * best_precision


def load_truth(scenes):
    with open(os.path.join(scenes, "truth.json")) as f:
        truth = json.load(f)
    return truth, {s["image"]: s["boxes"] for s in truth["scenes"]}


def grin_ap(detections_path, faces_by_image):
    evaluation = Evaluation()
    seen = set()
    with open(detections_path) as f:
        for line in f:
            report = json.loads(line)
            name = os.path.basename(report["image"])
            seen.add(name)
            evaluation.add([(d["box"], d["score"]) for d in report["detections"]], faces_by_image[name])
    missing = set(faces_by_image) - seen
    if missing:
        sys.exit(f"{detections_path}: no grin result for {len(missing)} scenes, e.g. {sorted(missing)[0]}")
    return evaluation.average_precision()


def measure(args):
    cv2.setNumThreads(1)
    truth, faces_by_image = load_truth(args.scenes)
    cascade_path = os.path.join(cv2.data.haarcascades, "haarcascade_frontalface_default.xml")
    cascade = cv2.CascadeClassifier(cascade_path)
    if cascade.empty():
        sys.exit(f"{cascade_path}: cannot load the Haar cascade")
    names = [s["image"] for s in truth["scenes"]]
    images = []
    for name in names:
        img = cv2.imread(os.path.join(args.scenes, name), cv2.IMREAD_GRAYSCALE)
        if img is None:
            sys.exit(f"{os.path.join(args.scenes, name)}: cannot read")
        images.append(img)

    plain, weighted = Evaluation(), Evaluation()
    for name, img in zip(names, images):
        boxes = cascade.detectMultiScale(img, scaleFactor=1.1, minNeighbors=3)
        plain.add([((x, y, x + w, y + h), 1.0) for (x, y, w, h) in boxes], faces_by_image[name])
        boxes, _, weights = cascade.detectMultiScale3(
            img, scaleFactor=1.1, minNeighbors=3, outputRejectLevels=True
        )
        weighted.add(
            [((x, y, x + w, y + h), float(s)) for (x, y, w, h), s in zip(boxes, np.ravel(weights))],
            faces_by_image[name],
        )

    for i in range(args.warmup):
        cascade.detectMultiScale(images[i % len(images)], scaleFactor=1.1, minNeighbors=3)
    times = []
    for i in range(args.iterations):
        img = images[i % len(images)]
        start = time.perf_counter()
        cascade.detectMultiScale(img, scaleFactor=1.1, minNeighbors=3)
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    p95 = times[min(max(int(np.ceil(0.95 * len(times))), 1), len(times)) - 1]

    with open(args.grin_bench) as f:
        grin = json.loads(f.readline())
    row = {
        "size": args.size,
        "scenes": len(names),
        "faces": plain.faces,
        "grin_median_ms": grin["median_ms"],
        "grin_p95_ms": grin["p95_ms"],
        "grin_fps": grin["fps"],
        "grin_params": grin["params"],
        "grin_mflops": grin["mflops"],
        "grin_ap": grin_ap(args.grin_detections, faces_by_image),
        "haar_median_ms": statistics.median(times),
        "haar_p95_ms": p95,
        "haar_fps": len(times) * 1e3 / sum(times),
        "haar_ap_weights": weighted.average_precision(),
        "haar_ap_plain": plain.average_precision(),
        "threads": grin["threads"],
        "scenes_kind": args.kind,
        "opencv": cv2.__version__,
    }
    with open(args.results, "a") as f:
        f.write(json.dumps(row) + "\n")


def table(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    print(f"grin-detect vs OpenCV {rows[0]['opencv']} Haar cascade, 1 thread, same images "
          f"(held-out scenes: synthetic, or SMILEsmileD test-split crops composited), latency from decoded images")
    header = ("scenes", "size", "grin med ms", "grin p95 ms", "grin fps", "Haar med ms", "Haar p95 ms", "Haar fps",
              "speed-up", "grin AP@0.5", "Haar AP (weights)", "Haar AP (plain)", "params", "MFLOPs")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        cells = (
            r.get("scenes_kind", "synthetic"),
            r["size"],
            f"{r['grin_median_ms']:.2f}",
            f"{r['grin_p95_ms']:.2f}",
            f"{r['grin_fps']:.0f}",
            f"{r['haar_median_ms']:.2f}",
            f"{r['haar_p95_ms']:.2f}",
            f"{r['haar_fps']:.0f}",
            f"{r['haar_median_ms'] / r['grin_median_ms']:.1f}x",
            f"{r['grin_ap']:.3f}",
            f"{r['haar_ap_weights']:.3f}",
            f"{r['haar_ap_plain']:.3f}",
            f"{r['grin_params']}",
            f"{r['grin_mflops']:.1f}",
        )
        print("| " + " | ".join(cells) + " |")
    print(f"({rows[0]['scenes']} scenes per size; speed-up = Haar median / grin median)")
    # The target: faster than Haar at every size, with better AP on
    # held-out scenes (composite or synthetic): judged per kind of scene.
    kinds = {}
    for r in rows:
        ok = r["grin_median_ms"] < r["haar_median_ms"] and r["grin_ap"] > max(r["haar_ap_weights"], r["haar_ap_plain"])
        kinds.setdefault(r.get("scenes_kind", "synthetic"), []).append((r["size"], ok))
    for kind, results in kinds.items():
        failed = [size for size, ok in results if not ok]
        print(f"target on {kind} scenes (faster than Haar with better AP at every size): "
              + ("met" if not failed else "NOT met at " + ", ".join(failed)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size")
    p.add_argument("--scenes")
    p.add_argument("--grin-detections")
    p.add_argument("--grin-bench")
    p.add_argument("--results")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--kind", default="synthetic", help="what the scenes are, for the table")
    p.add_argument("--table")
    args = p.parse_args()
    if args.table:
        table(args.table)
    else:
        for flag in ("size", "scenes", "grin_detections", "grin_bench", "results"):
            if getattr(args, flag) is None:
                p.error(f"--{flag.replace('_', '-')} is required without --table")
        measure(args)


if __name__ == "__main__":
    main()
