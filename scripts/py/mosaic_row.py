"""The mosaic line scripts/bench-features.sh prints: a photo source's T_g with
`crops.mosaic = 0` and `1` (`grin features bench --json` each).

  mosaic_row.py WORK     reads WORK/mosaic-0.0.json and WORK/mosaic-1.0.json
"""
import json
import sys

plain, mosaic = (json.load(open(f"{sys.argv[1]}/mosaic-{m}.json"))["tg"] for m in ("0.0", "1.0"))
print(
    f"FDDB photo crops, 160x120, 1 worker: plain {plain['median_s'] * 1e3:.3f} ms (p95 {plain['p95_s'] * 1e3:.3f}), "
    f"mosaic {mosaic['median_s'] * 1e3:.3f} ms (p95 {mosaic['p95_s'] * 1e3:.3f}) per sample: "
    f"{mosaic['median_s'] / plain['median_s']:.2f}x"
)
