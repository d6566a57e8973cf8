#!/usr/bin/env bash
# Latency and accuracy of grin-detect against the YuNet peer
# (libfacedetection, ../shared/peers/yunet), one thread each, on the same
# held-out validation photos (the validation split of Caltech WebFaces and
# of the CelebA aligned portraits, by file name, as every grin config
# splits them), letterboxed to 320x240 and to 640x480 by export_scenes and
# saved as colour PNGs: both detectors read the same files, grin converts
# to grey itself, YuNet reads colour.
#
# Latency: rounds that alternate grin-detect --bench (pyramid included, the
# default) and yunet-detect --bench at each size, each timing detection
# from a decoded image of the run size (grin: the frame, every pyramid pass
# and decoding; YuNet: facedetect_cnn, its driver having resized before its
# timer). The ratio sets the same work against each other: grin's network
# and decoding (grin-detect --bench times scaling, network and decoding
# apart) against facedetect_cnn; grin's scaling and whole frame are printed
# beside it. Reported per size: the median over rounds of each round's
# median and p95, and their ratio.
# Accuracy from the same photos: AP@0.5 and AP@0.3 (every detection each
# exposes), recall by face size, detections per image, portraits found and
# grin's smile accuracy (at each one's operating point); scoring is
# scripts/peers/scoring.py, shared with bench-detect.sh's Haar peer.
# Photos at each detector's own default: the same validation photos at their
# own size (export_scenes --original), grin-detect with no --size (twice the
# photo's pixels, within its pixel budget) and YuNet at the photo's own size,
# each at its own default threshold, with the held-out face-free images
# (FACE_FREE) among them, where every detection is false. Latency per photo: rounds that
# alternate the two on each timed photo (PHOTO_ITERATIONS runs each);
# reported: the median over photos of each photo's median latency, and the
# median and largest per-photo ratio.
# Aged photos (accuracy only): the same own-size photos made to look like old
# grey prints by scripts/peers/age_photos.py (faded, blurred, grainy,
# vignetted; numpy and Pillow in the ignored venv .venv-latency), each
# detector at its own defaults: a stand-in for the old group photos the
# issue measured, which are not here.
# The last line is `grin/yunet <R>x at 320x240, <R>x at 640x480, <R>x at photo`.
#
# Usage: scripts/bench-latency.sh [--model PATH]
#   env: PHOTOS (validation photos per source for accuracy, default 300),
#        TIMED (photos per source timed, default 50), ROUNDS (default 5),
#        ITERATIONS (timed runs per detector, size and round, default 100,
#        rounded up to whole passes over the timed photos),
#        PHOTO_ITERATIONS (timed runs per detector, photo and round, default 20),
#        WORK (default target/bench-latency), YUNET_BUILD (default
#        target/yunet), CALTECH (default ../shared/data/caltech-webfaces),
#        CELEBA (default ../shared/data/celeba-smile-10k), FACE_FREE
#        (face-free images, default data/negatives/images where
#        scripts/negatives.sh made it: their held-out split joins the photo
#        rows as `face-free`, where every detection is false), SPLIT (val,
#        the default, where settings are chosen; test for a final report),
#        GRIN_DETECT (a
#        grin-detect binary to measure instead of this tree's, e.g. an older
#        build), BASELINE (a second .grin model timed in the same rounds,
#        right after the first: the report adds each size's growth against
#        it, median and mean)
set -euo pipefail
cd "$(dirname "$0")/.."

PHOTOS=${PHOTOS:-300}
TIMED=${TIMED:-50}
ROUNDS=${ROUNDS:-5}
ITERATIONS=${ITERATIONS:-100}
PHOTO_ITERATIONS=${PHOTO_ITERATIONS:-20}
WORK=${WORK:-target/bench-latency}
CALTECH=${CALTECH:-../shared/data/caltech-webfaces}
CELEBA=${CELEBA:-../shared/data/celeba-smile-10k}
FACE_FREE=${FACE_FREE:-data/negatives/images}
SPLIT=${SPLIT:-val}
TARGET=${CARGO_TARGET_DIR:-target}
SIZES=(320x240 640x480)
MODEL_FLAGS=("$@")
BASELINE=${BASELINE:-}
GRINS=(grin)
if [ -n "$BASELINE" ]; then
    [ -f "$BASELINE" ] || { echo "bench-latency: BASELINE=$BASELINE: no such model file" >&2; exit 1; }
    GRINS+=(baseline)
fi

CELEBA_ATTR=$CELEBA/list_attr_celeba_000001-010000.txt
case $SPLIT in
    val) SPLIT_FLAGS=(--validation) SPLIT_NAME=validation ;;
    test) SPLIT_FLAGS=() SPLIT_NAME=test ;;
    *) echo "bench-latency: SPLIT=$SPLIT: expected val or test" >&2; exit 1 ;;
esac
FACE_FREE_FLAGS=()
if [ -d "$FACE_FREE" ]; then
    FACE_FREE_FLAGS=(--face-free "$FACE_FREE")
else
    echo "bench-latency: no face-free images at $FACE_FREE (scripts/negatives.sh makes them): the photo rows leave them out" >&2
fi
for need in "$CALTECH/images" "$CELEBA/images" "$CELEBA_ATTR"; do
    [ -e "$need" ] || { echo "bench-latency: $need is missing (set CALTECH / CELEBA; the peer is ../shared/peers/yunet)" >&2; exit 1; }
done

# numpy and Pillow for age_photos.py, in .venv-latency (the list: scripts/venvs.sh).
. scripts/venvs.sh
PY=$(venv_python latency)
. scripts/yunet.sh
YUNET=$(yunet_detect)

