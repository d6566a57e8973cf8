"""The table scripts/bench-features.sh prints: grin against its PIL+NumPy and OpenCV peers.

  features_table.py WORK DATA

Reads WORK/grin.json (`grin features bench --json`), WORK/pil.json and WORK/cv2.json
(scripts/peers/features_peer.py); DATA is the crops folder, named in the first line. Prints
samples/s, per core, median and p95 ms per pipeline, grin's per-core ratios to each peer and
grin's per-stage cost.
"""
import json, sys
work, data = sys.argv[1], sys.argv[2]
g = json.load(open(f"{work}/grin.json"))
pil = json.load(open(f"{work}/pil.json"))
cv = json.load(open(f"{work}/cv2.json"))
single, par = g["single"], g["parallel"]
print(f"feature pipeline: crops from {data} -> {g['width']}x{g['height']}x{g['channels']} scenes + flip/brightness/contrast/blur/noise")
print("samples/s: best of 3 timed rounds of the given sample count each; median/p95 over all timed samples")
print(f"{'pipeline':<28}{'samples/s':>12}{'per core':>12}{'median ms':>12}{'p95 ms':>10}")
rows = [
    ("grin, 1 worker", single["samples_per_s"], single["per_core"], g["tg"]["median_s"], g["tg"]["p95_s"]),
    (f"grin, {par['workers']} workers", par["samples_per_s"], par["per_core"], None, None),
    ("PIL+NumPy (1 process)", pil["samples_per_s"], pil["samples_per_s"], pil["median_s"], pil["p95_s"]),
    ("OpenCV (1 thread)", cv["samples_per_s"], cv["samples_per_s"], cv["median_s"], cv["p95_s"]),
]
for name, sps, core, med, p95 in rows:
    m = f"{med*1e3:.3f}" if med is not None else "-"
    p = f"{p95*1e3:.3f}" if p95 is not None else "-"
    print(f"{name:<28}{sps:>12.0f}{core:>12.0f}{m:>12}{p:>10}")
best = max(single["per_core"], par["per_core"])
print(f"per core, grin / PIL+NumPy: {single['per_core'] / pil['samples_per_s']:.2f}x single-threaded, "
      f"{par['per_core'] / pil['samples_per_s']:.2f}x with {par['workers']} workers (target >= 3x)")
print(f"per core, grin / OpenCV:    {single['per_core'] / cv['samples_per_s']:.2f}x single-threaded, "
      f"{par['per_core'] / cv['samples_per_s']:.2f}x with {par['workers']} workers (target >= 1x)")
print("grin per-stage cost per application (median ms): " + ", ".join(
    f"{s['stage']} {s['timing']['median_s']*1e3:.3f}" for s in g["stages"] if s["probability"] > 0))
