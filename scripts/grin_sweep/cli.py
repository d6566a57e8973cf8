"""Hyperparameter search for grin on Optuna: many `grin train` trials on ONE precomputed dataset.

Usage:
  scripts/sweep SWEEP.toml [--jobs N] [--storage S]   a worker: runs trials (N at a time) until the study has its budget
  scripts/sweep SWEEP.toml --slurm --jobs N [--sbatch=--gres=gpu:1 ...]   a SLURM array of N workers
  scripts/sweep SWEEP.toml --prepare                  only build the shared dataset
  scripts/sweep SWEEP.toml --merge                    results.csv, ranking, plot, best.toml from the study
  scripts/sweep SWEEP.toml --requeue-running          queue again the trials of workers that were killed
  scripts/sweep --setup                               only install Optuna into .venv-sweep (the first run does it)
Common options: --grin PATH, --runs-dir DIR (default runs).

Sweep file (TOML):
  name    = "lr-width"     # the study's name; outputs go to <runs-dir>/sweeps/<name>/
  base    = "tiny.toml"    # base grin config: next to the sweep file, else from the current directory
  sampler = "tpe"          # grid | random | tpe (default: grid when every param is a list, else random)
  trials  = 12             # the study's budget, 1 to 100000 (default: the product of the lists)
  seed    = 1              # seeds the sampler (default 0)
  mode    = "precomputed"  # precomputed | in-vram | auto | on-the-fly (default precomputed)
  samples = 20000          # `grin precompute --samples` (default: the base's train.store_samples)
  metric  = "face_ap"      # summary.json key to optimise (default face_ap; val_photo_ap: mean AP@0.3
                           # on validation photos, with train.val_photos set; best_val_face_ap: the
                           # validation AP of the trial's best.grin step, with train.eval_every set)
  goal    = "max"          # max | min (default max)
  backend = "cuda"         # optional: passed as `grin train --backend`
  pruner  = "median"       # median | none (default median when metric is a validation AP, else none)
  pruner_startup_trials = 5  # trials that finish before any is pruned (default 5)
  pruner_warmup_steps = 500  # steps before a trial may be pruned (default: half of train.steps)
  tpe_startup_trials = 5     # tpe: random trials before TPE models the rest (default: a quarter
                             # of the budget, 2 to 10; Optuna's own 10 would leave a small budget random)
  [params]
  "train.lr"              = { min = 1e-4, max = 1e-2, log = true }   # float range, log scale
  "train.loss.box_weight" = { min = 1.0, max = 4.0 }                 # float range
  "train.batch_size"      = { min = 16, max = 64, int = true }       # integer range, inclusive
  "model.width_mult"      = [0.5, 1.0]                               # a list: grid points or choices
  [set]
  "train.steps"      = 2000  # fixed overrides for every trial (and best.toml)
  "train.eval_every" = 200   # validation AP every 200 steps: what the pruner reads

A list holds numbers, strings or true/false, one kind per list, each value once; numbers are
finite, and integers and floats are not mixed (1.0, not 1, in a float list). A range needs finite
min <= max, min > 0 when log = true, whole numbers when int = true. The grid sampler needs every
param as a list. Every value a trial can get is checked by `grin config` before anything runs.

What a study, a worker, pruning, Ctrl-C and the outputs do: docs/sweeps.md.
Exit status: 0 when every trial is complete or pruned, 1 when some failed, 2 for a bad sweep
file, command line, storage or dataset build, 130 when interrupted.
"""

import argparse
import os
import signal
import sys
import tomllib

from .best import finish
from .dataset import ensure_dataset
from .errors import SweepError
from .grin import check_values, find_grin, grin_defaults
from .optuna_venv import bootstrap_optuna
from .outcomes import counts
from .slurm import write_slurm
from .study import Paths, open_storage, open_study, redacted, trial_name
from .sweep_file import load_sweep
from .workers import Run, gpu_count, requeue_running, run_workers


def parser():
    ap = argparse.ArgumentParser(prog="sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_file", metavar="SWEEP.toml", nargs="?")
    ap.add_argument("--jobs", type=int, default=1,
                    help="trials run at the same time by this process; with --slurm, array tasks (default 1)")
    ap.add_argument("--storage", help="journal file or database URL (default <runs-dir>/sweeps/<name>/study.journal)")
    ap.add_argument("--grin", help="grin binary (default: grin on PATH, then target/release/grin)")
    ap.add_argument("--runs-dir", default="runs", help="outputs go to RUNS_DIR/sweeps/<name>/ (default runs)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--slurm", action="store_true", help="write SLURM job scripts and print the sbatch commands")
    group.add_argument("--merge", action="store_true", help="results.csv, ranking, plot, best.toml from the study")
    group.add_argument("--prepare", action="store_true", help="only build the shared dataset")
    group.add_argument("--setup", action="store_true",
                       help="only install Optuna into .venv-sweep (what the first run does) and exit")
    group.add_argument("--requeue-running", action="store_true",
                       help="record every running trial as interrupted and queue it again (only when no worker runs)")
    ap.add_argument("--sbatch", action="append", default=[], metavar="OPT",
                    help="extra #SBATCH line for --slurm's workers, e.g. --sbatch=--gres=gpu:1 (repeatable)")
    return ap


