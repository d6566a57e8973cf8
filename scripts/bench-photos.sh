#!/usr/bin/env bash
# Accuracy of grin-detect against the YuNet peer (libfacedetection,
# ../shared/peers/yunet) on whole photos at their own size, each detector at
# its own defaults, in one run: FDDB's news photos (every annotated face
# counts), Caltech WebFaces and CelebA portraits (faces under 10 px are
# ignore regions), and face-free images, where every detection is false; then
# the portraits shown twice as large, cut to 320x240 (`celeba-aligned-x2`:
# faces as large as the frame), grin at the camera's 320x240.
# The validation split of each (by file name, as every grin config splits
# them); SPLIT=test only for a final report. export_scenes --original saves
# each photo once as PNG, so both detectors read the same pixels: grin-detect
# with no --size (twice the photo's pixels, within its pixel budget), YuNet at
# the photo's own size. Found at IoU 0.3. The report (scripts/peers/photos_peer.py)
# gives, per source and detector: recall and AP, recall by face-box width,
# for faces cut by the photo's edge and for whole ones, the misses, false
# detections per photo, and the shape of a box centred on a face against
# the face box (docs/design.md, "The face box").
#
# Usage: scripts/bench-photos.sh [--model PATH]
#   env: PHOTOS (photos per source, 0 = the whole split; default 0),
#        WORK (default target/bench-photos), YUNET_BUILD (default target/yunet),
#        FDDB, CALTECH, CELEBA (defaults under ../shared/data), FACE_FREE
#        (default data/negatives/images, from scripts/negatives.sh; left out
#        when absent), SPLIT (val or test)
set -euo pipefail
cd "$(dirname "$0")/.."

PHOTOS=${PHOTOS:-0}
WORK=${WORK:-target/bench-photos}
FDDB=${FDDB:-../shared/data/fddb}
CALTECH=${CALTECH:-../shared/data/caltech-webfaces}
CELEBA=${CELEBA:-../shared/data/celeba-smile-10k}
FACE_FREE=${FACE_FREE:-data/negatives/images}
SPLIT=${SPLIT:-val}
TARGET=${CARGO_TARGET_DIR:-target}
MODEL_FLAGS=("$@")

case $SPLIT in
    val) SPLIT_FLAGS=(--validation) SPLIT_NAME=validation ;;
    test) SPLIT_FLAGS=() SPLIT_NAME=test ;;
    *) echo "bench-photos: SPLIT=$SPLIT: expected val or test" >&2; exit 1 ;;
esac
CELEBA_ATTR=$CELEBA/list_attr_celeba_000001-010000.txt
for need in "$FDDB/FDDB-folds" "$CALTECH/images" "$CELEBA/images" "$CELEBA_ATTR"; do
    [ -e "$need" ] || { echo "bench-photos: $need is missing (set FDDB / CALTECH / CELEBA)" >&2; exit 1; }
done
FACE_FREE_FLAGS=()
if [ -d "$FACE_FREE" ]; then
    FACE_FREE_FLAGS=(--face-free "$FACE_FREE")
else
    echo "bench-photos: no face-free images at $FACE_FREE (scripts/negatives.sh makes them): left out" >&2
fi
. scripts/yunet.sh
YUNET=$(yunet_detect)
cargo build --locked --release -p grin-infer --bin grin-detect --example export_scenes
DETECT=$TARGET/release/grin-detect
EXPORT=$TARGET/release/examples/export_scenes

rm -rf "$WORK"
mkdir -p "$WORK"
# News photos: every annotated face counts, however small (--min-face 0).
"$EXPORT" --out "$WORK/news" "${SPLIT_FLAGS[@]}" --channels 3 --count "$PHOTOS" --original --min-face 0 --fddb "$FDDB"
"$EXPORT" --out "$WORK/others" "${SPLIT_FLAGS[@]}" --channels 3 --count "$PHOTOS" --original --min-face 10 \
    --caltech "$CALTECH" --celeba-images "$CELEBA/images" --celeba-attr "$CELEBA_ATTR" "${FACE_FREE_FLAGS[@]}"
# Faces as large as the frame: the portraits letterboxed at twice 320x240 and
# cut to its middle (a person leaning in to a robot's camera), run as the
# camera's frames are, at 320x240.
"$EXPORT" --out "$WORK/close" "${SPLIT_FLAGS[@]}" --channels 3 --count "$PHOTOS" --width 320 --height 240 --zoom 2 \
    --min-face 10 --celeba-images "$CELEBA/images" --celeba-attr "$CELEBA_ATTR"
detect_both "$WORK/news"
detect_both "$WORK/others"
detect_both "$WORK/close" --size 320x240
python3 scripts/peers/photos_peer.py --work "$WORK" --sets news,others,close --split "$SPLIT_NAME" \
    --conditions "($SPLIT split; model: ${MODEL_FLAGS[*]:-the embedded default}; commit $(git rev-parse --short HEAD))"
