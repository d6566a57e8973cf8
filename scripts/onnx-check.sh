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
#
# Last, examples/python/detect_onnx.py, the example a user copies, as a user
# runs it: on ORIGINAL photos, not letterboxed first (the validation photos
# at their own sizes and aspect ratios, as export_scenes --original writes
# them; the test scene tiled wide, tall, past the pixel cap and below the
# smallest side; one photo as RGBA, palette, grey and 16-bit PNGs and stored
# turned under each EXIF orientation tag), at grin-detect's defaults and
# again at --size 320x240 --threshold 0.3, with the model's second look off
# (--second-look-below 0) and with a mirrored one at every box under 0.65
# (what a model without its own look is given). Its JSON lines must agree with
# `grin-detect --json` photo by photo: the same faces, boxes within 0.5 px,
# scores and smiles within 0.0015 (onnx_peer.py says why). JPEGs (a few
# made up, JPEGS source photos) are compared too, but reported apart: the
# example decodes them with Pillow (libjpeg-turbo), grin with the image
# crate (zune-jpeg), and the two differ by a level or a few on some pixels.
#
# Prints the table (also in $WORK/table.md) and "N of M photos agree", and
# exits non-zero on any mismatch, naming the photos.
#
# Usage: scripts/onnx-check.sh [--model PATH]   (default: assets/default.grin)
#   env: PHOTOS (validation photos per source, default 200), SIZES (run
#        sizes, default "320x240 640x480": a stream's and grin-detect's
#        default for image files), ITERATIONS (timed runs per round, default
#        300), ROUNDS (interleaved timing rounds, default 3), ORIGINALS
#        (validation photos per source at their own size for the example,
#        default 100), JPEGS (Caltech source JPEGs for the example, default
#        50), CALTECH (default ../shared/data/caltech-webfaces), CELEBA
#        (default ../shared/data/celeba-smile-10k), WORK (default
#        target/onnx-check), NO_BUILD=1 (use the binaries already built)
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
ORIGINALS=${ORIGINALS:-100}
JPEGS=${JPEGS:-50}
CALTECH=${CALTECH:-../shared/data/caltech-webfaces}
CELEBA=${CELEBA:-../shared/data/celeba-smile-10k}
WORK=${WORK:-target/onnx-check}
TARGET=${CARGO_TARGET_DIR:-target}

# OpenCV 4.x (its DNN module), onnxruntime, onnx and Pillow (the example's decoder), in
# .venv-onnx (the list and why the pin: scripts/venvs.sh).
. scripts/venvs.sh
PY=$(venv_python onnx)

if [ "${NO_BUILD:-0}" != 1 ]; then
    cargo build --locked --release -p grin --bin grin -p grin-infer --bin grin-detect --example export_scenes
fi
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
    # The reference decoder has no second look (the example below has), so
    # grin-detect's is off here: what is compared is the network and decoding.
    "$DETECT" --model "$MODEL" --json --size "$size" --second-look-below 0 "${images[@]}" >"$dir/grin.jsonl"
    "$PY" scripts/peers/onnx_peer.py --onnx "$ONNX" --photos "$dir" --size "$size" --grin "$dir/grin.jsonl" \
        --results "$RESULTS"
    # Latency in interleaved rounds, so that a busy spell of the machine
    # falls on all three alike.
    for _ in $(seq "$ROUNDS"); do
        "$DETECT" --model "$MODEL" --bench --json --threads 1 --size "$size" --iterations "$ITERATIONS" --second-look-below 0 \
            "${images[@]}" >"$dir/grin-bench.json"
        "$PY" scripts/peers/onnx_peer.py --time --onnx "$ONNX" --photos "$dir" --size "$size" \
            --grin-bench "$dir/grin-bench.json" --iterations "$ITERATIONS" --times "$TIMES"
    done
done

status=0
"$PY" scripts/peers/onnx_peer.py --table "$RESULTS" --times "$TIMES" | tee "$WORK/table.md" || status=1

# The example, on original photos at grin-detect's defaults (each at its
# own size x1.41), then with --size and --threshold (letterbox bars, the
# smile vote floor following the threshold).
originals=$WORK/originals
made=$WORK/made-up
"$EXPORT" --out "$originals" --validation --channels 3 --count "$ORIGINALS" --original --min-face 10 \
    "${SOURCE_FLAGS[@]}" >/dev/null
# Its frames first, byte for byte against grin's letterboxed photos above:
# the same photos at their own size. A count picks its photos across the
# split, so another count names other photos by the same file names.
framed=$originals
if [ "$ORIGINALS" != "$PHOTOS" ]; then
    framed=$WORK/originals-$PHOTOS
    "$EXPORT" --out "$framed" --validation --channels 3 --count "$PHOTOS" --original --min-face 10 \
        "${SOURCE_FLAGS[@]}" >/dev/null
fi
for size in $SIZES; do
    "$PY" scripts/peers/onnx_peer.py --frames "$WORK/photos-$size" --photos "$framed" --size "$size" || status=1
done
"$PY" scripts/peers/onnx_peer.py --make-photos "$made" --photos "$originals"
photos=("$originals"/*.png "$made"/*)
jpegs=()
[ -d "$CALTECH/images" ] && jpegs=("$CALTECH/images"/*.jpg)
if [ "$JPEGS" -gt 0 ] && [ ${#jpegs[@]} -gt 0 ]; then
    mkdir -p "$WORK/jpegs"
    cp "${jpegs[@]:0:$JPEGS}" "$WORK/jpegs/"
    photos+=("$WORK/jpegs"/*.jpg)
fi
run=0
for flags in "" "--size 320x240 --threshold 0.3" "--second-look-below 0" "--second-look-below 0.65 --second-look-mirror"; do
    run=$((run + 1))
    # shellcheck disable=SC2086  # $flags is a few flags or none
    "$DETECT" --model "$MODEL" --json $flags "${photos[@]}" >"$WORK/example-$run-grin.jsonl"
    # shellcheck disable=SC2086
    "$PY" examples/python/detect_onnx.py --model "$ONNX" --json $flags "${photos[@]}" >"$WORK/example-$run.jsonl"
    "$PY" scripts/peers/onnx_peer.py --example-output "$WORK/example-$run.jsonl" \
        --grin "$WORK/example-$run-grin.jsonl" \
        --label "examples/python/detect_onnx.py vs grin-detect --json${flags:+ $flags}" || status=1
done
exit $status
