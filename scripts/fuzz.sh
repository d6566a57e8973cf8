#!/usr/bin/env bash
# Fuzzes every parser that takes bytes from outside, with cargo-fuzz
# (libFuzzer, AddressSanitizer, a nightly toolchain): the model file (as
# written, and re-signed past its checksums so that mutated shapes and
# weights reach the loader's checks and the runner), a precomputed
# dataset's manifest and shard, config TOML with --set, the WIDER / CelebA /
# JSONL / Caltech annotation parsers, the stream's frame cutter and decoder,
# and image headers through the size bound.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default 60 s each, every target)
#
# Each target starts from a seed corpus of real files in the repo (the
# shipped model, the configs, the test scene, fuzz/seeds/, a small dataset
# `grin precompute` writes, streams `make_stream` writes), kept and grown in
# target/fuzz-corpus/TARGET. libFuzzer fails a target on a panic, a
# sanitizer report, or an allocation past -malloc_limit_mb (the bound each
# parser promises is far below it). Crashes land in fuzz/artifacts/TARGET/:
# copy each into fuzz/regressions/TARGET/, where `cargo test` replays them
# (crates/fuzz-checks/tests/replay.rs). The last lines give each target's
# executions, seconds and findings.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(model_file model_weights store config annotations stream_frames image)

rustup toolchain list | grep -q '^nightly' || { echo "fuzz.sh: needs a nightly toolchain (rustup toolchain install nightly)" >&2; exit 2; }
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz

# Seeds: real files of the repo, and what grin's own tools write.
cargo build --locked --release --bin grin >&2
cargo build --locked --release -p grin-infer --example make_stream >&2
CORPUS=target/fuzz-corpus
SEEDS=target/fuzz-seeds
rm -rf "$SEEDS"
mkdir -p "$SEEDS"/{model_file,model_weights,store,config,annotations,stream_frames,image}
cp assets/default.grin "$SEEDS/model_file/"
cp assets/default.grin "$SEEDS/model_weights/"
for c in configs/*.toml; do
    { echo; cat "$c"; } >"$SEEDS/config/$(basename "$c")"
    { echo "train.lr=0.01"; cat "$c"; } >"$SEEDS/config/set-$(basename "$c")"
done
cp fuzz/seeds/annotations/* "$SEEDS/annotations/"
cp assets/test-scene.png "$SEEDS/image/"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target/release/examples/make_stream --format mjpeg --size 64x48 --frames 2 assets/test-scene.png >"$work/s.mjpeg"
target/release/examples/make_stream --format gray8 --size 64x48 --frames 2 assets/test-scene.png >"$work/s.gray"
target/release/examples/make_stream --format yuv420 --size 64x48 --frames 2 assets/test-scene.png >"$work/s.yuv"
# stream_frames: format byte (0 mjpeg, 1 gray8, 3 yuv420), then width/2-1 and height/2-1.
{ printf '\x00\x1f\x17'; cat "$work/s.mjpeg"; } >"$SEEDS/stream_frames/mjpeg"
{ printf '\x01\x1f\x17'; cat "$work/s.gray"; } >"$SEEDS/stream_frames/gray8"
{ printf '\x03\x1f\x17'; cat "$work/s.yuv"; } >"$SEEDS/stream_frames/yuv420"
# One JPEG frame is a JPEG file.
target/release/examples/make_stream --format mjpeg --size 64x48 --frames 1 assets/test-scene.png >"$SEEDS/image/scene.jpg"
# store: 2-byte manifest length, manifest.json, shard-00000.bin.
cat >"$work/tiny.toml" <<'TOML'
name = "fuzz-seed"
[features]
width = 32
height = 32
seed = 1
[features.source]
kind = "synthetic"
max_faces = 1
min_face = 8
max_face = 16
TOML
target/release/grin precompute --config "$work/tiny.toml" --out "$work/store" --samples 2 >/dev/null 2>&1
python3 scripts/py/store_seed.py "$work/store" "$SEEDS/store/tiny"

# Every target built once, before any runs (the sanitized build is the slow part).
(cd fuzz && cargo +nightly fuzz build -O) >&2

declare -A MAX_LEN=([model_file]=400000 [model_weights]=400000 [store]=16384 [config]=8192 [annotations]=8192 [stream_frames]=65536 [image]=65536)
report=()
for t in "${TARGETS[@]}"; do
    mkdir -p "$CORPUS/$t"
    log=$(mktemp)
    status=0
    (cd fuzz && cargo +nightly fuzz run -O "$t" "../$CORPUS/$t" "../$SEEDS/$t" -- \
        -max_total_time="$SECONDS_EACH" -max_len="${MAX_LEN[$t]}" -malloc_limit_mb=2048 -rss_limit_mb=4096 \
        -print_final_stats=1) >"$log" 2>&1 || status=$?
    runs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    found=$(ls fuzz/artifacts/"$t" 2>/dev/null | wc -l)
    if [ "$status" -ne 0 ]; then
        tail -n 30 "$log" >&2
        report+=("$t: FAILED after ${runs:-?} executions (exit $status); see fuzz/artifacts/$t")
    else
        report+=("$t: ${runs:-?} executions in ${SECONDS_EACH} s, $found artifacts, corpus $(ls "$CORPUS/$t" | wc -l) inputs")
    fi
    rm -f "$log"
done
printf '%s\n' "${report[@]}"
printf '%s\n' "${report[@]}" | grep -q FAILED && exit 1 || exit 0
