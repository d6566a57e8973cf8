"""The workers of one process: threads that each ask the study for a trial, run it and tell the
result, until the budget is used; Ctrl-C, progress lines, and requeueing killed workers' trials."""

import os
import shutil
import signal
import subprocess
import threading
import time

from .errors import SweepError
from .outcomes import counts
from .study import make_pruner, make_sampler, open_storage, trial_name
from .trial import run_trial, suggest
from .values import toml_value


def gpu_count():
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def thread_env(threads):
    return {k: str(threads) for k in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


class Run:
    """What the workers of one process share."""

    def __init__(self, sweep, paths, grin, storage_spec, jobs):
        self.sweep, self.paths, self.grin, self.storage_spec = sweep, paths, grin, storage_spec
        self.jobs = jobs
        self.stop = threading.Event()
        self.quit = threading.Event()
        self.lock = threading.Lock()
        self.children = set()
        self.errors = []
        # For the ETA: when this process began, and how many trials it has finished since.
        self.started = time.time()
        self.finished_here = 0

    def say(self, text):
        with self.lock:
            print(text, flush=True)

    def on_signal(self, signum, _frame):
        with self.lock:
            children = list(self.children)
        if self.stop.is_set():
            self.quit.set()
            print("\nsecond interrupt: stopping the running trials at once (no checkpoint)", flush=True)
            for c in children:
                c.quit_now()
            return
        self.stop.set()
        print(f"\n{signal.Signals(signum).name}: stopping the sweep: each running trial writes a checkpoint and "
              f"stops; finished trials are kept; rerun to continue (interrupt again to stop at once)", flush=True)
        for c in children:
            c.stop()


def worker(run, index, env_extra, workers):
    """One worker: ask the study for a trial, run it, tell the result; until the budget is used."""
    from optuna.trial import TrialState

    import optuna

    sweep = run.sweep
    storage = open_storage(run.storage_spec)
    study = optuna.load_study(study_name=sweep.name, storage=storage, sampler=make_sampler(sweep),
                              pruner=make_pruner(sweep))
    while not run.stop.is_set():
        trials = study.get_trials(deepcopy=False)
        waiting = any(t.state == TrialState.WAITING for t in trials)
        if sum(counts(t) for t in trials) >= sweep.trials and not waiting:
            return
        trial = study.ask()
        # Trial numbers are handed out in order, so the budget's first trials are exactly those
        # with the lowest numbers: one that two workers asked for at the same moment, past the
        # budget, is closed unrun.
        before = sum(counts(t) for t in study.get_trials(deepcopy=False) if t.number < trial.number)
        if before >= sweep.trials:
            trial.set_user_attr("outcome", "surplus")
            study.tell(trial, state=TrialState.FAIL)
            return
        params = suggest(trial, sweep)
        retry = trial.user_attrs.get("retry_of")
        label = "  ".join(f"{k}={toml_value(v)}" for k, v in params.items())
        run.say(f"{trial_name(trial.number)} started{f' (continues {trial_name(retry)})' if retry is not None else ''}: {label}")
        try:
            state, value, attrs = run_trial(run, trial, params, env_extra, workers)
        except Exception as e:
            state, value, attrs = TrialState.FAIL, None, {"outcome": "failed", "error": f"{type(e).__name__}: {e}"}
        for key, v in attrs.items():
            trial.set_user_attr(key, v)
        if state == TrialState.COMPLETE:
            study.tell(trial, value)
            detail = f"{sweep.metric}={value:.4g}"
        else:
            study.tell(trial, state=state)
            if state == TrialState.PRUNED:
                detail = f"at step {attrs['pruned_at']} (validation AP {attrs['val_face_ap']:.4g})"
            else:
                detail = attrs.get("error", "")[:300]
        if attrs.get("outcome") == "interrupted":
            # Queued again with its params, so the rerun continues it from its checkpoint.
            study.enqueue_trial(params, user_attrs={"retry_of": trial.number, "workers": attrs.get("workers")})
        status = attrs.get("outcome", state.name.lower())
        wall = f" ({attrs['wall_s']:.0f} s)" if "wall_s" in attrs else ""
        with run.lock:
            run.finished_here += 1
        run.say(f"{trial_name(trial.number)} {status}: {detail}{wall}  [{progress(run, study)}]")


def progress(run, study):
    """`k/N done, best so far, ETA`: what each finished trial's line ends with. The ETA is this
    process's rate (trials finished per second since it began, all its workers together) applied
    to the trials left."""
    from optuna.trial import TrialState

    sweep = run.sweep
    trials = study.get_trials(deepcopy=False)
    done = sum(1 for t in trials if t.state.is_finished() and counts(t))
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    parts = [f"{done}/{sweep.trials} done"]
    if complete:
        pick = max if sweep.goal == "max" else min
        best = pick(complete, key=lambda t: t.value)
        parts.append(f"best {sweep.metric}={best.value:.4g} ({trial_name(best.number)})")
    left = max(sweep.trials - done, 0)
    elapsed = time.time() - run.started
    if left and run.finished_here:
        parts.append(f"ETA {duration(elapsed / run.finished_here * left)}")
    return ", ".join(parts)


def duration(seconds):
    """`42 s`, `12 min`, `3.5 h`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def requeue_running(study):
    """A worker killed outright (SIGKILL, a lost machine) leaves its trial `running`, holding its
    place in the budget. Run only when no worker is running: this cannot tell a live one."""
    from optuna.trial import TrialState

    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for t in running:
        study._storage.set_trial_user_attr(t._trial_id, "outcome", "interrupted")
        study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        kept = {k: t.user_attrs[k] for k in ("workers",) if k in t.user_attrs}
        study.enqueue_trial(t.params, user_attrs={"retry_of": t.number, **kept})
        print(f"{trial_name(t.number)}: recorded as interrupted and queued again")
    print(f"{len(running)} running trial(s) queued again")
    return 0


def run_workers(run, gpus):
    """--jobs workers in threads (each trial is a subprocess); returns once all have stopped."""
    cpus = os.cpu_count() or 1
    threads = max(1, cpus // run.jobs)
    plans = []
    for k in range(run.jobs):
        if gpus > 1:
            plans.append(({"CUDA_VISIBLE_DEVICES": str(k)}, None))
        elif gpus == 1:
            plans.append(({}, None))
        else:
            plans.append((thread_env(threads), threads))

    def body(k, env, workers):
        try:
            worker(run, k, env, workers)
        except SweepError as e:
            run.errors.append(str(e))
            run.stop.set()
        except Exception as e:  # a storage that went away, a bug: stop this process's other trials too
            run.errors.append(f"worker {k}: {type(e).__name__}: {e}")
            run.stop.set()
            with run.lock:
                children = list(run.children)
            for c in children:
                c.stop()

    handlers = {s: signal.signal(s, run.on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        pool = [threading.Thread(target=body, args=(k, env, w), daemon=True) for k, (env, w) in enumerate(plans)]
        for t in pool:
            t.start()
        while any(t.is_alive() for t in pool):
            for t in pool:
                t.join(timeout=0.2)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
