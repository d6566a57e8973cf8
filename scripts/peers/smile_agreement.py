"""Whether grin and the CNN peers of smile_ceiling.py get the same portraits
wrong: if most of grin's errors are every peer's errors too, those portraits
are hard for any classifier (ambiguous or mislabelled), not for grin's head.

Usage: smile_agreement.py EXPORT_DIR PEER_TSV...

EXPORT_DIR holds `export_scenes --celeba-images ... --count 2000
[--validation]` (the split's portraits, in file order, with truth.json) and
`grin.jsonl` (`grin-detect --json` on them). Each PEER_TSV is one peer's
predictions on the same split (smile_ceiling.py's `{split}-c{C}-s{S}.tsv`).
grin's smile for a portrait is that of its highest-scoring detection at IoU
0.5 or more with the portrait's box; portraits grin did not find are left out
of its figures and of the agreement.
"""

import json
import os
import sys

from scoring import grin_detections, iou


def grin_smiles(folder):
    scenes = [s for s in json.load(open(os.path.join(folder, "truth.json")))["scenes"] if s["portrait"]]
    found = grin_detections(os.path.join(folder, "grin.jsonl"), [s["image"] for s in scenes])
    rows = []
    for scene in scenes:
        matched = [d for d in found[scene["image"]] if iou(d[0], scene["boxes"][0]) >= 0.5]
        smile = max(matched, key=lambda d: d[1])[2] if matched else None
        rows.append((bool(scene["smile"][0]), smile))
    return rows


def read_peer(path, labels):
    rows = [line.rstrip("\n").split("\t") for line in open(path)]
    if [row[1] == "1" for row in rows] != labels:
        sys.exit(f"{path}: its portraits are not the export's (labels differ in order or count)")
    return [float(row[2]) for row in rows]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    folder, tsvs = sys.argv[1], sys.argv[2:]
    grin = grin_smiles(folder)
    labels = [label for label, _ in grin]
    peers = {os.path.basename(path): read_peer(path, labels) for path in tsvs}
    seen = [i for i, (_, smile) in enumerate(grin) if smile is not None]

    def wrong(probability, i):
        return (probability >= 0.5) != labels[i]

    grin_wrong = {i for i in seen if wrong(grin[i][1], i)}
    print(f"{folder}: grin found {len(seen)} of {len(grin)} portraits, smile accuracy "
          f"{1 - len(grin_wrong) / len(seen):.4f} ({len(grin_wrong)} wrong)")
    every_peer_wrong = set(seen)
    for name, probabilities in peers.items():
        peer_wrong = {i for i in range(len(labels)) if wrong(probabilities[i], i)}
        every_peer_wrong &= peer_wrong
        print(f"  {name}: smile accuracy {1 - len(peer_wrong) / len(labels):.4f}; "
              f"wrong on {len(grin_wrong & peer_wrong)} of grin's {len(grin_wrong)} wrong portraits")
    mean = [(grin[i][1] + sum(p[i] for p in peers.values())) / (1 + len(peers)) for i in seen]
    mean_right = sum(not wrong(m, i) for m, i in zip(mean, seen))
    print(f"  wrong for grin and every peer: {len(grin_wrong & every_peer_wrong)} of {len(grin_wrong)}; "
          f"the mean probability of grin and the peers: smile accuracy {mean_right / len(seen):.4f}")


if __name__ == "__main__":
    main()
