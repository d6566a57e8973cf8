#!/usr/bin/env bash
# How far CelebA's `Smiling` labels let a classifier go, next to grin, on the
# same portraits: grin's detector (scored by `grin eval` on the validation
# and test portraits, the figures docs/model.md reports) against a plain
# PyTorch CNN about four times grin's size that is handed the aligned
# portrait itself, trained from scratch on the same training portraits, in
# colour and in grey (scripts/peers/smile_ceiling.py). Colour tells whether
# grin's grey input costs smiles; the CNN's own training accuracy tells how
# much of the labels even a larger model can fit; the last step
# (scripts/peers/smile_agreement.py) counts how many of grin's wrong
# portraits every CNN gets wrong too.
#
# Usage: scripts/smile-ceiling.sh
#   env: MODEL (default assets/default.grin) and CONFIG (default
#        configs/wide-model.toml, for its held-out data), CELEBA (default
#        ../shared/data/celeba-smile-10k), EPOCHS (default 15; about a
#        minute each on two cores), SEEDS (default "0"), WORK (default
#        target/smile-ceiling: the peers' per-portrait probabilities, the
#        exported portraits and grin's detections on them)
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${MODEL:-assets/default.grin}
CONFIG=${CONFIG:-configs/wide-model.toml}
CELEBA=${CELEBA:-../shared/data/celeba-smile-10k}
EPOCHS=${EPOCHS:-15}
SEEDS=${SEEDS:-0}
WORK=${WORK:-target/smile-ceiling}
TARGET=${CARGO_TARGET_DIR:-target}
ATTR=$CELEBA/list_attr_celeba_000001-010000.txt

if [ ! -d "$CELEBA/images" ] || [ ! -f "$ATTR" ]; then
    echo "smile-ceiling: $CELEBA/images or $ATTR is absent; this measurement needs CelebA's portraits" >&2
    exit 1
fi
# torch, xxhash, Pillow, numpy and OpenCV (only for haar_peer.py's helpers, which
# smile_agreement.py shares), in .venv-ceiling (the list: scripts/venvs.sh).
. scripts/venvs.sh
PY=$(venv_python ceiling)

cargo build --locked --release --bin grin
cargo build --locked --release -p grin-infer --bin grin-detect --example export_scenes
mkdir -p "$WORK"
for split in val test; do
    echo "== grin on the $split portraits ($MODEL)"
    "$TARGET/release/grin" eval --model "$MODEL" --config "$CONFIG" --split "$split" --photos 5000 --samples 0 | grep -i celeba
done
for seed in $SEEDS; do
    for channels in 3 1; do
        echo "== CNN peer, $channels channel(s), seed $seed"
        "$PY" scripts/peers/smile_ceiling.py "$CELEBA" --epochs "$EPOCHS" --channels "$channels" \
            --seed "$seed" --out "$WORK"
    done
done
for split in val test; do
    echo "== the same wrong portraits? ($split)"
    folder=$WORK/portraits-$split
    rm -rf "$folder"
    flags=()
    [ "$split" = val ] && flags=(--validation)
    "$TARGET/release/examples/export_scenes" --out "$folder" --count 2000 --width 320 --height 240 --min-face 10 \
        "${flags[@]}" --celeba-images "$CELEBA/images" --celeba-attr "$ATTR" >/dev/null
    "$TARGET/release/grin-detect" --model "$MODEL" --json --size 320x240 "$folder"/celeba-aligned-*.png >"$folder/grin.jsonl"
    tsvs=()
    for seed in $SEEDS; do tsvs+=("$WORK/$split-c3-s$seed.tsv" "$WORK/$split-c1-s$seed.tsv"); done
    "$PY" scripts/peers/smile_agreement.py "$folder" "${tsvs[@]}"
done
