#!/usr/bin/env python3
"""Report of `scripts/bench-latency.sh`: grin-detect against the YuNet peer
(libfacedetection, built from ../shared/peers/yunet) on the same held-out
validation photos, letterboxed to each size by export_scenes.

Reads, under --work DIR:
  latency.jsonl       one line per timed run: {"detector", "size", "round",
                      "median_ms", "p95_ms"} (the runs alternate grin and
                      YuNet, size by size, round by round); size "photo" is
                      each detector at its own default size, one line per
                      photo ("photo", "run_size");
  SIZE/truth.json     export_scenes' ground truth;
  SIZE/DET-scored.jsonl, SIZE/DET-deployed.jsonl
                      each detector's --json lines: every detection it
                      exposes (grin down to score 0.05, YuNet down to its
                      library's floor of 0.2), and at its operating point
                      (grin: the model's threshold; YuNet: the driver's 0.5).

Prints the latency table (per size: the median over rounds of each round's
median and p95, and the ratio of those medians), the accuracy table (per
source and size: AP@0.5 and AP@0.3 from the scored runs; recall by face
size, detections per image, portraits found and, for grin, smile accuracy
at the operating point), grin's threshold swept from 0.50 to 0.80 against
YuNet's operating point (Caltech recall and false detections, detections per
portrait), and as its last line
`grin/yunet <R>x at 320x240, <R>x at 640x480`. Writes DIR/report.json.
Standard library only: the scoring is scoring.py's, shared with the Haar peer.
"""

import argparse
import json
import os
import statistics
import sys

from scoring import fmt, grin_detections, percentile, photo_figures

DETECTORS = ("grin", "yunet")


def read_runs(work):
    with open(os.path.join(work, "latency.jsonl")) as f:
        return [json.loads(line) for line in f]


def photo_medians(runs, detectors):
    """The photo rows' runs by photo and detector, and per detector and
    photo the median over rounds of the run's median."""
    per_photo = {}
    for r in runs:
        if r["size"] == "photo":
            per_photo.setdefault(r["photo"], {}).setdefault(r["detector"], []).append(r)
    medians = {d: {} for d in detectors}
    for photo, by_detector in per_photo.items():
        for detector in detectors:
            mine = by_detector.get(detector)
            if not mine:
                sys.exit(f"latency.jsonl: no {detector} runs on {photo}")
            medians[detector][photo] = statistics.median(r["median_ms"] for r in mine)
    return per_photo, medians


def photo_latency(runs):
    """Each detector at its own default size on each photo: per photo, the
    median over rounds of the run's median; per detector, the median over
    photos; the ratio per photo, its median and its largest."""
    per_photo, medians = photo_medians(runs, DETECTORS)
    row = {"size": "photo"}
    for detector in DETECTORS:
        row[detector] = {
            "photos": len(per_photo),
            "median_ms": statistics.median(medians[detector].values()),
            "p95_ms": percentile(medians[detector].values(), 0.95),
            "rounds": max(len(v[detector]) for v in per_photo.values()),
        }
    ratios = {p: medians["grin"][p] / medians["yunet"][p] for p in per_photo}
    row["ratio"] = statistics.median(ratios.values())
    row["round_ratios"] = sorted(ratios.values())
    row["worst_photo"] = max(ratios, key=ratios.get)
    return row


def compared(run):
    """The figure a fixed-size row compares: the same work on both sides, from
    a frame already at the run size. YuNet's is facedetect_cnn (its driver
    resizes before the timer); grin's is its network, decoding and second
    look (a model with one), frame by frame (its scaling is reported beside
    it). Runs recorded before grin-detect reported that median give the sum
    of the parts' medians, which leaves out a look that most frames skip."""
    if run["detector"] != "yunet":
        if "detection_ms" in run:
            return run["detection_ms"]
        return run["network_ms"] + run["decoding_ms"] + run.get("second_look_ms", 0.0)
    return run["median_ms"]


