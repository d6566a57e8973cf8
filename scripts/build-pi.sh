#!/usr/bin/env bash
# Cross-compiles grin-detect for a Raspberry Pi (aarch64-unknown-linux-gnu)
# with the workspace's `pi` profile (release + fat LTO, one codegen unit,
# panic = abort, stripped) and prints the binary's path and size.
#
# Toolchain (PI_TOOLCHAIN=auto, the default, takes the first that works):
#   rustup: rustup's aarch64-unknown-linux-gnu target, added here when
#           missing (`rustup target add`: the target's std, seconds);
#   debian: Debian's own Rust (rustc-web/cargo-web + libstd-rust-web-dev:arm64,
#           installed here), when there is no rustup and its rustc is new
#           enough for burn 0.21 (bookworm's 1.85 is not: trying it first
#           cost CI the arm64 package lists and a compiler it then dropped).
# Every route links with Debian's aarch64 gcc. Only the grin-infer package is
# built: no CUDA crate is needed.
#
# Usage: scripts/build-pi.sh
#   env: PI_TARGET_DIR (default target/pi), PI_TOOLCHAIN (auto|rustup|debian)
# Last line of output: the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=aarch64-unknown-linux-gnu
PI_TARGET_DIR=${PI_TARGET_DIR:-target/pi}
# burn 0.21's rust-version: an older Debian rustc cannot build it.
MIN_RUSTC=1.92

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

missing_packages() {
    local p
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || echo "$p"
    done
}

apt_install() {
    local missing
    missing=$(missing_packages "$@")
    if [ -n "$missing" ]; then
        echo "build-pi: installing $(echo $missing)" >&2
        $SUDO apt-get update -qq
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >&2
    fi
}

version_at_least() { # $1 >= $2, dotted versions
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

rustup_has_target() {
    command -v rustup >/dev/null 2>&1 && rustup target list --installed 2>/dev/null | grep -qx "$TARGET"
}

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
start=$(date +%s)

PI_TOOLCHAIN=${PI_TOOLCHAIN:-auto}

use_rustup() {
    echo "build-pi: rustup target $TARGET ($(rustc --version))" >&2
    apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross
    CARGO=cargo
}

# Returns non-zero (after saying why) when Debian's rustc is too old.
use_debian() {
    echo "build-pi: Debian's Rust (rustc-web)" >&2
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $SUDO dpkg --add-architecture arm64
        $SUDO apt-get update -qq
    fi
    apt_install rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross
    local have
    have=$(/usr/bin/rustc --version | awk '{print $2}')
    if ! version_at_least "${have%%+*}" "$MIN_RUSTC"; then
        echo "build-pi: Debian's rustc $have is older than $MIN_RUSTC, which burn 0.21 needs" >&2
        return 1
    fi
    export RUSTC=/usr/bin/rustc
    CARGO=/usr/bin/cargo
}

case $PI_TOOLCHAIN in
rustup)
    rustup_has_target || rustup target add "$TARGET" >&2
    use_rustup
    ;;
debian)
    use_debian || exit 1
    ;;
auto)
    if rustup_has_target; then
        use_rustup
    elif command -v rustup >/dev/null 2>&1 && rustup target add "$TARGET" >&2; then
        use_rustup
    elif use_debian; then
        :
    else
        echo "build-pi: error: no aarch64 Rust toolchain; run: rustup target add $TARGET" >&2
        exit 1
    fi
    ;;
*)
    echo "build-pi: error: PI_TOOLCHAIN must be auto, rustup or debian, got '$PI_TOOLCHAIN'" >&2
    exit 1
    ;;
esac

CARGO_TARGET_DIR=$PI_TARGET_DIR $CARGO build --locked --target "$TARGET" -p grin-infer --bin grin-detect --profile pi >&2

bin=$PI_TARGET_DIR/$TARGET/pi/grin-detect
if ! file "$bin" 2>/dev/null | grep -q 'ARM aarch64'; then
    # `file` may be absent; the ELF machine field (0xb7 = aarch64) is what matters.
    machine=$(od -An -tx2 -j18 -N2 "$bin" | tr -d ' ')
    [ "$machine" = "00b7" ] || { echo "build-pi: error: $bin is not an aarch64 binary" >&2; exit 1; }
fi
size=$(stat -c %s "$bin")
echo "build-pi: built in $(( $(date +%s) - start )) s: $bin, $size bytes ($(( (size + 524288) / 1048576 )) MiB)" >&2
echo "$bin"
