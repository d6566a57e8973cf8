#!/usr/bin/env python3
"""Report of `scripts/bench-photos.sh`: grin-detect against the YuNet peer,
each at its own defaults, on whole validation photos at their own size
(FDDB's news photos, Caltech WebFaces, CelebA portraits, face-free images).

Reads, under --work DIR, for each set (a folder export_scenes wrote with
--original): truth.json, DET-scored.jsonl (every detection each exposes:
grin down to 0.05, YuNet down to its library's floor of 0.2) and
DET-deployed.jsonl (its operating point). A face is found at IoU >= 0.3.

Per detector and source: recall and AP at IoU 0.3, false detections per
photo (at the operating point: matching no face and lying in no ignore
region); for faces, recall by the face box's width (FDDB's buckets: under
30, 30-60, 60-120, 120 px and more), for faces cut by the photo's edge and
for whole faces, the misses with no box centred on them and with a centred
box below IoU 0.3; and the box shape: for each face with a detection
centred on it (its centre within the middle half of the face box, each
way), the median of that box's IoU with the face box, of its width and
height over the face box's, and of its centre's offset (down is positive)
over the face box's height. Portraits: found and boxes per portrait.
Writes DIR/report.json. Standard library only; matching is scoring.py's.
"""

import argparse
import json
import os
import statistics
import struct

from scoring import Evaluation, fmt, grin_detections, iou, photo_figures

DETECTORS = ("grin", "yunet")
MATCH_IOU = 0.3
# Face box width, px at the photo's own size: [low, high).
WIDTHS = (("<30", 0.0, 30.0), ("30-60", 30.0, 60.0), ("60-120", 60.0, 120.0), (">=120", 120.0, float("inf")))
# A face box within this of the photo's edge was cut by it (boxes are
# clipped to the photo when read).
EDGE = 0.5


def png_size(path):
    with open(path, "rb") as f:
        return struct.unpack(">II", f.read(24)[16:24])


def centred(face, box):
    """`box`'s centre lies in the middle half of `face`, each way."""
    w, h = face[2] - face[0], face[3] - face[1]
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return face[0] + w / 4 <= cx <= face[2] - w / 4 and face[1] + h / 4 <= cy <= face[3] - h / 4


def news_figures(folder, scenes, deployed):
    """Recall by width, for cut and whole faces, the misses, and the box shape."""
    buckets = {name: [0, 0] for name, _, _ in WIDTHS}
    cut, whole = [0, 0], [0, 0]
    no_box = low_iou = 0
    shape = {"iou": [], "width": [], "height": [], "centre_down": []}
    for scene in scenes:
        name = scene["image"]
        pw, ph = png_size(os.path.join(folder, name))
        boxes = [d[0] for d in deployed[name]]
        faces = list(zip(scene["boxes"], scene["smile"]))
        matches = Evaluation(MATCH_IOU).add(deployed[name], faces, scene["ignore"])
        for (face, _), match in zip(faces, matches):
            hit = match is not None
            w, h = face[2] - face[0], face[3] - face[1]
            k = next(n for n, lo, hi in WIDTHS if lo <= w < hi)
            buckets[k][0] += 1
            buckets[k][1] += hit
            edge = face[0] <= EDGE or face[1] <= EDGE or face[2] >= pw - EDGE or face[3] >= ph - EDGE
            group = cut if edge else whole
            group[0] += 1
            group[1] += hit
            on_face = [b for b in boxes if centred(face, b)]
            if on_face:
                b = max(on_face, key=lambda b: iou(b, face))
                shape["iou"].append(iou(b, face))
                shape["width"].append((b[2] - b[0]) / w)
                shape["height"].append((b[3] - b[1]) / h)
                shape["centre_down"].append(((b[1] + b[3]) / 2 - (face[1] + face[3]) / 2) / h)
            if not hit:
                if on_face:
                    low_iou += 1
                else:
                    no_box += 1

    def share(pair):
        return {"faces": pair[0], "recall": pair[1] / pair[0] if pair[0] else None}

    return {
        "recall_by_width": {k: share(v) for k, v in buckets.items()},
        "cut": share(cut),
        "whole": share(whole),
        "missed_no_centred_box": no_box,
        "missed_centred_below_iou": low_iou,
        "centred_boxes": len(shape["iou"]),
        "centred_median": {k: statistics.median(v) if v else None for k, v in shape.items()},
    }


def report(work, sets):
    out = {}
    for folder_name in sets:
        folder = os.path.join(work, folder_name)
        with open(os.path.join(folder, "truth.json")) as f:
            truth = json.load(f)
        by_source = {}
        for scene in truth["scenes"]:
            by_source.setdefault(scene["source"], []).append(scene)
        for source, scenes in by_source.items():
            names = [s["image"] for s in scenes]
            row = {"photos": len(scenes)}
            for det in DETECTORS:
                scored = grin_detections(os.path.join(folder, f"{det}-scored.jsonl"), names)
                deployed = grin_detections(os.path.join(folder, f"{det}-deployed.jsonl"), names)
                figures = photo_figures(scenes, scored, deployed, match_iou=MATCH_IOU)
                figures.update(news_figures(folder, scenes, deployed))
                row[det] = figures
            out[source] = row
    return out


def print_report(rows, split):
    def line(label, get, digits=3):
        print(f"| {label} | " + " | ".join(fmt(get(rows_d), digits) for rows_d in current) + " |")

    for source, row in rows.items():
        current = [row[d] for d in DETECTORS]
        print(f"\n### {source} ({row['photos']} {split} photos, {current[0]['faces']} faces)\n")
        print("| figure | " + " | ".join(DETECTORS) + " |")
        print("|---|" + "---:|" * len(DETECTORS))
        if current[0]["faces"]:
            line("recall at IoU 0.3", lambda r: r["recall"])
            line("AP at IoU 0.3", lambda r: r["ap"])
            for name, _, _ in WIDTHS:
                n = current[0]["recall_by_width"][name]["faces"]
                line(f"recall, width {name} px ({n})", lambda r, name=name: r["recall_by_width"][name]["recall"])
            line(f"recall, cut by the frame ({current[0]['cut']['faces']})", lambda r: r["cut"]["recall"])
            line(f"recall, whole faces ({current[0]['whole']['faces']})", lambda r: r["whole"]["recall"])
            line("missed, no centred box", lambda r: r["missed_no_centred_box"], 0)
            line("missed, centred box below IoU 0.3", lambda r: r["missed_centred_below_iou"], 0)
            line("centred box: median IoU", lambda r: r["centred_median"]["iou"])
            line("centred box: width / face box's", lambda r: r["centred_median"]["width"])
            line("centred box: height / face box's", lambda r: r["centred_median"]["height"])
            line("centred box: centre lower by (of height)", lambda r: r["centred_median"]["centre_down"])
        if current[0]["portraits"]:
            line("portraits found", lambda r: r["found"])
            line("boxes per portrait", lambda r: r["detections_per_image"])
            line("smile accuracy", lambda r: r["smile_accuracy"])
        line("false detections per photo", lambda r: r["false_per_image"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", required=True)
    p.add_argument("--sets", required=True, help="comma-separated folders under --work")
    p.add_argument("--split", default="validation", help="the split's name, as the report says it")
    p.add_argument("--conditions", default="")
    args = p.parse_args()
    rows = report(args.work, args.sets.split(","))
    with open(os.path.join(args.work, "report.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"grin-detect and YuNet at their own defaults, each photo at its own size; found at IoU {MATCH_IOU}")
    if args.conditions:
        print(args.conditions)
    print_report(rows, args.split)


if __name__ == "__main__":
    main()