def against_baseline(runs, sizes):
    """grin against the BASELINE model timed in the same rounds, size by
    size: each one's median over rounds of the compared figure and of the
    mean per frame, and the growth of each (photo: per photo, the median over
    rounds; the growth is the median over photos of the per-photo ratio).
    None when no baseline was timed."""
    if not any(r["detector"] == "baseline" for r in runs):
        return None
    rows = {}
    for size in sizes:
        mine = [r for r in runs if r["size"] == size and r["detector"] in ("grin", "baseline")]
        if size == "photo":
            per_photo, medians = photo_medians(mine, ("grin", "baseline"))
            rows[size] = {
                "grin_ms": statistics.median(medians["grin"].values()),
                "baseline_ms": statistics.median(medians["baseline"].values()),
                "growth": statistics.median(medians["grin"][p] / medians["baseline"][p] for p in per_photo),
            }
            continue
        by_round = {}
        for r in mine:
            by_round.setdefault(r["round"], {})[r["detector"]] = r
        pairs = [d for d in by_round.values() if len(d) == 2]
        figure = {who: statistics.median(compared(d[who]) for d in pairs) for who in ("grin", "baseline")}
        mean = {who: statistics.median(d[who]["detection_mean_ms"] for d in pairs) for who in ("grin", "baseline")}
        rows[size] = {
            "grin_ms": figure["grin"],
            "baseline_ms": figure["baseline"],
            "growth": figure["grin"] / figure["baseline"],
            "round_growths": sorted(compared(d["grin"]) / compared(d["baseline"]) for d in pairs),
            "grin_mean_ms": mean["grin"],
            "baseline_mean_ms": mean["baseline"],
            "mean_growth": mean["grin"] / mean["baseline"],
        }
    return rows


