"""A second look at low-scoring boxes, measured offline (issue "as few false
faces as YuNet"): each box scoring below --below is cut from its photo with
--context times its side around it, scaled to --side pixels square, and run
through grin-detect again at that size; the box stays only if a detection
there overlaps its place (IoU >= 0.3). Prints, per source, true and false
boxes before and after, and the true boxes it took.

Not grin's detection path: a prototype that says whether the stage is worth
building into it. Usage (from the repository root, with Pillow):

    export_scenes --out DIR --validation --channels 3 --count 150 --original --min-face 10 \\
        --caltech ... --celeba-images ... --celeba-attr ... --face-free data/negatives/images
    grin-detect --json --model M DIR/*.png > DETS
    python3 scripts/peers/second_look.py --photos DIR --detections DETS --model M
"""
import argparse, json, os, subprocess, sys, tempfile

from PIL import Image

from scoring import iou

MATCH = 0.3


def kinds(truth, found):
    """Every box with its photo, side, score and kind: true (IoU >= 0.3 with a
    face), ignored (with an ignore region), false, or face-free."""
    rows = []
    for name, detections in found.items():
        scene = truth[name]
        for d in detections:
            box = d["box"]
            if scene["source"] == "face-free":
                kind = "false"
            elif max([iou(box, g) for g in scene["boxes"]] + [0]) >= MATCH:
                kind = "true"
            elif max([iou(box, g) for g in scene["ignore"]] + [0]) >= MATCH:
                kind = "ignored"
            else:
                kind = "false"
            side = max(box[2] - box[0], box[3] - box[1])
            rows.append(dict(name=name, box=box, side=side, score=d["score"], kind=kind, source=scene["source"]))
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--photos", required=True)
    p.add_argument("--detections", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--grin-detect", default="target/release/grin-detect")
    p.add_argument("--context", type=float, default=3.0)
    p.add_argument("--side", type=int, default=144)
    p.add_argument("--below", type=float, default=0.65)
    a = p.parse_args()
    truth = {s["image"]: s for s in json.load(open(os.path.join(a.photos, "truth.json")))["scenes"]}
    found = {}
    for line in open(a.detections):
        report = json.loads(line)
        found[os.path.basename(report["image"])] = report["detections"]
    if set(found) != set(truth):
        sys.exit(f"{a.detections}: results for {len(found)} images, {len(truth)} in {a.photos}/truth.json")
    rows = kinds(truth, found)
    looked = [r for r in rows if r["score"] < a.below]
    half = a.side / (2 * a.context)
    place = [a.side / 2 - half, a.side / 2 - half, a.side / 2 + half, a.side / 2 + half]
    with tempfile.TemporaryDirectory() as tmp:
        crops = []
        for i, r in enumerate(looked):
            image = Image.open(os.path.join(a.photos, r["name"])).convert("RGB")
            b = r["box"]
            cx, cy, s = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2, r["side"] * a.context
            cut = image.crop((int(cx - s / 2), int(cy - s / 2), int(cx + s / 2), int(cy + s / 2)))
            path = os.path.join(tmp, f"look-{i:05d}.png")
            cut.resize((a.side, a.side), Image.BICUBIC).save(path)
            crops.append(path)
        second = {}
        for start in range(0, len(crops), 200):
            out = subprocess.run([a.grin_detect, "--json", "--model", a.model, "--size", f"{a.side}x{a.side}"]
                                 + crops[start:start + 200], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                report = json.loads(line)
                second[report["image"]] = report["detections"]
    dropped = {id(r) for r, c in zip(looked, crops) if not any(iou(d["box"], place) >= MATCH for d in second[c])}
    print(f"second look at {len(looked)} boxes scoring below {a.below} (context {a.context}, {a.side} px): "
          f"{len(dropped)} dropped")
    for source in sorted({s["source"] for s in truth.values()}):
        images = sum(1 for s in truth.values() if s["source"] == source)
        before = [r for r in rows if r["source"] == source]
        after = [r for r in before if id(r) not in dropped]
        count = lambda rs, k: sum(1 for r in rs if r["kind"] == k)
        print(f"{source:15} {images:4} images: true {count(before, 'true')} -> {count(after, 'true')}, "
              f"false {count(before, 'false')} -> {count(after, 'false')} "
              f"({count(before, 'false') / images:.3f} -> {count(after, 'false') / images:.3f} an image), "
              f"boxes an image {len(before) / images:.3f} -> {len(after) / images:.3f}")
    lost = [r for r in looked if id(r) in dropped and r["kind"] == "true"]
    print("true boxes dropped:", ", ".join(f"{r['name']} ({r['side']:.0f} px, {r['score']})" for r in lost) or "none")


if __name__ == "__main__":
    main()
