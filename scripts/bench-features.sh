#!/usr/bin/env bash
# Feature-generation peer benchmark: grin vs the same pipeline in PIL+NumPy
# and in OpenCV (scripts/peers/features_peer.py), on the same crops, at the
# same output size, one process each; prints samples/s per core and ratios.
#
#   scripts/bench-features.sh [SAMPLES]        (default 500)
#
# Inputs: ../shared/data/smilesmiled when present, else 64x64 crops that
# grin cuts from its synthetic scenes. Python peers run in .venv-features,
# built here from PyPI (numpy, pillow, opencv-python-headless).
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLES=${1:-500}
VENV=.venv-features
TARGET=${CARGO_TARGET_DIR:-target}
WORK=$TARGET/bench-features
mkdir -p "$WORK"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import numpy, PIL, cv2" 2>/dev/null; then
    echo "building $VENV (numpy, pillow, opencv-python-headless)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet numpy pillow opencv-python-headless
fi
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
"$VENV/bin/python" scripts/peers/features_peer.py --backend pil --root "$DATA" --samples "$SAMPLES" > "$WORK/pil.json"
echo "OpenCV peer" >&2
"$VENV/bin/python" scripts/peers/features_peer.py --backend cv2 --root "$DATA" --samples "$SAMPLES" > "$WORK/cv2.json"

python3 - "$WORK" "$DATA" <<'EOF'
import json, sys
work, data = sys.argv[1], sys.argv[2]
g = json.load(open(f"{work}/grin.json"))
pil = json.load(open(f"{work}/pil.json"))
cv = json.load(open(f"{work}/cv2.json"))
single, par = g["single"], g["parallel"]
print(f"feature pipeline: crops from {data} -> {g['width']}x{g['height']}x{g['channels']} scenes + flip/brightness/contrast/blur/noise")
print("samples/s: best of 3 timed rounds of the given sample count each; median/p95 over all timed samples")
print(f"{'pipeline':<28}{'samples/s':>12}{'per core':>12}{'median ms':>12}{'p95 ms':>10}")
rows = [
    ("grin, 1 worker", single["samples_per_s"], single["per_core"], g["tg"]["median_s"], g["tg"]["p95_s"]),
    (f"grin, {par['workers']} workers", par["samples_per_s"], par["per_core"], None, None),
    ("PIL+NumPy (1 process)", pil["samples_per_s"], pil["samples_per_s"], pil["median_s"], pil["p95_s"]),
    ("OpenCV (1 thread)", cv["samples_per_s"], cv["samples_per_s"], cv["median_s"], cv["p95_s"]),
]
for name, sps, core, med, p95 in rows:
    m = f"{med*1e3:.3f}" if med is not None else "-"
    p = f"{p95*1e3:.3f}" if p95 is not None else "-"
    print(f"{name:<28}{sps:>12.0f}{core:>12.0f}{m:>12}{p:>10}")
best = max(single["per_core"], par["per_core"])
print(f"per core, grin / PIL+NumPy: {single['per_core'] / pil['samples_per_s']:.2f}x single-threaded, "
      f"{par['per_core'] / pil['samples_per_s']:.2f}x with {par['workers']} workers (target >= 3x)")
print(f"per core, grin / OpenCV:    {single['per_core'] / cv['samples_per_s']:.2f}x single-threaded, "
      f"{par['per_core'] / cv['samples_per_s']:.2f}x with {par['workers']} workers (target >= 1x)")
print("grin per-stage cost per application (median ms): " + ", ".join(
    f"{s['stage']} {s['timing']['median_s']*1e3:.3f}" for s in g["stages"] if s["probability"] > 0))
EOF
