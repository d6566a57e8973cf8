"""The shared dataset every trial of a stored mode trains on, built once by `grin precompute`."""

import fcntl
import os
import shlex
import subprocess
import time

from .errors import SweepError
from .sweep_file import STORED_MODES
from .values import toml_value

LOG_TAIL_LINES = 8


def tail(path, lines=LOG_TAIL_LINES):
    try:
        with open(path, "r", errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    # Progress bars redraw with carriage returns; keep only what was finally on each line.
    kept = [ln.rsplit("\r", 1)[-1].strip() for ln in text.splitlines()]
    # The first line of a trial log is the command the sweep ran, not grin's output.
    kept = [ln for ln in kept if ln and not ln.startswith("$ ")]
    return " | ".join(kept[-lines:])


def ensure_dataset(sweep, paths, grin):
    """Builds the shared dataset once. Workers that start together wait on a file lock for the
    first one's build instead of writing the same folder twice (a study coordinates trials, not
    files)."""
    if sweep.mode not in STORED_MODES:
        return
    paths.make()
    with open(os.path.join(paths.root, "data.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(paths.data_done) and os.path.isdir(paths.data):
            return
        cmd = [grin, "precompute", "--config", sweep.base, "--out", paths.data]
        for key, value in sweep.fixed.items():
            cmd += ["--set", f"{key}={toml_value(value)}"]
        if sweep.samples is not None:
            cmd += ["--samples", str(sweep.samples)]
        log = os.path.join(paths.root, "precompute.log")
        # An interrupted build resumes: grin precompute keeps the shards already written.
        print(f"building the shared dataset: {shlex.join(cmd)}", flush=True)
        started = time.time()
        with open(log, "w") as out:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            raise SweepError(f"precompute failed (exit {rc}), log {log}: {tail(log)}")
        with open(paths.data_done, "w") as f:
            f.write(f"built in {time.time() - started:.1f} s by {shlex.join(cmd)}\n")
        print(f"dataset ready in {time.time() - started:.1f} s: {paths.data}", flush=True)
