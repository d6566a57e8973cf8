#!/usr/bin/env python3
"""Scoring shared by the detector benchmarks' peers (`haar_peer.py` for
`scripts/bench-detect.sh`, `yunet_peer.py` for `scripts/bench-latency.sh`,
`onnx_peer.py`, `smile_agreement.py`, `features_peer.py`): box overlap, the
decoder's suppression, box matching, AP, timing percentiles, and the figures
on held-out photos, as grin scores itself: the one Python copy of rules
whose owners are in Rust (named at each). Standard library only.

Matching follows crates/model/src/metrics.rs (greedy, highest score first,
each face matched once at IoU >= 0.5 unless asked otherwise; all-point
interpolated precision-recall area) and crates/train/src/photo_eval.rs
(ignore regions, size buckets, found). Faces export_scenes marks `ignore` (too
small, cut off) are not faces: a detection that matches no face but covers
one (IoU >= 0.5, or its centre inside) is neither a true nor a false
positive.
"""

import json
import math
import os
import sys

MATCH_IOU = 0.5

# Longer box side at the run size, px: [low, high).
SIZE_BUCKETS = (("small", 0.0, 24.0), ("medium", 24.0, 64.0), ("large", 64.0, float("inf")))


def area(b):
    return (b[2] - b[0]) * (b[3] - b[1])


def intersection(a, b):
    """grin_terms::boxes::intersection."""
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    return iw * ih