def shown_path(path):
    """`path` as messages show it: relative to the working folder when it lies inside it, else
    absolute (a study under /tmp is not `../../tmp/...`)."""
    relative = os.path.relpath(path)
    return path if relative.startswith(os.pardir) else relative


def main(argv=None):
    # `scripts/sweep ... | head` should end quietly, not with a traceback.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    # One progress line at a time, also when the output goes to a file or a pipe.
    sys.stdout.reconfigure(line_buffering=True)
    ap = parser()
    args = ap.parse_args(argv)
    if not 1 <= args.jobs <= 10_000:
        ap.error("--jobs must be between 1 and 10000")
    if args.sweep_file is None and not args.setup:
        ap.error("the sweep file is required")
    try:
        if args.setup:
            return setup()
        return sweep_command(args)
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Before the trials start (a dataset build, the venv): nothing of the study to save.
        print("\ninterrupted", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 2


def setup():
    """--setup: Optuna into .venv-sweep, and nothing else."""
    bootstrap_optuna()
    import optuna
    import psycopg

    print(f"optuna {optuna.__version__}, psycopg {psycopg.__version__} in {sys.prefix}")
    return 0


def sweep_command(args):
    """Everything but --setup: the sweep file checked, then the mode's one job."""
    sweep = load_sweep(args.sweep_file)
    args.grin_path = find_grin(args.grin)
    resolved = check_values(sweep, args.grin_path)
    if sweep.pruner_warmup_steps is None:
        # Early in training every trial's AP is about 0, and the median pruner would stop
        # trials on noise (0 against 0.0002): no pruning in the first half.
        sweep.pruner_warmup_steps = tomllib.loads(resolved)["train"]["steps"] // 2
    paths = Paths(args.runs_dir, sweep.name)
    if args.prepare:
        ensure_dataset(sweep, paths, args.grin_path)
        return 0
    bootstrap_optuna()
    study, storage_spec, label = study_of(args, sweep, paths, resolved)
    paths.make()
    if args.requeue_running:
        return requeue_running(study)
    if args.slurm:
        write_slurm(sweep, paths, args, storage_spec)
        return 0
    if args.merge:
        return finish(sweep, paths, study, args.grin_path)
    return run_study(args, sweep, paths, study, storage_spec, label, resolved)


def study_of(args, sweep, paths, resolved):
    """The sweep's study in --storage (default: the journal in its folder), with Optuna quiet.
    Returns (study, storage spec, the storage as messages name it)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # constant_liar is marked experimental; the warning would repeat for every trial.
    import warnings

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if args.storage and "://" in args.storage:
        storage_spec, label = args.storage, redacted(args.storage)
    else:
        storage_spec = os.path.abspath(args.storage or paths.journal)
        label = shown_path(storage_spec)
        paths.make()
    study = open_study(sweep, open_storage(storage_spec), label, resolved, paths,
                       create=not (args.merge or args.requeue_running),
                       defaults=grin_defaults(args.grin_path, sweep))
    return study, storage_spec, label


def run_study(args, sweep, paths, study, storage_spec, label, resolved):
    """A worker process: runs the trials left (--jobs at a time), then writes the outputs.
    Returns the exit code."""
    trials = study.get_trials(deepcopy=False)
    done = sum(counts(t) and t.state.is_finished() for t in trials)
    todo = max(0, sweep.trials - sum(counts(t) for t in trials))
    todo += sum(t.state.name == "WAITING" for t in trials)
    pruning = (f"{sweep.pruner} pruner from step {sweep.pruner_warmup_steps}" if sweep.pruner != "none"
               else "no pruning")
    sampler = f"{sweep.sampler} sampler" + (f" after {sweep.tpe_startup_trials} random trials"
                                             if sweep.sampler == "tpe" else "")
    print(f"sweep {sweep.name} ({sampler}, {pruning}, study in {label}): "
          f"{sweep.trials} trials, {done} done, {todo} to run", flush=True)
    if sweep.pruner != "none" and tomllib.loads(resolved)["train"].get("eval_every") == 0:
        print("note: train.eval_every is 0, so trials report nothing to prune on; set it in [set]", flush=True)
    running = [trial_name(t.number) for t in trials if t.state.name == "RUNNING"]
    if running:
        print(f"note: {', '.join(running)} running: in another worker, or left by a worker that was killed "
              f"(then, with no worker running, `scripts/sweep {sweep.given} --requeue-running` queues "
              f"{'it' if len(running) == 1 else 'them'} again)", flush=True)
    run = Run(sweep, paths, args.grin_path, storage_spec, args.jobs)
    if todo:
        ensure_dataset(sweep, paths, args.grin_path)
        gpus = gpu_count()
        if gpus > 1 and args.jobs > gpus:
            print(f"{gpus} GPUs: running {gpus} trials at a time, one per GPU", flush=True)
            run.jobs = gpus
        run_workers(run, gpus)
    for e in run.errors:
        print(f"error: {e}", file=sys.stderr)
    code = finish(sweep, paths, study, args.grin_path)
    if run.stop.is_set() and not run.errors:
        print("interrupted: rerun the same command to continue", flush=True)
        return 130
    return 2 if run.errors else code
