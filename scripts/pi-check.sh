#!/usr/bin/env bash
# CI check of the Pi build: cross-compiles grin-detect for aarch64, runs it
# under qemu-aarch64 on a test image, and requires its JSON to equal the
# x86 build's, byte for byte. Exits non-zero on any difference.
#
# Test image: assets/test-scene.png, a 320x240 held-out synthetic scene made
# by the project's own generator:
#   cargo run --release -p grin-infer --example export_scenes -- \
#       --out /tmp/scene --count 1 --start 3 --width 320 --height 240
#   (then scene-0003.png copied to assets/test-scene.png)
# It is checked at grin-detect's default for photos (twice the model's run
# size: 640x480, an upscale) and at 320x240 (the model's run size).
# Then the camera loop: a short yuv420 stream made from the same image by
# examples/make_stream (frames panned 4 px each) goes through
# `grin-detect --stream --no-clock` on both builds, tracks and smile events
# included, and the two outputs must be equal too.
#
# Usage: scripts/pi-check.sh [IMAGE...]
#   env: X86_BUILD_ARGS (default `-p grin-infer`): which packages and features
#        the x86 build resolves. CI passes its own `--workspace --features ...`
#        so that the binaries it already built are reused, not rebuilt with
#        grin-infer's smaller feature set (about 3 minutes of CI).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGES=("$@")
[ ${#IMAGES[@]} -gt 0 ] || IMAGES=(assets/test-scene.png)
X86_TARGET=${CARGO_TARGET_DIR:-target}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
if ! dpkg -s qemu-user >/dev/null 2>&1; then
    echo "pi-check: installing qemu-user" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user >&2
fi

t0=$(date +%s)
# shellcheck disable=SC2086  # X86_BUILD_ARGS is a list of arguments
cargo build --locked --release ${X86_BUILD_ARGS:--p grin-infer} --bin grin-detect --example make_stream >&2
x86=$X86_TARGET/release/grin-detect
t1=$(date +%s)
pi=$(scripts/build-pi.sh | tail -n1)
t2=$(date +%s)
echo "pi-check: x86 build $((t1 - t0)) s, aarch64 build $((t2 - t1)) s" >&2

# The loader and libc must come from the same package. Debian's Rust route
# installs libc6:arm64 into /lib/aarch64-linux-gnu, which the cross loader in
# /usr/aarch64-linux-gnu would otherwise pick up: a mismatched pair that spins
# forever at start-up. Pinning the library path keeps the pair together.
QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)

status=0
for size in "" 320x240; do
    flags=(--json)
    [ -z "$size" ] || flags+=(--size "$size")
    label="size ${size:-photo default}"
    "$x86" "${flags[@]}" "${IMAGES[@]}" >"$WORK/x86.json"
    if ! timeout 300 "${QEMU[@]}" "$pi" "${flags[@]}" "${IMAGES[@]}" >"$WORK/aarch64.json"; then
        echo "pi-check: $label: the aarch64 binary failed or took over 300 s under qemu" >&2
        status=1
        continue
    fi
    faces=$(grep -o '"box"' "$WORK/x86.json" | wc -l)
    if diff -u "$WORK/x86.json" "$WORK/aarch64.json"; then
        echo "pi-check: $label: aarch64 JSON equals x86 JSON ($faces detections)"
    else
        echo "pi-check: $label: aarch64 JSON differs from x86 JSON" >&2
        status=1
    fi
done
"$X86_TARGET/release/examples/make_stream" --format yuv420 --size 320x240 --frames 12 --pan 4 "${IMAGES[0]}" \
    >"$WORK/stream.yuv"
# Thresholds low enough that the scene's faces (low smile probabilities
# under the shipped model) switch state, so the events are compared too.
stream_flags=(--stream "$WORK/stream.yuv" --input-format yuv420 --input-size 320x240 --no-clock --smile-on 0.2 --smile-off 0.1 --smile-hold 2)
"$x86" "${stream_flags[@]}" >"$WORK/x86-stream.json" 2>/dev/null
if ! timeout 300 "${QEMU[@]}" "$pi" "${stream_flags[@]}" >"$WORK/aarch64-stream.json" 2>"$WORK/aarch64-stream.err"; then
    echo "pi-check: stream: the aarch64 binary failed or took over 300 s under qemu" >&2
    cat "$WORK/aarch64-stream.err" >&2
    status=1
elif diff -u "$WORK/x86-stream.json" "$WORK/aarch64-stream.json"; then
    frames=$(grep -c '"faces"' "$WORK/x86-stream.json" || true)
    events=$(grep -c '"event"' "$WORK/x86-stream.json" || true)
    echo "pi-check: stream: aarch64 JSON equals x86 JSON ($frames yuv420 frames, $events smile events)"
else
    echo "pi-check: stream: aarch64 JSON differs from x86 JSON" >&2
    status=1
fi
echo "pi-check: aarch64 binary $(stat -c %s "$pi") bytes"
exit $status