def iou(a, b):
    """grin_terms::boxes::iou."""
    inter = intersection(a, b)
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def percentile(values, q):
    """grin_terms::percentile: the nearest-rank q-quantile (the smallest
    value with at least a share q of the values at or below it; 0 for none),
    so the p95 of 20 timings is the 19th fastest."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = math.ceil(min(max(q, 0.0), 1.0) * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


def logit(p):
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def nested_in(inner, outer, s):
    """grin_model::nested_in: `inner` lies mostly inside the better `outer`
    (their intersection covers nested_cover of it, and it is at most
    nested_area of `outer`'s area); nested_cover 0 turns it off."""
    if s["nested_cover"] == 0:
        return False
    own = area(inner)
    return own > 0 and intersection(inner, outer) >= s["nested_cover"] * own and own <= s["nested_area"] * area(outer)


def nms(found, s):
    """grin_net::nms over [x0, y0, x1, y1, score, smile] lists, with the
    decode settings `s` (an export's metadata): greedy, best first, the
    smile a score-weighted vote in logits. Plain Python, not NumPy: on a few
    boxes it is the faster, and onnx_peer.py times it (measured: onnxruntime's
    320x240 median 2.7 ms with this, 3.4-3.5 ms with onnxruntime's example's)."""
    found = sorted(found, key=lambda d: -d[4])
    kept = []
    for d in found:
        if len(kept) == s["max_detections"]:
            break
        if all(iou(k, d) <= s["nms_iou"] and not nested_in(d, k, s) for k in kept):
            kept.append(list(d))
    for k in kept:
        votes = [d for d in found if d[4] >= s["smile_vote_floor"] and iou(k, d) > s["nms_iou"]]
        weight = sum(d[4] for d in votes)
        if weight > 0:
            k[5] = 1 / (1 + math.exp(-sum(d[4] * logit(d[5]) for d in votes) / weight))
    return kept


def covers(region, box):
    """A detection lies on an ignore box: IoU >= 0.5, or its centre inside."""
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    inside = region[0] <= cx <= region[2] and region[1] <= cy <= region[3]
    return inside or iou(box, region) >= MATCH_IOU


class Evaluation:
    """A port of grin_model::metrics::Evaluation; a detection matches a face
    at IoU >= `match_iou` (0.5 unless asked)."""

    def __init__(self, match_iou=MATCH_IOU):
        self.match_iou = match_iou
        self.scored = []
        self.faces = 0
        self.smile_correct = 0
        self.smile_total = 0

    def add(self, detections, faces, ignore=()):
        """detections: [(box, score, smile probability or None)];
        faces: [(box, smile label or None)]; ignore: [box].
        Returns, per face, the detection that matched it, or None."""
        order = sorted(range(len(detections)), key=lambda i: -detections[i][1])
        matches = [None] * len(faces)
        for i in order:
            box, score, smile = detections[i]
            best, best_iou = None, -1.0
            for j, (face, _) in enumerate(faces):
                if matches[j] is not None:
                    continue
                o = iou(box, face)
                # max_by keeps the last of equal maxima.
                if o >= self.match_iou and o >= best_iou:
                    best, best_iou = j, o
            if best is not None:
                matches[best] = detections[i]
                self.scored.append((score, True))
                label = faces[best][1]
                if label is not None and smile is not None:
                    self.smile_total += 1
                    self.smile_correct += (smile >= 0.5) == label
            elif not any(covers(region, box) for region in ignore):
                self.scored.append((score, False))
        self.faces += len(faces)
        return matches

    def average_precision(self):
        """None without faces (a face-free set has no curve), as in grin."""
        if self.faces == 0:
            return None
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

    def smile_accuracy(self):
        return self.smile_correct / self.smile_total if self.smile_total else None


def grin_detections(path, names):
    """grin-detect --json output (or a peer's in the same format) as {image
    name: [(box, score, smile)]}, for every one of `names`; smile is None
    for a detector with no smile output (no "smile" key)."""
    found = {}
    with open(path) as f:
        for line in f:
            report = json.loads(line)
            found[os.path.basename(report["image"])] = [
                (d["box"], d["score"], d.get("smile")) for d in report["detections"]
            ]
    missing = set(names) - set(found)
    if missing:
        sys.exit(f"{path}: no grin result for {len(missing)} images, e.g. {sorted(missing)[0]}")
    return {name: found[name] for name in names}


def photo_figures(scenes, scored, deployed, match_iou=MATCH_IOU):
    """Accuracy figures on photos: AP from `scored` (every detection with a
    score), the rest from `deployed` (the detections at the operating point);
    both map image name -> [(box, score, smile)]. A face is matched at IoU
    >= `match_iou`."""
    ranked, operating = Evaluation(match_iou), Evaluation(match_iou)
    by_size = [[0, 0] for _ in SIZE_BUCKETS]
    shown = smiling = ignored = portraits = found = 0
    for scene in scenes:
        name = scene["image"]
        faces = list(zip(scene["boxes"], scene["smile"]))
        ranked.add(scored[name], faces, scene["ignore"])
        matches = operating.add(deployed[name], faces, scene["ignore"])
        shown += len(deployed[name])
        smiling += sum(smile is not None and smile >= 0.5 for _, _, smile in deployed[name])
        ignored += len(scene["ignore"])
        for (box, _), match in zip(faces, matches):
            side = max(box[2] - box[0], box[3] - box[1])
            k = next(k for k, (_, lo, hi) in enumerate(SIZE_BUCKETS) if lo <= side < hi)
            by_size[k][0] += 1
            by_size[k][1] += match is not None
        if scene["portrait"] and faces:
            portraits += 1
            found += all(match is not None for match in matches)
    hits = sum(hit for _, hit in by_size)
    return {
        "faces": ranked.faces,
        "ignored_faces": ignored,
        "ap": ranked.average_precision(),
        "recall": hits / ranked.faces if ranked.faces else None,
        "recall_by_size": {
            bucket: {"faces": n, "recall": hit / n if n else None}
            for (bucket, _, _), (n, hit) in zip(SIZE_BUCKETS, by_size)
        },
        "detections_per_image": shown / len(scenes),
        # Detections at the operating point that match no face (at `match_iou`)
        # and lie in no ignore region: grin_train's `false_per_image`.
        "false_per_image": sum(1 for _, hit in operating.scored if not hit) / len(scenes),
        "smiling": smiling / shown if shown and any(d[2] is not None for ds in deployed.values() for d in ds) else None,
        "portraits": portraits,
        "found": found / portraits if portraits else None,
        "smile_accuracy": operating.smile_accuracy(),
        "smile_faces": operating.smile_total,
    }


def fmt(value, digits=3):
    return "n/a" if value is None else f"{value:.{digits}f}"