def print_baseline(rows):
    print()
    print("grin against the BASELINE model, timed in the same rounds right after it (the median is the fixed-size "
          "rows' compared figure; the mean is network + decoding + look over every timed frame, which a look that "
          "most frames skip moves more than the median):")
    header = ("size", "grin median ms", "baseline median ms", "grin/baseline", "per round", "grin mean ms",
              "baseline mean ms", "grin/baseline (mean)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for size, r in rows.items():
        cells = [size, fmt(r["grin_ms"], 2), fmt(r["baseline_ms"], 2), f"{r['growth']:.3f}x"]
        if "round_growths" in r:
            cells += [f"{min(r['round_growths']):.3f}-{max(r['round_growths']):.3f}x", fmt(r["grin_mean_ms"], 2),
                      fmt(r["baseline_mean_ms"], 2), f"{r['mean_growth']:.3f}x"]
        else:
            cells += ["(median over photos of each photo's ratio)", "", "", ""]
        print("| " + " | ".join(cells) + " |")


def latency(runs, sizes):
    rows = {}
    for size in sizes:
        if size == "photo":
            rows[size] = photo_latency(runs)
            continue
        row = {"size": size}
        for detector in DETECTORS:
            mine = [r for r in runs if r["detector"] == detector and r["size"] == size]
            if not mine:
                sys.exit(f"latency.jsonl: no {detector} runs at {size}")
            row[detector] = {
                "rounds": len(mine),
                "median_ms": statistics.median(compared(r) for r in mine),
                "p95_ms": statistics.median(r["p95_ms"] for r in mine),
                "round_medians_ms": [compared(r) for r in mine],
            }
            if detector == "grin":
                for part in ("whole", "scaling", "network", "decoding"):
                    key = "median_ms" if part == "whole" else f"{part}_ms"
                    row[detector][f"{part}_ms"] = statistics.median(r[key] for r in mine)
        # Each round's ratio, to show how much the shared machine moved them.
        by_round = {}
        for r in runs:
            if r["size"] == size:
                by_round.setdefault(r["round"], {})[r["detector"]] = compared(r)
        ratios = [d["grin"] / d["yunet"] for d in by_round.values() if "grin" in d and "yunet" in d]
        row["ratio"] = row["grin"]["median_ms"] / row["yunet"]["median_ms"]
        row["round_ratios"] = ratios
        rows[size] = row
    return rows


def accuracy(work, sizes):
    rows = []
    for size in sizes:
        folder = os.path.join(work, size)
        with open(os.path.join(folder, "truth.json")) as f:
            truth = json.load(f)
        sources = sorted({s["source"] for s in truth["scenes"]}, key=lambda s: (s != "caltech", s))
        for source in sources:
            scenes = [s for s in truth["scenes"] if s["source"] == source]
            names = [s["image"] for s in scenes]
            for detector in DETECTORS:
                scored = grin_detections(os.path.join(folder, f"{detector}-scored.jsonl"), names)
                deployed = grin_detections(os.path.join(folder, f"{detector}-deployed.jsonl"), names)
                at_05 = photo_figures(scenes, scored, deployed)
                at_03 = photo_figures(scenes, scored, deployed, match_iou=0.3)
                # AP from the operating point's detections only: what a user of
                # the defaults gets, and how the outside photos were scored.
                at_03_deployed = photo_figures(scenes, deployed, deployed, match_iou=0.3)
                rows.append(
                    {
                        "size": size,
                        "source": source,
                        "photos": len(scenes),
                        "detector": detector,
                        **at_05,
                        "ap_03": at_03["ap"],
                        "ap_03_deployed": at_03_deployed["ap"],
                        "recall_03": at_03["recall"],
                        "false_per_image_03": at_03["false_per_image"],
                    }
                )
    return rows


# grin's operating point swept past the model's threshold (issue "as few false
# faces as YuNet"): where grin's false detections on Caltech meet YuNet's at its
# own operating point, and what recall and the portraits' boxes cost there.
SWEPT_THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def threshold_sweep(work, folders):
    """Per folder: YuNet at its operating point, then grin at each of
    SWEPT_THRESHOLDS (its scored detections cut there), with Caltech's
    recall@0.3 and false/image@0.3 and detections per portrait."""
    rows = []
    for folder in folders:
        with open(os.path.join(work, folder, "truth.json")) as f:
            scenes = json.load(f)["scenes"]
        parts = {src: [s for s in scenes if s["source"] == src] for src in ("caltech", "celeba-aligned")}
        # Each file read once per folder, and only those the rows use: YuNet's deployed
        # detections; grin's thresholds cut its scored detections in memory.
        read = {
            (det, kind, src): grin_detections(os.path.join(work, folder, f"{det}-{kind}.jsonl"), [s["image"] for s in part])
            for det, kind in [(d, "scored") for d in DETECTORS] + [("yunet", "deployed")]
            for src, part in parts.items()
        }
        for detector, cut in [("yunet", None)] + [("grin", t) for t in SWEPT_THRESHOLDS]:
            f = {}
            for src, part in parts.items():
                scored = read[(detector, "scored", src)]
                at = read[(detector, "deployed", src)] if cut is None else {
                    n: [d for d in ds if d[1] >= cut] for n, ds in scored.items()}
                f[src] = photo_figures(part, scored, at, match_iou=0.3) if part else None
            rows.append({
                "photos": folder,
                "detector": detector if cut is None else f"grin at {cut:.2f}",
                "recall_03": f["caltech"]["recall"] if f["caltech"] else None,
                "false_per_image_03": f["caltech"]["false_per_image"] if f["caltech"] else None,
                "small_recall": f["caltech"]["recall_by_size"]["small"]["recall"] if f["caltech"] else None,
                "per_portrait": f["celeba-aligned"]["detections_per_image"] if f["celeba-aligned"] else None,
            })
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", required=True)
    p.add_argument("--sizes", default="320x240,640x480")
    p.add_argument("--accuracy-only", default="", help="folders under --work scored but not timed (comma-separated)")
    p.add_argument("--conditions", default="", help="a line about the machine, printed with the latency table")
    p.add_argument("--split", default="validation", help="the held-out split the photos come from, for the headings")
    args = p.parse_args()
    sizes = args.sizes.split(",")
    runs = read_runs(args.work)
    lat = latency(runs, sizes)
    base = against_baseline(runs, sizes)
    acc = accuracy(args.work, sizes + [f for f in args.accuracy_only.split(",") if f])

    print("Latency, one thread, same photos, grin-detect (pyramid included) and YuNet runs interleaved:")
    if args.conditions:
        print(args.conditions)
    header = ("size", "grin median ms", "grin p95 ms", "YuNet median ms", "YuNet p95 ms", "grin/YuNet", "per round",
              "grin scaling / network / decoding / whole frame ms")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for size, r in lat.items():
        g = r["grin"]
        cells = (
            "photo (each at its own default)" if size == "photo" else size,
            fmt(g["median_ms"], 2),
            fmt(g["p95_ms"], 2),
            fmt(r["yunet"]["median_ms"], 2),
            fmt(r["yunet"]["p95_ms"], 2),
            f"{r['ratio']:.2f}x",
            f"{min(r['round_ratios']):.2f}-{max(r['round_ratios']):.2f}x",
            " / ".join(fmt(g[f"{p}_ms"], 2) for p in ("scaling", "network", "decoding", "whole")) if "whole_ms" in g else "",
        )
        print("| " + " | ".join(cells) + " |")
    rounds = next(iter(lat.values()))["grin"]["rounds"]
    print(f"(median over {rounds} rounds of each round's median and p95; at a fixed size both sides time the same "
          "work from a frame already at that size: grin's network + decoding + second look, frame by frame (its p95 "
          "is the whole frame's), against YuNet's facedetect_cnn)")
    if "photo" in lat:
        r = lat["photo"]
        print(f"(photo: {r['grin']['photos']} photos, grin-detect at twice each photo's pixels and YuNet at its own "
              f"size; medians over photos of each photo's median over {r['grin']['rounds']} rounds, p95 over photos; "
              f"the ratio is the median of the per-photo ratios, its range over photos in the last column; "
              f"slowest relative to YuNet: {r['worst_photo']})")
    if base:
        print_baseline(base)
    print()
    print(f"Accuracy on the same {args.split} photos, letterboxed to each size (photo: each at its own size; "
          "aged: those photos made to look like old grey prints); faces under 1/32 of the width "
          "(photo, aged: 10 px) ignored:")
    header = ("photos", "detector", "AP@0.5", "AP@0.3", "AP@0.3 at the operating point", "recall@0.3",
              "recall small/medium/large", "detections/image", "false/image@0.3", "found", "smile accuracy")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in acc:
        cells = (
            f"{r['source']} at {r['size']} ({r['photos']})",
            r["detector"],
            fmt(r["ap"]),
            fmt(r["ap_03"]),
            fmt(r["ap_03_deployed"]),
            fmt(r["recall_03"]),
            " / ".join(fmt(b["recall"], 2) for b in r["recall_by_size"].values()),
            fmt(r["detections_per_image"], 2),
            fmt(r["false_per_image_03"], 2),
            fmt(r["found"]),
            fmt(r["smile_accuracy"]),
        )
        print("| " + " | ".join(cells) + " |")
    for r in acc:
        if r["detector"] == "grin":
            sizes_text = ", ".join(f"{bucket} {b['faces']}" for bucket, b in r["recall_by_size"].items())
            print(f"({r['source']} at {r['size']}: {r['faces']} faces ({sizes_text}), {r['ignored_faces']} ignored)")
    print("(AP from every detection each exposes: grin down to 0.05, YuNet down to 0.2, its library's floor; "
          "the rest at each one's operating point: grin's model threshold, YuNet's 0.5; size buckets are the "
          "longer box side in the row's pixels: small < 24, medium 24-64, large >= 64)")
    sweep = threshold_sweep(args.work, sizes + [f for f in args.accuracy_only.split(",") if f])
    print()
    print("grin's threshold swept against YuNet at its operating point (0.5), on the same photos: Caltech's "
          "recall@0.3, small-face recall and false detections per photo (unannotated faces count as false), "
          "CelebA's detections per portrait:")
    header = ("photos", "detector", "Caltech recall@0.3", "small-face recall@0.3", "false/photo@0.3", "detections/portrait")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in sweep:
        cells = (r["photos"], r["detector"], fmt(r["recall_03"]), fmt(r["small_recall"], 2),
                 fmt(r["false_per_image_03"], 2), fmt(r["per_portrait"], 2))
        print("| " + " | ".join(cells) + " |")
    with open(os.path.join(args.work, "report.json"), "w") as f:
        json.dump({"latency": lat, "baseline": base, "accuracy": acc, "threshold_sweep": sweep}, f, indent=1)
    if base:
        print("grin/baseline " + ", ".join(f"{r['growth']:.3f}x at {size}" for size, r in base.items()))
    print("grin/yunet " + ", ".join(f"{r['ratio']:.2f}x at {size}" for size, r in lat.items()))


if __name__ == "__main__":
    main()
