"""The summary scripts/bench-scaling.sh prints: grin's frame scaling against OpenCV's.

  scaling_summary.py ROUNDS.JSONL

Reads one JSON line per timed run ({"who": "grin"|"opencv", "src": WxH, "dst": WxH, "ms": ...}).
Prints, per source and destination size, the median over rounds of each side, and last
`grin/opencv <R>x at SRC->DST, ...`.
"""
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ratios = []
for key in dict.fromkeys((r["src"], r["dst"]) for r in rows):
    med = {who: statistics.median(r["ms"] for r in rows if (r["src"], r["dst"]) == key and r["who"] == who)
           for who in ("grin", "opencv")}
    ratio = med["grin"] / med["opencv"]
    ratios.append(f"{ratio:.2f}x at {key[0]}->{key[1]}")
    print(f"{key[0]} colour -> {key[1]} grey: grin {med['grin']:.3f} ms, OpenCV {med['opencv']:.3f} ms (median of round medians, 1 thread)")
print("grin/opencv " + ", ".join(ratios))