cargo build --locked --release -p grin-infer --bin grin-detect --example export_scenes
DETECT=${GRIN_DETECT:-$TARGET/release/grin-detect}
EXPORT=$TARGET/release/examples/export_scenes

rm -rf "$WORK"
mkdir -p "$WORK"
for size in "${SIZES[@]}"; do
    w=${size%x*}
    # Faces under 1/32 of the width (10 px at 320x240) are ignore regions, as in bench-detect.sh.
    "$EXPORT" --out "$WORK/$size" "${SPLIT_FLAGS[@]}" --channels 3 --count "$PHOTOS" --width "$w" --height "${size#*x}" \
        --min-face $((w / 32)) --caltech "$CALTECH" --celeba-images "$CELEBA/images" --celeba-attr "$CELEBA_ATTR"
    detect_both "$WORK/$size" --size "$size"
done

# The photos at their own size, each detector at its own defaults, then their aged copies.
"$EXPORT" --out "$WORK/photo" "${SPLIT_FLAGS[@]}" --channels 3 --count "$PHOTOS" --original --min-face 10 \
    --caltech "$CALTECH" --celeba-images "$CELEBA/images" --celeba-attr "$CELEBA_ATTR" "${FACE_FREE_FLAGS[@]}"
detect_both "$WORK/photo"
"$PY" scripts/peers/age_photos.py "$WORK/photo" "$WORK/aged"
detect_both "$WORK/aged"

# Timed photos: the first TIMED of each source (group photos and portraits).
timed() {
    local caltech=("$WORK/$1"/caltech-*.png) celeba=("$WORK/$1"/celeba-aligned-*.png)
    printf '%s\n' "${caltech[@]:0:$TIMED}" "${celeba[@]:0:$TIMED}"
}
CONDITIONS="(machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg))"
LATENCY=$WORK/latency.jsonl
# One grin-detect --bench run as a line of latency.jsonl: WHO (grin, or
# baseline: the BASELINE model), SIZE, ROUND, PHOTO (photo rows), then
# grin-detect's flags.
grin_bench() {
    local who=$1 size=$2 round=$3 photo=$4 flags=("${MODEL_FLAGS[@]}")
    shift 4
    [ "$who" = baseline ] && flags=(--model "$BASELINE")
    "$DETECT" "${flags[@]}" --bench --json --threads 1 "$@" | python3 -c '
import json, sys
d = json.load(sys.stdin)
who, size, rnd, photo = sys.argv[1:]
line = {"detector": who, "size": size, "round": int(rnd), "median_ms": d["median_ms"], "p95_ms": d["p95_ms"],
        "detection_mean_ms": d["detection"]["mean_ms"]}
if size == "photo":
    line.update(photo=photo, run_size=[d["width"], d["height"]])
else:
    line.update({f"{k}_ms": d[k]["median_ms"] for k in ("detection", "scaling", "network", "decoding", "second_look")})
print(json.dumps(line))' "$who" "$size" "$round" "$photo" >>"$LATENCY"
}
for round in $(seq 1 "$ROUNDS"); do
    for size in "${SIZES[@]}"; do
        mapfile -t images < <(timed "$size")
        # Whole passes over the timed photos, so each counts the same in the
        # median (10 runs over 40 photos once timed 10 group photos only).
        runs=$(( (ITERATIONS + ${#images[@]} - 1) / ${#images[@]} * ${#images[@]} ))
        # grin's parts apart: the row compares network + decoding + look with YuNet's facedetect_cnn,
        # each from a frame already at the run size; the whole frame (scaling included) beside it.
        for who in "${GRINS[@]}"; do
            grin_bench "$who" "$size" "$round" "" --size "$size" --iterations "$runs" "${images[@]}"
        done
        "$YUNET" --bench "$runs" --size "$size" "${images[@]}" |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"detector":"yunet","size":sys.argv[1],"round":int(sys.argv[2]),"median_ms":d["median_ms"],"p95_ms":d["p95_ms"]}))' \
                "$size" "$round" >>"$LATENCY"
    done
done
# Each timed photo at each detector's own default size: grin-detect with no
# --size, YuNet with --size set to the photo's own (its driver resizes only
# for --bench, and to that size it is a copy).
mapfile -t photos < <(timed photo)
for round in $(seq 1 "$ROUNDS"); do
    for image in "${photos[@]}"; do
        name=$(basename "$image")
        for who in "${GRINS[@]}"; do
            grin_bench "$who" photo "$round" "$name" --warmup 3 --iterations "$PHOTO_ITERATIONS" "$image"
        done
        own=$(python3 -c 'import struct,sys; w,h=struct.unpack(">II",open(sys.argv[1],"rb").read()[16:24]); print(f"{w}x{h}")' "$image")
        "$YUNET" --bench "$PHOTO_ITERATIONS" --size "$own" "$image" |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"detector":"yunet","size":"photo","photo":sys.argv[1],"round":int(sys.argv[2]),"median_ms":d["median_ms"],"p95_ms":d["p95_ms"],"run_size":d["size"]}))' \
                "$name" "$round" >>"$LATENCY"
    done
done
CONDITIONS="${CONDITIONS%)}; at the end: $(cut -d' ' -f1-3 /proc/loadavg))"

python3 scripts/peers/yunet_peer.py --work "$WORK" --sizes "$(IFS=,; echo "${SIZES[*]}"),photo" --accuracy-only aged --split "$SPLIT_NAME" \
    --conditions "$CONDITIONS"
