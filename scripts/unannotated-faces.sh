#!/usr/bin/env bash
# Faces the annotations lack, for a photo source's `crops.unannotated`: YuNet
# (../shared/peers/yunet, built into target/yunet) runs over every photo of
# Caltech WebFaces, of FDDB and of the CelebA portraits, one JSON line a photo, and
# grin takes each face no annotation covers as an ignore region in training
# crops (docs/design.md, "Data sources"). Never committed; about 4 minutes
# on one core for the three sets.
#
#   scripts/unannotated-faces.sh
#
# env: DATA (default ../shared/data), OUT (default data/unannotated),
#      SCORE (default 0.5, YuNet's own threshold: a false face of YuNet's
#      only costs an ignored patch of background)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data}
OUT=${OUT:-data/unannotated}
SCORE=${SCORE:-0.5}
. scripts/yunet.sh
YUNET=$(yunet_detect)
mkdir -p "$OUT"
for set in caltech:caltech-webfaces/images fddb:fddb/images celeba:celeba-smile-10k/images; do
    name=${set%%:*} images=$DATA/${set#*:}
    [ -d "$images" ] || { echo "unannotated-faces: $images is missing (set DATA)" >&2; exit 1; }
    find "$images" -name '*.jpg' -print0 | sort -z | xargs -0 -n 400 "$YUNET" --threshold "$SCORE" >"$OUT/$name-yunet.jsonl.part"
    mv "$OUT/$name-yunet.jsonl.part" "$OUT/$name-yunet.jsonl"
    echo "$OUT/$name-yunet.jsonl: $(wc -l <"$OUT/$name-yunet.jsonl") photos"
done
