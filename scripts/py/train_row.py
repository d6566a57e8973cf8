"""One line of scripts/bench-train.sh's results.jsonl: a grin run and a PyTorch run of one round.

  train_row.py GRIN.JSON TORCH.JSON ROUND THREADS

Reads `grin bench step --json`'s output and scripts/peers/torch_detector.py's, and prints one
JSON line: round, threads, the peer's width_mult and batch, and both reports whole.
"""
import json, sys
g, t = (json.load(open(p)) for p in sys.argv[1:3])
print(json.dumps({"round": int(sys.argv[3]), "threads": int(sys.argv[4]), "width_mult": t["width_mult"],
                  "batch": t["batch"], "grin": g, "torch": t}))
