#!/usr/bin/env bash
# Frame scaling, grin against OpenCV in the same run, one thread each: a
# decoded colour frame (RGB, 640x480 and 1280x720) turned into the grey
# network input (320x240, and 640x480 from 1280x720). grin: the `scaling`
# part of `grin-detect --bench` (grey conversion, the triangle-filter resize,
# the letterbox, the frame the network reads), which times it apart from the
# network. OpenCV: cvtColor(RGB2GRAY) then resize with INTER_AREA, its
# antialiased downscale (scripts/peers/scaling_peer.py). Frames are cut from
# a Caltech photo (or drawn, without the data) and saved as PNG; decoding is
# not timed on either side. Medians over ROUNDS rounds that alternate the
# two; each round's figure is the median of ITERATIONS runs.
#
#   scripts/bench-scaling.sh            env: ROUNDS (default 5), ITERATIONS (default 300)
#
# Python peer in .venv-features (numpy, pillow, opencv-python-headless from
# PyPI), the venv scripts/bench-features.sh shares (its list: scripts/venvs.sh),
# built by scripts/grin_venv.py on first use. Prints one line per size and
# `grin/opencv <R>x ...` last. Report figures from a quiet machine only.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
ITERATIONS=${ITERATIONS:-300}
TARGET=${CARGO_TARGET_DIR:-target}
WORK=$TARGET/bench-scaling
mkdir -p "$WORK"
. scripts/venvs.sh
PY=$(venv_python features)
cargo build --release -p grin-infer >&2
DETECT=${GRIN_DETECT:-$TARGET/release/grin-detect}
PHOTO=$(ls ../shared/data/caltech-webfaces/images/*.jpg 2>/dev/null | head -1 || true)
"$PY" scripts/peers/scaling_peer.py frames "$WORK" "${PHOTO:-}"

for spec in 640x480:320x240 1280x720:320x240 1280x720:640x480; do
    src=${spec%%:*}; dst=${spec##*:}
    for round in $(seq 1 "$ROUNDS"); do
        "$DETECT" --bench --json --threads 1 --iterations "$ITERATIONS" --size "$dst" "$WORK/frame-$src.png" |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"who":"grin","src":sys.argv[1],"dst":sys.argv[2],"ms":d["scaling"]["median_ms"]}))' "$src" "$dst"
        "$PY" scripts/peers/scaling_peer.py time "$WORK/frame-$src.png" "$dst" "$ITERATIONS" |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"who":"opencv","src":sys.argv[1],"dst":sys.argv[2],"ms":d["median_ms"]}))' "$src" "$dst"
    done
done > "$WORK/rounds.jsonl"
python3 scripts/py/scaling_summary.py "$WORK/rounds.jsonl"
