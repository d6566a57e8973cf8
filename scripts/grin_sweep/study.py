"""The sweep's folders, the study's storage (a journal file or a database), the study itself
(refused when another sweep made it), and the samplers and pruner its workers ask."""

import hashlib
import os
import re
import time

from .errors import SweepError
from .grin import flat_keys
from .values import toml_literal


class Paths:
    def __init__(self, runs_dir, name):
        self.root = os.path.abspath(os.path.join(runs_dir, "sweeps", name))
        self.data = os.path.join(self.root, "data")
        self.data_done = os.path.join(self.root, "data.done")
        self.trials = os.path.join(self.root, "trials")
        self.logs = os.path.join(self.root, "logs")
        self.csv = os.path.join(self.root, "results.csv")
        self.plot = os.path.join(self.root, "metric_vs_params.svg")
        self.best = os.path.join(self.root, "best.toml")
        self.journal = os.path.join(self.root, "study.journal")

    def make(self):
        for d in (self.root, self.trials, self.logs):
            os.makedirs(d, exist_ok=True)

    def run_dir(self, number):
        return os.path.join(self.trials, trial_name(number))

    def log(self, number):
        return os.path.join(self.logs, f"{trial_name(number)}.log")


def trial_name(number):
    return f"trial-{number:04d}"


def storage_url(spec):
    """A database URL with Optuna's driver named (postgresql:// means psycopg 3 here)."""
    for prefix in ("postgresql://", "postgres://"):
        if spec.startswith(prefix):
            return "postgresql+psycopg://" + spec[len(prefix):]
    return spec


def redacted(url):
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def open_storage(spec):
    """Optuna storage for --storage: a database URL (it has ://) or a journal file path."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if "://" in spec:
        url = storage_url(spec)
        last = None
        # Workers that start together may race to create the tables; the loser retries.
        for attempt in range(5):
            try:
                return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
            except ImportError as e:
                raise SweepError(f"--storage {redacted(spec)}: {e}")
            except Exception as e:  # sqlalchemy's errors: a wrong host, user, database or driver
                last = e
                time.sleep(0.5 * (attempt + 1))
        first = str(last).strip().splitlines()[0] if str(last).strip() else type(last).__name__
        raise SweepError(f"--storage {redacted(spec)}: cannot open the database: {first}")
    folder = os.path.dirname(os.path.abspath(spec))
    if not os.path.isdir(folder):
        raise SweepError(f"--storage {spec}: folder {folder} does not exist")
    return optuna.storages.JournalStorage(JournalFileBackend(os.path.abspath(spec)))


def identity(sweep, resolved):
    """What makes two runs of a sweep one study: trials of different ones cannot be ranked together.
    `base_keys` lets a later run name the key that differs, and accept one grin added since."""
    return {
        "base": hashlib.sha256(resolved.encode()).hexdigest()[:16],
        "base_keys": flat_keys(resolved),
        "sampler": sweep.sampler,
        "metric": sweep.metric,
        "goal": sweep.goal,
        "params": {p.key: p.spec() for p in sweep.params},
        "mode": sweep.mode,
    }


def base_difference(mine, theirs, defaults):
    """Why the study's base config and this one differ, or None when the only difference is keys grin
    added since the study began, each at its default (`defaults`: a minimal config as grin resolves it).
    Returns (why or None, the accepted keys)."""
    old, new = theirs.get("base_keys"), mine["base_keys"]
    if old is None:
        # A study from before keys were kept: only the hash tells.
        same = theirs.get("base") == mine["base"]
        return (None if same else "the base config as grin resolves it (with [set])"), []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            return f"key `{key}` (the study has it, {toml_literal(old[key])}; this grin does not)", []
        if key in old and old[key] != new[key]:
            return f"key `{key}` ({toml_literal(old[key])} in the study, {toml_literal(new[key])} now)", []
    added = sorted(set(new) - set(old))
    for key in added:
        if key not in defaults or defaults[key] != new[key]:
            return f"key `{key}` (new since the study began, set to {toml_literal(new[key])}, not its default)", []
    return None, added


def open_study(sweep, storage, storage_label, resolved, paths, create=True, defaults=None):
    """Loads the sweep's study, or creates it. Refuses one that another sweep made."""
    import optuna

    direction = "maximize" if sweep.goal == "max" else "minimize"
    try:
        study = optuna.load_study(study_name=sweep.name, storage=storage)
    except KeyError:
        if not create:
            raise SweepError(f"{sweep.given}: no study `{sweep.name}` in {storage_label}: nothing has run yet")
        if os.path.isdir(paths.trials) and os.listdir(paths.trials):
            raise SweepError(
                f"{sweep.given}: no study `{sweep.name}` in {storage_label}, but {paths.trials} holds trials; "
                f"was its storage deleted? Remove the folder, or give --storage the study's storage"
            )
        study = optuna.create_study(study_name=sweep.name, storage=storage, direction=direction, load_if_exists=True)
    mine = identity(sweep, resolved)
    theirs = study.user_attrs.get("grin_sweep")
    if theirs is None:
        if study.trials:
            raise SweepError(f"{sweep.given}: study `{sweep.name}` in {storage_label} was not made by scripts/sweep")
        study.set_user_attr("grin_sweep", mine)
    elif theirs != mine:
        changed = [k for k in mine if k not in ("base", "base_keys") and mine[k] != theirs.get(k)]
        if changed:
            what = f"key `{changed[0]}`"
        else:
            what, added = base_difference(mine, theirs, defaults or {})
            if what is None and added:
                print(f"note: study `{sweep.name}` began before grin had {', '.join(f'`{k}`' for k in added)}; "
                      f"at {'its default' if len(added) == 1 else 'their defaults'}, its trials still compare",
                      flush=True)
            if what is None:
                study.set_user_attr("grin_sweep", mine)
        if what is not None:
            raise SweepError(
                f"{sweep.given}: study `{sweep.name}` in {storage_label} was started by another sweep: "
                f"{what} differs; give the sweep a new name, or --storage another place"
            )
    if study.direction.name.lower() != direction:
        raise SweepError(f"{sweep.given}: study `{sweep.name}` in {storage_label} is set to {study.direction.name.lower()}")
    return study


