#!/usr/bin/env bash
# Hard negatives for a `kind = "negatives"` source (`mined = DIR`): a model's
# confident false detections on the training photos (`grin mine`, at the
# model's run size and at 640x480, where small false detections appear),
# then checked by a second detector, since Caltech leaves faces unannotated:
# YuNet (../shared/peers/yunet, built into target/yunet) runs on every crop;
# a crop whose mined detection YuNet calls a face is deleted (it was an
# unannotated face, not a negative), and any other face YuNet finds in a
# crop is painted over with the letterbox grey, as `grin mine` paints the
# annotated ones.
#
#   scripts/mine-negatives.sh
#
# env: MODEL (default assets/default.grin), CONFIG (the training photos;
#      default configs/small-faces-fused.toml), OUT (default
#      data/negatives/mined: replaced), SCORE (default 0.4), YUNET_SCORE
#      (default 0.3: it misses few faces there), GRIN (default target/release/grin),
#      SIZES (the passes, default "model 640x480": `model` is the model's own
#      run size, `WxH` one size for every photo, `own` each photo at
#      grin-detect's photo default, twice its pixels, one photo at a time),
#      FLAGS (more `grin mine` flags, e.g. `--as-looked`)
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-assets/default.grin}
CONFIG=${CONFIG:-configs/small-faces-fused.toml}
OUT=${OUT:-data/negatives/mined}
SCORE=${SCORE:-0.4}
YUNET_SCORE=${YUNET_SCORE:-0.3}
GRIN=${GRIN:-target/release/grin}
SIZES=${SIZES:-model 640x480}
[ -x "$GRIN" ] || cargo build --release
rm -rf "$OUT"
for size in $SIZES; do
    case $size in
        model) pass=() ;;
        own) pass=(--own-size) ;;
        *) pass=(--run-size "$size") ;;
    esac
    # shellcheck disable=SC2086 # FLAGS is a list of flags
    "$GRIN" mine --model "$MODEL" --config "$CONFIG" --out "$OUT" --score "$SCORE" "${pass[@]}" ${FLAGS:-}
done

. scripts/yunet.sh
YUNET=$(yunet_detect)
find "$OUT" -name '*.png' -print0 | xargs -0 -n 500 "$YUNET" --threshold "$YUNET_SCORE" >"$OUT/yunet.jsonl"

# Pillow, from .venv-negatives (the venv scripts/negatives.sh uses; its list: scripts/venvs.sh).
. scripts/venvs.sh
PY=$(venv_python negatives)
"$PY" scripts/py/mined_yunet_check.py "$OUT" "$YUNET_SCORE"
