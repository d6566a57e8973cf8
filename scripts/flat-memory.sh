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
python3 - "$grin" "$short" "$long" "$work" <<'PY'
import resource, subprocess, sys
grin, short, long, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sets = ["features.width=64", "features.height=48", "train.batch_size=4", "train.log_every=50",
        "train.checkpoint_every=1000", "train.eval_samples=8", "train.eval_photos=0", "train.warmup_steps=10",
        "features.source.max_face=40"]
def peak_mb(steps):
    cmd = [grin, "train", "--backend", "cpu", "--quiet", "--no-balance", "--config", "configs/demo.toml",
           "--runs-dir", work, "--name", f"flat-{steps}", "--set", f"train.steps={steps}"]
    for s in sets:
        cmd += ["--set", s]
    # ru_maxrss of the children is the largest any has reached so far, so
    # each run is measured in a child of its own.
    probe = ("import resource,subprocess,sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe] + cmd, check=True, capture_output=True, text=True)
    return int(out.stdout.split()[-1]) / 1024
a, b = peak_mb(short), peak_mb(long)
ratio = b / a
print(f"flat-memory: peak RSS {a:.1f} MB at {short} steps, {b:.1f} MB at {long} steps: {ratio:.3f}x (limit 1.10x)")
sys.exit(0 if ratio < 1.10 else "flat-memory: training memory grows with steps (issue 80)")
PY
