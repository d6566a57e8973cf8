#!/usr/bin/env bash
# Frames/s of grin-detect's camera loop (`--stream`) on one core, against
# its single-image path (`--bench`), at 320x240 and 160x120, in the same run.
#
# The stream is made by `examples/make_stream` from assets/test-scene.png:
# FRAMES gray8 frames at the run size, panned 2 px a frame so faces move and
# are tracked. It is read from a file, so every frame is processed (no
# drops) and "processing frames/s" counts everything the loop does per
# frame: cutting the frame off the stream, building the network input,
# the network, decoding, tracking, and printing the JSON line. The
# single-image path is timed on the stream's first frame, saved as PNG:
# input scaling, network and decoding (no file decoding, no printing).
# Each figure is the median of RUNS runs.
#
# Usage: scripts/bench-stream.sh      env: FRAMES (default 300), RUNS (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

FRAMES=${FRAMES:-300}
RUNS=${RUNS:-3}
TARGET=${CARGO_TARGET_DIR:-target}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cargo build --locked --release -p grin-infer --bin grin-detect --example make_stream >&2
DETECT=$TARGET/release/grin-detect
MAKE=$TARGET/release/examples/make_stream

printf '| run size | path | frames/s (median of %s) | ms per frame | ratio stream/single |\n' "$RUNS"
printf '|---|---|---|---|---|\n'
for size in 320x240 160x120; do
    "$MAKE" --format gray8 --size "$size" --frames "$FRAMES" --pan 2 --first-png "$WORK/first.png" \
        assets/test-scene.png >"$WORK/stream.gray"
    for run in $(seq "$RUNS"); do
        "$DETECT" --stream "$WORK/stream.gray" --input-format gray8 --input-size "$size" --size "$size" \
            --threads 1 --no-clock 2>"$WORK/stream-$run.err" >/dev/null
        grep '^{"summary"' "$WORK/stream-$run.err" >>"$WORK/stream-$size.jsonl"
        "$DETECT" --bench --json --threads 1 --size "$size" --iterations "$FRAMES" "$WORK/first.png" \
            >>"$WORK/single-$size.jsonl"
    done
    python3 scripts/py/stream_rows.py "$size" "$WORK/stream-$size.jsonl" "$WORK/single-$size.jsonl"
done
