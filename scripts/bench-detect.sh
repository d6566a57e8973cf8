#!/usr/bin/env bash
# Latency and accuracy of grin-detect against OpenCV's Haar cascade, on the
# same CPU and the same images, single-threaded, at 320x240 and 160x120:
# median/p95 latency, frames/s and the ratio, AP@0.5 of both on held-out
# scenes, grin's params and MFLOPs. Scenes: synthetic (the generator's test
# split) and, when the data is there, SMILEsmileD composites (crops of the
# test split only, never seen in training).
#
# Usage: scripts/bench-detect.sh [--model PATH]
#   env: SCENES (per size, default 100), ITERATIONS (default 300),
#        CROPS (SMILEsmileD root, default ../shared/data/smilesmiled; the
#        composite rows are left out with a message when it is absent),
#        FACES_320 / FACES_160 ("min:max:count" face sizes of the scenes;
#        default 16:160:4, the generator's defaults at 320x240, and 16:80:3,
#        the demo config's at 160x120), WORK (default target/bench-detect)
set -euo pipefail
cd "$(dirname "$0")/.."

SCENES=${SCENES:-100}
ITERATIONS=${ITERATIONS:-300}
FACES_320=${FACES_320:-16:160:4}
FACES_160=${FACES_160:-16:80:3}
WORK=${WORK:-target/bench-detect}
TARGET=${CARGO_TARGET_DIR:-target}
VENV=.venv-detect
MODEL_FLAGS=("$@")

# OpenCV 5 moved the Haar cascades out of the main package: pin 4.x.
if ! "$VENV/bin/python" -c 'import cv2; cv2.CascadeClassifier' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet "opencv-python-headless>=4.8,<5" numpy
fi

cargo build --locked --release -p grin-infer --bin grin-detect --example export_scenes
DETECT=$TARGET/release/grin-detect
EXPORT=$TARGET/release/examples/export_scenes

rm -rf "$WORK"
mkdir -p "$WORK"
RESULTS=$WORK/results.jsonl
CROPS=${CROPS:-../shared/data/smilesmiled}
KINDS=(synthetic)
if [ -d "$CROPS/smile" ] && [ -d "$CROPS/no_smile" ]; then
    KINDS+=(composite)
else
    echo "bench-detect: no SMILEsmileD crops at $CROPS (set CROPS): synthetic scenes only" >&2
fi
for kind in "${KINDS[@]}"; do
for size in 320x240 160x120; do
    w=${size%x*}
    h=${size#*x}
    faces=$FACES_160
    [ "$size" != 320x240 ] || faces=$FACES_320
    IFS=: read -r min_face max_face max_faces <<<"$faces"
    dir=$WORK/$kind-$size
    source_flags=()
    [ "$kind" = synthetic ] || source_flags=(--crops "$CROPS")
    "$EXPORT" --out "$dir" --count "$SCENES" --width "$w" --height "$h" \
        --min-face "$min_face" --max-face "$max_face" --max-faces "$max_faces" "${source_flags[@]}"
    # Detections for AP (the network at the scenes' own size), then timing.
    "$DETECT" "${MODEL_FLAGS[@]}" --json --size "$size" "$dir"/scene-*.png >"$dir/grin.jsonl"
    "$DETECT" "${MODEL_FLAGS[@]}" --bench --json --threads 1 --size "$size" --iterations "$ITERATIONS" \
        "$dir"/scene-*.png >"$dir/grin-bench.json"
    "$VENV/bin/python" scripts/peers/haar_peer.py --size "$size" --scenes "$dir" \
        --grin-detections "$dir/grin.jsonl" --grin-bench "$dir/grin-bench.json" \
        --iterations "$ITERATIONS" --results "$RESULTS" --kind "$kind"
done
done
"$VENV/bin/python" scripts/peers/haar_peer.py --table "$RESULTS"