def trial_seeded(make, seed):
    """A sampler that builds a fresh `make(seed')` at the start of every trial, seed' mixed from
    (sweep seed, trial number): a trial's draws depend on its number (and, for TPE, on the finished
    trials), not on which worker runs it, so workers never draw the same stream and a rerun does not
    repeat trial 0's draws. Each worker thread has its own."""
    import optuna

    class TrialSeeded(optuna.samplers.BaseSampler):
        def __init__(self):
            self._inner = make(seed)

        def before_trial(self, study, trial):
            mixed = int.from_bytes(hashlib.sha256(f"{seed}:{trial.number}".encode()).digest()[:4], "little")
            self._inner = make(mixed)
            self._inner.before_trial(study, trial)

        def infer_relative_search_space(self, study, trial):
            return self._inner.infer_relative_search_space(study, trial)

        def sample_relative(self, study, trial, search_space):
            return self._inner.sample_relative(study, trial, search_space)

        def sample_independent(self, study, trial, name, distribution):
            return self._inner.sample_independent(study, trial, name, distribution)

        def after_trial(self, study, trial, state, values):
            self._inner.after_trial(study, trial, state, values)

        def reseed_rng(self):
            self._inner.reseed_rng()

    return TrialSeeded()


def make_sampler(sweep):
    import optuna

    if sweep.sampler == "grid":

        class Grid(optuna.samplers.GridSampler):
            def after_trial(self, study, trial, state, values):
                # It would call study.stop(), which works only inside study.optimize; here the
                # budget ends the workers.
                pass

        # One fixed seed for every worker: the shuffled grid must be the same list everywhere.
        return Grid({p.key: p.grid for p in sweep.params}, seed=sweep.seed)
    if sweep.sampler == "random":
        return trial_seeded(lambda s: optuna.samplers.RandomSampler(seed=s), sweep.seed)
    # constant_liar: a running trial counts as a poor result, so parallel workers spread out.
    return trial_seeded(lambda s: optuna.samplers.TPESampler(seed=s, constant_liar=True,
                                                             n_startup_trials=sweep.tpe_startup_trials), sweep.seed)


def make_pruner(sweep):
    import optuna

    if sweep.pruner == "none":
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(n_startup_trials=sweep.pruner_startup_trials,
                                       n_warmup_steps=sweep.pruner_warmup_steps)
