#!/usr/bin/env bash
# Shuffled batch read throughput of a precomputed dataset, in one run:
#   (a) memcpy of the same record bytes (the limit) and grin's store reader,
#   (b) h5py chunked datasets, (c) one .npy file per sample,
# all reading the same shuffled batches with the data in page cache.
#
# Usage: scripts/bench-store.sh   (env: DIR, SAMPLES, BATCH, WIDTH, HEIGHT)
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${DIR:-data/bench-store}
WORK=${WORK:-${DIR}-peer}
SAMPLES=${SAMPLES:-10000}
BATCH=${BATCH:-256}
WIDTH=${WIDTH:-320}
HEIGHT=${HEIGHT:-240}
TARGET=${CARGO_TARGET_DIR:-target}
GRIN=$TARGET/release/grin

# numpy and h5py, in .venv-store (the list: scripts/venvs.sh).
. scripts/venvs.sh
PY=$(venv_python store)

cargo build --release --bin grin

if [ ! -f "$DIR/manifest.json" ]; then
    # The demo's synthetic scenes at the detector's default input size.
    "$GRIN" precompute --config configs/demo.toml \
        --set features.width="$WIDTH" --set features.height="$HEIGHT" \
        --out "$DIR" --samples "$SAMPLES"
fi
"$GRIN" verify "$DIR"

mkdir -p "$WORK"
"$GRIN" store bench --dir "$DIR" --batch "$BATCH" --order-out "$WORK/order.bin" --json "$WORK/grin.json"
"$PY" scripts/peers/store_peer.py --dir "$DIR" --work "$WORK" \
    --order "$WORK/order.bin" --batch "$BATCH" --grin-json "$WORK/grin.json"
