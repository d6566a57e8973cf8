"""The table scripts/bench-train.sh prints: grin's training steps/s against PyTorch's.

  train_table.py RESULTS.JSONL

Reads the lines scripts/py/train_row.py wrote, one per round, width, batch and thread count.
Prints per width, batch and threads the median steps/s of each, their ratio (median over rounds
of each round's grin/torch) and each phase's ms per step, then the engines, and last
`grin/pytorch <R>x at batch 16, <R>x at batch 64 (<T> threads)` at the largest width.
"""
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
phases = ("batch", "forward", "loss", "backward", "optimizer")
keys = sorted({(r["width_mult"], r["batch"], r["threads"]) for r in rows}, key=lambda k: (-k[0], k[1], k[2]))
med = statistics.median
print(f"{'width':>5} {'batch':>5} {'thr':>3} | {'grin st/s':>9} {'torch st/s':>10} {'ratio':>6} | "
      + " ".join(f"{p:>15}" for p in phases) + "   (ms per step, grin / torch)")
ratio = {}
for k in keys:
    rs = [r for r in rows if (r["width_mult"], r["batch"], r["threads"]) == k]
    g = med(r["grin"]["median"]["steps_per_s"] for r in rs)
    t = med(r["torch"]["steps_per_s"] for r in rs)
    ratio[k] = med(r["grin"]["median"]["steps_per_s"] / r["torch"]["steps_per_s"] for r in rs)
    cells = []
    for p in phases:
        gp = med(r["grin"]["median"][f"{p}_ms"] for r in rs)
        tp = med(r["torch"]["phases_ms"][p] for r in rs)
        cells.append(f"{gp:6.2f} / {tp:6.2f}")
    print(f"{k[0]:>5} {k[1]:>5} {k[2]:>3} | {g:9.2f} {t:10.2f} {ratio[k]:5.2f}x | " + " ".join(f"{c:>15}" for c in cells))
first = rows[0]
print(f"grin engine {first['grin']['engine']}, torch {first['torch']['torch']}; {len({r['round'] for r in rows})} rounds, "
      "ratio = median over rounds of each round's grin/torch")
top = max(r["width_mult"] for r in rows)
def at(batch):
    k = (top, batch, max(r["threads"] for r in rows))
    return f"{ratio[k]:.2f}x at batch {batch}" if k in ratio else f"n/a at batch {batch}"
print(f"grin/pytorch {at(16)}, {at(64)} ({max(r['threads'] for r in rows)} threads)")
