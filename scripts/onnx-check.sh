#!/usr/bin/env bash
# grin's ONNX export outside grin: `grin export` writes the shipped model as
# ONNX; onnxruntime and OpenCV's DNN module (from PyPI, in an ignored venv)
# run it on held-out real photos (the validation split of Caltech WebFaces
# and CelebA, letterboxed grey by export_scenes as bench-detect.sh does), the
# reference decoder in scripts/peers/onnx_peer.py decodes as grin does (every
# pyramid pass, NMS, smile votes), and the detections must equal
# `grin-detect --json` on the same pixels: the same faces per image, boxes
# within 0.5 px, scores and smiles within 1e-3. Then the latency of each
# runtime and of grin-detect, one thread each, measured in this one run.
# Last, the README's camera snippet runs on the photos as a frame sequence
# and must find grin-detect's one-pass faces.
#
# Prints the table (also in $WORK/table.md) and exits non-zero on any
# mismatch.
#
# Usage: scripts/onnx-check.sh [--model PATH]   (default: assets/default.grin)
#   env: PHOTOS (validation photos per source, default 200), SIZES (run
#        sizes, default "320x240 640x480": a stream's and grin-detect's
#        default for image files), ITERATIONS (timed runs per round, default
#        300), ROUNDS (interleaved timing rounds, default 3),
#        CALTECH (default ../shared/data/caltech-webfaces), CELEBA (default
#        ../shared/data/celeba-smile-10k), WORK (default target/onnx-check)
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=assets/default.grin
if [ "${1:-}" = --model ]; then
    MODEL=${2:?--model needs a path}
fi
PHOTOS=${PHOTOS:-200}
SIZES=${SIZES:-320x240 640x480}
ITERATIONS=${ITERATIONS:-300}
ROUNDS=${ROUNDS:-3}
CALTECH=${CALTECH:-../shared/data/caltech-webfaces}
CELEBA=${CELEBA:-../shared/data/celeba-smile-10k}
WORK=${WORK:-target/onnx-check}
TARGET=${CARGO_TARGET_DIR:-target}
VENV=.venv-onnx

# OpenCV 4.x: the DNN module most installs (and Raspberry Pi OS) have.
if ! "$VENV/bin/python" -c 'import cv2, onnxruntime, onnx, numpy' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet "opencv-python-headless>=4.8,<5" onnxruntime onnx numpy
fi
PY=$VENV/bin/python

cargo build --locked --release -p grin --bin grin -p grin-infer --bin grin-detect --example export_scenes
GRIN=$TARGET/release/grin
DETECT=$TARGET/release/grin-detect
EXPORT=$TARGET/release/examples/export_scenes

rm -rf "$WORK"
mkdir -p "$WORK"
ONNX=$WORK/grin.onnx
"$GRIN" export --model "$MODEL" --format onnx --out "$ONNX"
# The ONNX project's own checker, shape inference included.
"$PY" -c 'import onnx, sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True); print("onnx.checker: ok")' "$ONNX"

SOURCE_FLAGS=()
[ -d "$CALTECH" ] && SOURCE_FLAGS+=(--caltech "$CALTECH")
if [ -d "$CELEBA/images" ]; then
    SOURCE_FLAGS+=(--celeba-images "$CELEBA/images" --celeba-attr "$CELEBA/list_attr_celeba_000001-010000.txt")
fi
if [ ${#SOURCE_FLAGS[@]} -eq 0 ]; then
    echo "onnx-check: no validation photos (set CALTECH / CELEBA); nothing compared" >&2
    exit 1
fi

RESULTS=$WORK/results.jsonl
TIMES=$WORK/times.jsonl
for size in $SIZES; do
    dir=$WORK/photos-$size
    "$EXPORT" --out "$dir" --validation --count "$PHOTOS" --width "${size%x*}" --height "${size#*x}" "${SOURCE_FLAGS[@]}"
    images=("$dir"/*.png)
    # grin-detect as it runs on photos: its pyramid (the model's pyramid_above).
    "$DETECT" --model "$MODEL" --json --size "$size" "${images[@]}" >"$dir/grin.jsonl"
    "$PY" scripts/peers/onnx_peer.py --onnx "$ONNX" --photos "$dir" --size "$size" --grin "$dir/grin.jsonl" \
        --results "$RESULTS"
    # Latency in interleaved rounds, so that a busy spell of the machine
    # falls on all three alike.
    for _ in $(seq "$ROUNDS"); do
        "$DETECT" --model "$MODEL" --bench --json --threads 1 --size "$size" --iterations "$ITERATIONS" \
            "${images[@]}" >"$dir/grin-bench.json"
        "$PY" scripts/peers/onnx_peer.py --time --onnx "$ONNX" --photos "$dir" --size "$size" \
            --grin-bench "$dir/grin-bench.json" --iterations "$ITERATIONS" --times "$TIMES"
    done
done

status=0
"$PY" scripts/peers/onnx_peer.py --table "$RESULTS" --times "$TIMES" | tee "$WORK/table.md" || status=1

# The README's camera snippet, as printed there, on 320x240 photos (its run
# size) as a frame sequence (no camera here), against grin-detect in one
# pass. It carries the shipped model's threshold, so it runs for that model.
if [ "$MODEL" = assets/default.grin ]; then
    dir=$WORK/photos-320x240
    [ -d "$dir" ] || "$EXPORT" --out "$dir" --validation --count "$PHOTOS" --width 320 --height 240 "${SOURCE_FLAGS[@]}"
    awk '/<!-- onnx-camera-snippet -->/ {on = 1; next} on && /^```python/ {next} on && /^```/ {exit} on' README.md \
        >"$WORK/camera.py"
    [ -s "$WORK/camera.py" ] || { echo "onnx-check: README.md has no onnx-camera-snippet block" >&2; exit 1; }
    for prefix in caltech celeba-aligned; do
        compgen -G "$dir/$prefix-*.png" >/dev/null || continue
        (cd "$WORK" && "$OLDPWD/$PY" camera.py "photos-320x240/$prefix-%04d.png") >"$WORK/camera-$prefix.txt"
        "$DETECT" --json --size 320x240 --pyramid-above 0 "$dir/$prefix"-*.png >"$WORK/camera-$prefix-grin.jsonl"
        "$PY" scripts/peers/onnx_peer.py --snippet-output "$WORK/camera-$prefix.txt" \
            --grin "$WORK/camera-$prefix-grin.jsonl" || status=1
    done
else
    echo "onnx-check: the README's camera snippet carries the shipped model's settings: not run for $MODEL"
fi
exit $status
