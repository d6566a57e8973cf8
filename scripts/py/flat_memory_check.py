"""scripts/flat-memory.sh's check (issue 80): training's peak RSS must not grow with steps.

  flat_memory_check.py GRIN SHORT LONG WORK

Runs `GRIN train` on configs/demo.toml (relative: run from the repository's root) at a small
frame and batch, for SHORT and then LONG steps, with run folders under WORK, each in a child
process of its own. Prints both peaks and their ratio; exits non-zero when LONG's peak is 1.10x
SHORT's or more.
"""
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
