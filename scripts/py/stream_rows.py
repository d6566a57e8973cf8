"""Two rows of scripts/bench-stream.sh's table, for one run size: the stream against one image.

  stream_rows.py SIZE STREAM.JSONL SINGLE.JSONL

Reads STREAM.JSONL (`grin-detect --stream`'s {"summary": ...} lines, one per run) and
SINGLE.JSONL (`grin-detect --bench --json`, one line per run). Prints two Markdown table rows,
medians over runs: the stream's processing frames/s, ms per frame and its ratio to the single
image's, then the single image's frames/s and median latency. Exits non-zero, naming the run,
when a stream run did not process every frame cleanly.
"""
import json, statistics, sys
size, stream_path, single_path = sys.argv[1:]
stream = [json.loads(l)["summary"] for l in open(stream_path)]
single = [json.loads(l) for l in open(single_path)]
for s in stream:
    if s["processed"] != s["frames"] or s["bad"]:
        sys.exit(f"bench-stream: {size}: a run did not process every frame cleanly: {s}")
stream_fps = statistics.median(s["processing_fps"] for s in stream)
stream_ms = statistics.median(1000.0 / s["processing_fps"] for s in stream)
single_fps = statistics.median(s["fps"] for s in single)
single_ms = statistics.median(s["median_ms"] for s in single)
print(f"| {size} | stream (--stream, gray8) | {stream_fps:.1f} | {stream_ms:.2f} | {stream_fps / single_fps:.2f}x |")
print(f"| {size} | single image (--bench) | {single_fps:.1f} | {single_ms:.2f} (median latency) | 1.00x |")
