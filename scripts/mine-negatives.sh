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
PEER=../shared/peers/yunet
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

YUNET=target/yunet/yunet-detect
if [ ! -x "$YUNET" ]; then
    command -v cmake >/dev/null && command -v g++ >/dev/null || apt-get install -y --no-install-recommends cmake g++ >/dev/null
    "$PEER/build.sh" target/yunet
fi
find "$OUT" -name '*.png' -print0 | xargs -0 -n 500 "$YUNET" --threshold "$YUNET_SCORE" >"$OUT/yunet.jsonl"

PY=.venv-negatives/bin/python
[ -x "$PY" ] || { echo "mine-negatives: needs Pillow: run scripts/negatives.sh first (it makes .venv-negatives)" >&2; exit 1; }
"$PY" - "$OUT" "$YUNET_SCORE" <<'PY'
import json, os, sys
from PIL import Image, ImageDraw
out = sys.argv[1]
mined = {json.loads(l)["image"]: json.loads(l)["box"] for l in open(os.path.join(out, "mined.jsonl"))}
deleted = painted = 0
for line in open(os.path.join(out, "yunet.jsonl")):
    r = json.loads(line)
    name = os.path.basename(r["image"])
    faces = [d["box"] for d in r["detections"]]
    if not faces or name not in mined:
        continue
    x0, y0, x1, y1 = mined[name]
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    def near(f):
        # The mined box's centre inside the face grown by half, or the face's centre inside the mined box.
        mx, my = (f[2] - f[0]) / 2, (f[3] - f[1]) / 2
        return (f[0] - mx <= cx <= f[2] + mx and f[1] - my <= cy <= f[3] + my) or (x0 <= (f[0] + f[2]) / 2 <= x1 and y0 <= (f[1] + f[3]) / 2 <= y1)
    path = os.path.join(out, name)
    if any(near(f) for f in faces):
        os.remove(path)
        deleted += 1
        continue
    im = Image.open(path)
    draw = ImageDraw.Draw(im)
    for f in faces:
        mx, my = (f[2] - f[0]) / 2, (f[3] - f[1]) / 2
        draw.rectangle([f[0] - mx, f[1] - my, f[2] + mx, f[3] + my], fill=114 if im.mode == "L" else (114, 114, 114))
    im.save(path)
    painted += 1
left = sum(1 for n in os.listdir(out) if n.endswith(".png"))
print(f"mine-negatives: YuNet (score >= {sys.argv[2]}) deleted {deleted} crops whose detection it calls a face, painted its faces over in {painted}; {left} crops in {out}")
PY
