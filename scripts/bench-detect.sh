#!/usr/bin/env bash
# Latency and accuracy of grin-detect against OpenCV's Haar cascade, on the
# same CPU and the same images, single-threaded, at 320x240 and 160x120:
# median/p95 latency, frames/s and the ratio, AP@0.5 of both on held-out
# scenes, grin's params and MFLOPs. Scenes: synthetic (the generator's test
# split) and, when the data is there, SMILEsmileD composites (crops of the
# test split only, never seen in training).
#
# Then, when the data is there, held-out real photos (the test split by file
# name: Caltech WebFaces photos, CelebA aligned portraits), letterboxed grey
# to 320x240 (the model's run size, a stream's) and to 640x480 (grin-detect's
# default for image files), faces under 10 px at 320x240 ignored: per source, grin against Haar's
# face + smile cascades on AP@0.5, recall by face size, detections per
# image, share of portraits found, smile accuracy (CelebA labels) and
# latency of faces + smiles, and the same portraits as close-ups (twice as
# large, cut to 320x240: faces of about 190 px); how each is measured is in
# scripts/peers/haar_peer.py. The photo rows also go to $WORK/photos.jsonl.
#
# Usage: scripts/bench-detect.sh [--model PATH]
#   env: SCENES (per size, default 100), ITERATIONS (default 300; on photos
#        at least one timed run per photo),
#        CROPS (SMILEsmileD root, default ../shared/data/smilesmiled; the
#        composite rows are left out with a message when it is absent),
#        FACES_320 / FACES_160 ("min:max:count" face sizes of the scenes;
#        default 16:160:4, the generator's defaults at 320x240, and 16:80:3,
#        the demo config's at 160x120), WORK (default target/bench-detect),
#        PHOTOS (held-out photos per source, default 300), CALTECH (default
#        ../shared/data/caltech-webfaces), CELEBA (default
#        ../shared/data/celeba-smile-10k, with images/ and
#        list_attr_celeba_000001-010000.txt; a source whose data is absent
#        is left out with a message), PHOTOS_ONLY=1 (skip the scenes)
set -euo pipefail
cd "$(dirname "$0")/.."

SCENES=${SCENES:-100}
ITERATIONS=${ITERATIONS:-300}
FACES_320=${FACES_320:-16:160:4}
FACES_160=${FACES_160:-16:80:3}
WORK=${WORK:-target/bench-detect}
PHOTOS=${PHOTOS:-300}
PHOTOS_ONLY=${PHOTOS_ONLY:-0}
CALTECH=${CALTECH:-../shared/data/caltech-webfaces}
CELEBA=${CELEBA:-../shared/data/celeba-smile-10k}
TARGET=${CARGO_TARGET_DIR:-target}
MODEL_FLAGS=("$@")
MODEL_LABEL=${MODEL_FLAGS[*]:-embedded}

# The Haar peer's packages, in .venv-detect (the list and its OpenCV pin: scripts/venvs.sh).
. scripts/venvs.sh
PY=$(venv_python detect)

cargo build --locked --release -p grin-infer --bin grin-detect --example export_scenes
DETECT=$TARGET/release/grin-detect
EXPORT=$TARGET/release/examples/export_scenes

rm -rf "$WORK"
mkdir -p "$WORK"
RESULTS=$WORK/results.jsonl
PHOTO_RESULTS=$WORK/photos.jsonl
CROPS=${CROPS:-../shared/data/smilesmiled}
KINDS=()
if [ "$PHOTOS_ONLY" = 1 ]; then
    echo "bench-detect: PHOTOS_ONLY=1: synthetic and composite scenes skipped" >&2
elif [ -d "$CROPS/smile" ] && [ -d "$CROPS/no_smile" ]; then
    KINDS=(synthetic composite)
else
    KINDS=(synthetic)
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
    "$PY" scripts/peers/haar_peer.py --size "$size" --scenes "$dir" \
        --grin-detections "$dir/grin.jsonl" --grin-bench "$dir/grin-bench.json" \
        --iterations "$ITERATIONS" --results "$RESULTS" --kind "$kind"
