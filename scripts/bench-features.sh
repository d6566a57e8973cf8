#!/usr/bin/env bash
# Feature-generation peer benchmark: grin vs the same pipeline in PIL+NumPy
# and in OpenCV (scripts/peers/features_peer.py), on the same crops, at the
# same output size, one process each; prints samples/s per core and ratios.
#
#   scripts/bench-features.sh [SAMPLES]        (default 500)
#
# Inputs: ../shared/data/smilesmiled when present, else 64x64 crops that
# grin cuts from its synthetic scenes. Then, where ../shared/data/fddb is
# present, the cost of a photo source's mosaic (`crops.mosaic`: four crops at
# half size tiled into one scene) against plain crops: FDDB's training photos
# cut into 160x120 scenes, one worker, MOSAIC_SAMPLES samples each (default
# 3000: each photo is decoded on its first use, so the median is that of a
# warm cache). Python peers run in .venv-features,
# built by scripts/grin_venv.py from PyPI (numpy, pillow, opencv-python-headless:
# the list in scripts/venvs.sh, shared with bench-scaling.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLES=${1:-500}
TARGET=${CARGO_TARGET_DIR:-target}
WORK=$TARGET/bench-features
mkdir -p "$WORK"

. scripts/venvs.sh
PY=$(venv_python features)
cargo build --release -p grin >&2
GRIN=$TARGET/release/grin

DATA=../shared/data/smilesmiled
if [ ! -d "$DATA/smile" ] || [ ! -d "$DATA/no_smile" ]; then
    DATA=$WORK/crops
    echo "SMILEsmileD not found; using crops grin cuts from synthetic scenes in $DATA" >&2
    "$GRIN" features export-crops --out "$DATA" --count 500 >&2
fi
DATA=$(cd "$DATA" && pwd)

# Same stages as the peers: scene, then flip, brightness, contrast, blur and
# noise on every sample; no crop/rotate/gamma/jpeg, no balancing.
CONFIG=$WORK/bench.toml
cat > "$CONFIG" <<EOF
name = "bench-features"
[features]
width = 320
height = 240
channels = 1
[features.source]
kind = "crops"
root = "$DATA"
max_faces = 4
min_face = 16.0
max_face = 160.0
rotation_deg = 15.0
[features.augment]
flip = 1.0
crop = 0.0
rotate = 0.0
brightness = 1.0
brightness_delta = 0.2
contrast = 1.0
contrast_range = [0.7, 1.3]
gamma = 0.0
blur = 1.0
blur_sigma = [0.5, 1.5]
noise = 1.0
noise_sigma = 6.0
jpeg = 0.0
EOF

CORES=$(nproc)
echo "grin (1 and $CORES workers), $SAMPLES samples" >&2
"$GRIN" features bench --config "$CONFIG" --samples "$SAMPLES" --workers "$CORES" --json > "$WORK/grin.json"
echo "PIL+NumPy peer" >&2
"$PY" scripts/peers/features_peer.py --backend pil --root "$DATA" --samples "$SAMPLES" > "$WORK/pil.json"
echo "OpenCV peer" >&2
"$PY" scripts/peers/features_peer.py --backend cv2 --root "$DATA" --samples "$SAMPLES" > "$WORK/cv2.json"

python3 scripts/py/features_table.py "$WORK" "$DATA"

FDDB=../shared/data/fddb
if [ -d "$FDDB/FDDB-folds" ]; then
    FDDB=$(cd "$FDDB" && pwd)
    for mosaic in 0.0 1.0; do
        cat > "$WORK/mosaic-$mosaic.toml" <<EOF
name = "bench-mosaic"
[features]
width = 160
height = 120
channels = 1
[features.source]
kind = "fddb"
root = "$FDDB"
[features.source.crops]
min_face = 16.0
max_face = 150.0
max_zoom_out = 3.0
mosaic = $mosaic
EOF
        "$GRIN" features bench --config "$WORK/mosaic-$mosaic.toml" --samples "${MOSAIC_SAMPLES:-3000}" --workers 1 --json \
            >"$WORK/mosaic-$mosaic.json"
    done
    python3 scripts/py/mosaic_row.py "$WORK"
else
    echo "no FDDB at $FDDB: the mosaic's cost is not measured" >&2
fi
