#!/usr/bin/env bash
# Training speed of grin against PyTorch eager on the same machine, network,
# loss, optimizer, batch and records (issue 26's benchmark).
#
# Both train the detector of configs/gpu-bench.toml (160x120 grey) from one
# store held in memory, cutting a random batch per step and flipping half of
# it (grin: `grin bench step`, the in-VRAM feed with its device augmentation
# reduced to the peer's flip; PyTorch: scripts/peers/torch_detector.py). For
# each width (the shipped 1.15 and 1.0), batch (16 and 64) and thread count
# (1 and 2), ROUNDS rounds alternate the two, so both see the same machine
# load; each run reports the median of its timed windows and each figure
# here is the median over rounds. Per-phase milliseconds per step: batch
# ready, forward, target assignment + loss, backward, optimizer step.
# The last line is `grin/pytorch <R>x at batch 16, <R>x at batch 64 (2 threads)`
# (width 1.15, the shipped model).
#
# Usage: scripts/bench-train.sh
#   env: ROUNDS (default 3), STEPS (timed steps per window, default 40),
#        REPEATS (windows per run, default 3), WIDTHS (default "1.15 1.0"),
#        BATCHES (default "16 64"), THREADS (default "1 2"),
#        WORK (default target/bench-train), GRIN (a grin binary to measure
#        instead of this tree's, e.g. an older build)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-40}
REPEATS=${REPEATS:-3}
WIDTHS=${WIDTHS:-"1.15 1.0"}
BATCHES=${BATCHES:-"16 64"}
THREADS=${THREADS:-"1 2"}
WORK=${WORK:-target/bench-train}
TARGET=${CARGO_TARGET_DIR:-target}
CONFIG=configs/gpu-bench.toml
STORE=$WORK/store

[ -d ../shared/data/smilesmiled ] || { echo "bench-train: ../shared/data/smilesmiled is missing (the store is built from it)" >&2; exit 1; }

# torch from PyPI, in .venv-train: the CPU wheel is what a laptop user gets (scripts/venvs.sh).
. scripts/venvs.sh
PY=$(venv_python train)

if [ -z "${GRIN:-}" ]; then
    cargo build --locked --release -p grin
    GRIN=$TARGET/release/grin
fi
mkdir -p "$WORK"
# A fresh store each run: the first `grin bench step` builds it from the
# config (1024 samples), so it always matches this binary's fingerprint.
rm -rf "$STORE"
RESULTS=$WORK/results.jsonl
: >"$RESULTS"

# The device stages the peer does not run are off, so both run the same step.
SAME_AUGMENT=(--set train.device_augment.contrast=0 --set train.device_augment.brightness=0
    --set train.device_augment.translate=0 --set train.device_augment.flip=0.5)

for round in $(seq 1 "$ROUNDS"); do
    for width in $WIDTHS; do
        for batch in $BATCHES; do
            for threads in $THREADS; do
                tag="round $round, width $width, batch $batch, $threads threads"
                echo "bench-train: $tag" >&2
                RAYON_NUM_THREADS=$threads "$GRIN" bench step --config "$CONFIG" --backend cpu --store "$STORE" \
                    --set "model.width_mult=$width" --set "train.batch_size=$batch" "${SAME_AUGMENT[@]}" \
                    --steps "$STEPS" --repeats "$REPEATS" --json "$WORK/grin.json" >&2
                OMP_NUM_THREADS=$threads "$PY" scripts/peers/torch_detector.py --store "$STORE" \
                    --device cpu --threads "$threads" --batch "$batch" --width-mult "$width" \
                    --steps "$STEPS" --repeats "$REPEATS" --warmup 10 >"$WORK/torch.json"
                "$PY" scripts/py/train_row.py "$WORK/grin.json" "$WORK/torch.json" "$round" "$threads" >>"$RESULTS"
            done
        done
    done
done

"$PY" scripts/py/train_table.py "$RESULTS"