done
done

# Held-out real photos, one set of rows per source whose data is here.
PHOTO_SOURCES=()
PHOTO_FLAGS=()
if [ -d "$CALTECH" ]; then
    PHOTO_SOURCES+=(caltech)
    PHOTO_FLAGS+=(--caltech "$CALTECH")
else
    echo "bench-detect: no Caltech WebFaces at $CALTECH (set CALTECH): no caltech photo rows" >&2
fi
CELEBA_ATTR=$CELEBA/list_attr_celeba_000001-010000.txt
if [ -d "$CELEBA/images" ] && [ -f "$CELEBA_ATTR" ]; then
    PHOTO_SOURCES+=(celeba-aligned)
    PHOTO_FLAGS+=(--celeba-images "$CELEBA/images" --celeba-attr "$CELEBA_ATTR")
else
    echo "bench-detect: no CelebA images/ and attributes at $CELEBA (set CELEBA): no celeba-aligned photo rows" >&2
fi
# One source of exported photos: grin's detections down to 0.05 for AP, at
# the model's own threshold for the rest, then timing; then Haar on the same.
measure_photos() {
    local dir=$1 source=$2 size=$3
    local images=("$dir/$source"-*.png)
    local iterations=$((ITERATIONS > ${#images[@]} ? ITERATIONS : ${#images[@]}))
    "$DETECT" "${MODEL_FLAGS[@]}" --json --size "$size" --threshold 0.05 "${images[@]}" >"$dir/$source-grin-ap.jsonl"
    "$DETECT" "${MODEL_FLAGS[@]}" --json --size "$size" "${images[@]}" >"$dir/$source-grin.jsonl"
    "$DETECT" "${MODEL_FLAGS[@]}" --bench --json --threads 1 --size "$size" --iterations "$iterations" \
        "${images[@]}" >"$dir/$source-grin-bench.json"
    "$PY" scripts/peers/haar_peer.py --photos "$dir" --source "$source" \
        --grin-detections "$dir/$source-grin-ap.jsonl" --grin-deployed "$dir/$source-grin.jsonl" \
        --grin-bench "$dir/$source-grin-bench.json" --grin-model "$MODEL_LABEL" \
        --iterations "$iterations" --results "$PHOTO_RESULTS"
}

if [ ${#PHOTO_SOURCES[@]} -gt 0 ]; then
    # 320x240: the model's run size (a stream); 640x480: grin-detect's default
    # for image files. Faces under 10 px at 320x240 are ignored at both.
    for size in 320x240 640x480; do
        w=${size%x*}
        dir=$WORK/photos-$size
        "$EXPORT" --out "$dir" --count "$PHOTOS" --width "$w" --height "${size#*x}" --min-face $((w / 32)) \
            "${PHOTO_FLAGS[@]}"
        for source in "${PHOTO_SOURCES[@]}"; do
            measure_photos "$dir" "$source" "$size"
        done
    done
    # Close-ups: the same portraits twice as large, cut to 320x240 around
    # their middle (faces of about 190 px), as a robot sees a person leaning in.
    if [[ " ${PHOTO_SOURCES[*]} " == *" celeba-aligned "* ]]; then
        dir=$WORK/photos-320x240-x2
        "$EXPORT" --out "$dir" --count "$PHOTOS" --width 320 --height 240 --min-face 10 --zoom 2 \
            --celeba-images "$CELEBA/images" --celeba-attr "$CELEBA_ATTR"
        measure_photos "$dir" celeba-aligned-x2 320x240
    fi
else
    echo "bench-detect: no held-out real photos (set CALTECH / CELEBA): photo comparison skipped" >&2
fi

[ ! -s "$RESULTS" ] || "$PY" scripts/peers/haar_peer.py --table "$RESULTS"
[ ! -s "$PHOTO_RESULTS" ] || "$PY" scripts/peers/haar_peer.py --photo-table "$PHOTO_RESULTS"
