"""One trial: its `grin train` command, run under supervision (its validation AP reported to the
pruner as grin writes it), and its result read from summary.json."""

import contextlib
import csv
import json
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time

from .dataset import tail
from .grin import fixed_sets
from .study import trial_name
from .sweep_file import METRICS, STORED_MODES
from .values import number, toml_value

# How often a running trial's metrics.csv is read for new validation figures.
POLL_S = 0.25
# A trial runs in its own session (see Child), so a worker killed outright (SIGKILL, OOM killer)
# would leave it training unsupervised. util-linux's setpriv makes the kernel send it SIGTERM when
# the worker dies: grin checkpoints and exits 130, and --requeue-running continues it. Without
# setpriv (not Linux) the trial runs on to its end instead.
PDEATHSIG = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []


class Child:
    """A running `grin train`, in its own session so that a terminal's Ctrl-C reaches only the
    sweep, which then sends it exactly one SIGTERM: grin's second interrupt means "quit now"."""

    def __init__(self, popen):
        self.popen = popen
        self.lock = threading.Lock()
        self.signalled = False

    def stop(self):
        """Asks grin to checkpoint and stop (once)."""
        with self.lock:
            if not self.signalled and self.popen.poll() is None:
                self.signalled = True
                with contextlib.suppress(ProcessLookupError):
                    self.popen.send_signal(signal.SIGTERM)

    def quit_now(self):
        """Stops grin at once, without a checkpoint. SIGKILL rather than grin's second interrupt,
        which grin ignores when it comes right after the first (see ONE_INTERRUPT in grin)."""
        with self.lock:
            if self.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
            self.signalled = True


