#!/usr/bin/env bash
# Issue 80's check that training runs in flat memory: peak RSS of the same
# run at SHORT and LONG steps (default 500 and 5,000) must differ by less
# than 10%. Not a timed test: it measures memory, so it may run beside
# anything. A small frame and batch keep 5,000 steps short; the growth it
# guards against (Burn's autodiff graphs never freed, about 0.14-0.3 MB a
# step) did not depend on either.
#   scripts/flat-memory.sh [GRIN_BINARY] [SHORT] [LONG]
set -euo pipefail
cd "$(dirname "$0")/.."
grin=${1:-target/release/grin}
short=${2:-500}
long=${3:-5000}
[ -x "$grin" ] || { echo "flat-memory: $grin: no such binary (cargo build --release first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 scripts/py/flat_memory_check.py "$grin" "$short" "$long" "$work"