def val_rows(metrics_csv):
    """(step, validation AP) rows grin has written so far (the file is replaced whole, atomically)."""
    try:
        with open(metrics_csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return []
    out = []
    for row in rows:
        ap = number(row.get("val_face_ap"))
        step = number(row.get("step"))
        if ap is not None and step is not None:
            out.append((int(step), ap))
    return out


def trial_command(run, number, params, workers, resume):
    sweep, paths = run.sweep, run.paths
    cmd = [run.grin, "train", "--config", sweep.base, "--mode", sweep.mode]
    if sweep.backend:
        cmd += ["--backend", sweep.backend]
    sets = {**fixed_sets(sweep), **params}
    if sweep.mode in STORED_MODES:
        sets["train.store"] = paths.data
    if workers is not None:
        sets["features.workers"] = workers
    for key, value in sets.items():
        cmd += ["--set", f"{key}={toml_value(value)}"]
    # --quiet: no progress bar redrawing itself through the trial's log file.
    cmd += ["--name", trial_name(number), "--runs-dir", paths.trials, "--quiet"]
    if resume:
        cmd.append("--resume")
    return cmd


def suggest(trial, sweep):
    params = {}
    for p in sweep.params:
        if p.grid is not None:
            params[p.key] = trial.suggest_categorical(p.key, p.grid)
        elif p.integer:
            params[p.key] = trial.suggest_int(p.key, p.lo, p.hi, log=p.log)
        else:
            params[p.key] = trial.suggest_float(p.key, p.lo, p.hi, log=p.log)
    return params


def run_trial(run, trial, params, env_extra, workers):
    """Runs one trial, reporting its validation AP to the pruner. Returns (state, value, attrs)."""
    from optuna.trial import TrialState

    paths, sweep = run.paths, run.sweep
    run_dir = paths.run_dir(trial.number)
    resume, workers = take_over_retry(paths, trial, run_dir, workers)
    # Recorded now, not with the results: a retry of a trial whose worker was killed needs it too.
    trial.set_user_attr("workers", workers)
    if os.path.exists(run_dir) and not resume:
        # Left by this trial's own start that failed before anything ran: start over.
        shutil.rmtree(run_dir)
    log = paths.log(trial.number)
    cmd = trial_command(run, trial.number, params, workers, resume)
    env = dict(os.environ, **env_extra)
    started = time.time()
    reported = set()
    pruned_at = None
    attrs = {"log": os.path.relpath(log, paths.root), "workers": workers}
    with open(log, "a" if resume else "w") as out:
        out.write(f"$ {' '.join(f'{k}={v}' for k, v in env_extra.items())} {shlex.join(cmd)}\n")
        out.flush()
        try:
            popen = subprocess.Popen(PDEATHSIG + cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        except OSError as e:
            return TrialState.FAIL, None, {**attrs, "outcome": "failed", "error": f"cannot start grin: {e}"}
        child = Child(popen)
        with run.lock:
            run.children.add(child)
        if run.stop.is_set():
            child.stop()
        metrics_csv = os.path.join(run_dir, "metrics.csv")
        try:
            while True:
                finished = popen.poll() is not None
                for step, ap in val_rows(metrics_csv):
                    if step in reported:
                        continue
                    reported.add(step)
                    attrs["val_step"], attrs["val_face_ap"] = step, ap
                    # Reported with pruning off too: the dashboard plots them.
                    trial.report(ap, step)
                    if pruned_at is None and not child.signalled and trial.should_prune():
                        pruned_at = step
                        child.stop()
                if finished:
                    break
                time.sleep(POLL_S)
        finally:
            if popen.poll() is None:  # an error here: leave no trial running on its own
                child.stop()
                popen.wait()
            with run.lock:
                run.children.discard(child)
        rc = popen.returncode
    attrs["wall_s"] = round(time.time() - started, 3)
    if rc == 0:
        return completed(sweep, run_dir, attrs)
    if pruned_at is not None:
        # Nobody continues a pruned trial: its checkpoint is only disk.
        with contextlib.suppress(OSError):
            os.remove(os.path.join(run_dir, "checkpoint.ckpt"))
        return TrialState.PRUNED, None, {**attrs, "pruned_at": pruned_at}
    if run.stop.is_set():
        return TrialState.FAIL, None, {**attrs, "outcome": "interrupted", "error": tail(log, 1)}
    return TrialState.FAIL, None, {**attrs, "outcome": "failed", "error": f"exit {rc}: {tail(log)}"}


def take_over_retry(paths, trial, run_dir, workers):
    """For an interrupted trial queued again: its folder and log moved to the new number when it
    has a checkpoint to continue from. Returns (resume, the features.workers to run with)."""
    resume = False
    retry_of = trial.user_attrs.get("retry_of")
    if retry_of is not None:
        # features.workers is part of the config a checkpoint must match.
        workers = trial.user_attrs.get("workers", workers)
        # An interrupted trial queued again: continue from its checkpoint under the new number.
        old = paths.run_dir(retry_of)
        if os.path.isfile(os.path.join(old, "checkpoint.ckpt")) and not os.path.exists(run_dir):
            os.rename(old, run_dir)
            resume = True
            old_log = paths.log(retry_of)
            if os.path.exists(old_log):
                os.rename(old_log, paths.log(trial.number))
    return resume, workers


def completed(sweep, run_dir, attrs):
    """The result of a trial grin finished (exit 0), from its summary.json."""
    from optuna.trial import TrialState

    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        if not isinstance(summary, dict):
            raise ValueError("not a JSON object")
        # The trial's best.grin (train.eval_every): its step and validation AP, beside the last model's figures.
        best = summary.get("best") if isinstance(summary.get("best"), dict) else {}
        summary["best_val_face_ap"], summary["best_step"] = best.get("val_face_ap"), best.get("step")
    except (OSError, ValueError) as e:
        return TrialState.FAIL, None, {**attrs, "outcome": "failed",
                                       "error": f"grin exited 0 but summary.json is unreadable: {e}"}
    for key in dict.fromkeys(METRICS + (sweep.metric, "best_step")):
        if summary.get(key) is not None:
            attrs[key] = summary[key]
    value = number(summary.get(sweep.metric))
    if value is None:
        return TrialState.FAIL, None, {**attrs, "outcome": "failed",
                                       "error": f"summary.json has no {sweep.metric} (held-out scenes without a face?)"}
    # A trial asked to stop in its final evaluation finishes anyway: it is complete.
    return TrialState.COMPLETE, value, attrs
