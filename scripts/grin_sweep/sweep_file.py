"""The sweep file: read, parsed and checked before anything runs (what it may hold: `cli`'s
docstring, the usage text)."""

import math
import os
import re
import tomllib
from dataclasses import dataclass, field

from .errors import SweepError
from .values import toml_literal, toml_value

MODES = ("precomputed", "in-vram", "auto", "on-the-fly")
STORED_MODES = ("precomputed", "in-vram", "auto")
SAMPLERS = ("grid", "random", "tpe")
PRUNERS = ("median", "none")
SWEEP_KEYS = {"name", "base", "trials", "seed", "mode", "samples", "metric", "goal", "backend", "sampler",
              "pruner", "pruner_startup_trials", "pruner_warmup_steps", "tpe_startup_trials", "params", "set"}
METRICS = ("face_ap", "smile_accuracy", "steps_per_s", "gpu_busy_pct", "wall_s")
# What `metric` may name: summary.json's numeric keys (grin_train::Summary owns
# them; tests/sweep.rs checks this list against it), and best_val_face_ap,
# which the sweep reads from the summary's `best`.
SUMMARY_METRICS = METRICS + ("val_photo_ap", "best_val_face_ap", "final_loss", "samples_per_s", "step_ms",
                             "wait_ms_per_step")
# Final metrics a trial's validation face AP during training (what the pruner
# reads) speaks for: the same network scored on validation data.
PRUNABLE_METRICS = ("face_ap", "val_photo_ap", "best_val_face_ap")
# Keys the sweep sets itself on every trial; sweeping them would fight it.
RESERVED = {"train.store", "train.mode", "name"}
# Largest budget, and largest grid: the grid sampler holds every combination in memory.
MAX_TRIALS = 100_000
# A sweep file is a page of TOML; a path like /dev/zero must not be read forever.
MAX_SWEEP_BYTES = 1 << 20
# TOML integers are 64-bit; grin cannot read a larger one.
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
KEY_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


@dataclass
class Param:
    key: str
    grid: list | None = None
    lo: float | None = None
    hi: float | None = None
    log: bool = False
    integer: bool = False

    def spec(self):
        """What the study remembers of this param."""
        if self.grid is not None:
            return {"list": self.grid}
        return {"min": self.lo, "max": self.hi, "log": self.log, "int": self.integer}


@dataclass
class Sweep:
    path: str
    name: str = ""
    base: str = ""
    seed: int = 0
    mode: str = "precomputed"
    metric: str = "face_ap"
    goal: str = "max"
    backend: str | None = None
    samples: int | None = None
    trials: int = 1
    sampler: str = "random"
    pruner: str = "none"
    pruner_startup_trials: int = 5
    # None: half of train.steps (see cli), filled in once grin has resolved the base config.
    pruner_warmup_steps: int | None = None
    tpe_startup_trials: int = 10
    params: list = field(default_factory=list)
    fixed: dict = field(default_factory=dict)
    # The path as given, for messages.
    given: str = ""


def load_sweep(path):
    """The sweep file at `path`, checked in the order its refusals are reported: the file, its
    keys and scalars, [params], [set], the sampler and budget, then pruning and the mode."""
    data = read_toml(path)
    s = Sweep(path=os.path.abspath(path), given=path)
    check_scalars(path, data, s)
    params = data.get("params", {})
    if not isinstance(params, dict) or not params:
        raise SweepError(f"{path}: table [params] with at least one parameter is required")
    s.params = [parse_param(path, key, spec) for key, spec in params.items()]
    s.fixed = fixed_overrides(path, data, params)
    choose_budget(path, data, s)
    check_pruning(path, data, s)
    return s


def read_toml(path):
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SWEEP_BYTES + 1)
    except FileNotFoundError:
        raise SweepError(f"{path}: sweep file not found")
    if len(raw) > MAX_SWEEP_BYTES:
        raise SweepError(f"{path}: larger than {MAX_SWEEP_BYTES // 1024} KiB; is it the right file?")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SweepError(f"{path}: not UTF-8 text (bad byte at offset {e.start}); a sweep file is TOML, which is UTF-8")
    try:
        return tomllib.loads(text)
    except ValueError as e:  # TOMLDecodeError, or an integer literal too long to convert
        raise SweepError(f"{path}: {e}")


def check_scalars(path, data, s):
    """The top-level keys other than [params] and [set], into `s`."""
    unknown = sorted(set(data) - SWEEP_KEYS)
    if unknown:
        raise SweepError(f"{path}: unknown key `{unknown[0]}` (known: {', '.join(sorted(SWEEP_KEYS))})")
    s.name = data.get("name")
    if not isinstance(s.name, str) or not s.name or "/" in s.name or s.name in (".", ".."):
        raise SweepError(f"{path}: key `name` must be a plain folder name, got {s.name!r}")
    base = data.get("base")
    if not isinstance(base, str):
        raise SweepError(f"{path}: key `base` (path to the base grin config) is required")
    s.base = resolve_base(path, base)
    ints = ("seed", "trials", "samples", "pruner_startup_trials", "pruner_warmup_steps", "tpe_startup_trials")
    for key in ints + ("metric", "backend", "mode", "goal", "sampler", "pruner"):
        kind = int if key in ints else str
        if key in data and (not isinstance(data[key], kind) or isinstance(data[key], bool)):
            raise SweepError(f"{path}: key `{key}` must be a{'n integer' if kind is int else ' string'}")
    s.seed = data.get("seed", 0)
    s.mode = data.get("mode", "precomputed")
    if s.mode not in MODES:
        raise SweepError(f"{path}: key `mode`: {s.mode!r} is not one of {', '.join(MODES)}")
    s.metric = data.get("metric", "face_ap")
    if s.metric not in SUMMARY_METRICS:
        raise SweepError(f"{path}: key `metric`: {s.metric!r} is not a summary figure: one of {', '.join(SUMMARY_METRICS)}")
    s.goal = data.get("goal", "max")
    if s.goal not in ("max", "min"):
        raise SweepError(f"{path}: key `goal`: {s.goal!r} must be \"max\" or \"min\"")
    s.backend = data.get("backend")
    s.samples = data.get("samples")
    if s.samples is not None and s.samples < 1:
        raise SweepError(f"{path}: key `samples` must be at least 1")
    if not 0 <= s.seed < 2**32:
        raise SweepError(f"{path}: key `seed` must be within 0..{2**32 - 1}, got {s.seed}")
    for key in ("pruner_startup_trials", "pruner_warmup_steps"):
        value = data.get(key, getattr(s, key))
        if value is not None and not 0 <= value <= I64_MAX:
            raise SweepError(f"{path}: key `{key}` must be at least 0, got {value}")
        setattr(s, key, value)


def fixed_overrides(path, data, params):
    """The [set] table, checked: keys grin can take, values grin can read."""
    fixed = data.get("set", {})
    if not isinstance(fixed, dict):
        raise SweepError(f"{path}: key `set` must be a table of fixed overrides, like [set] \"train.steps\" = 500")
    for key, value in fixed.items():
        where = f"{path}: [set] key `{key}`"
        if not KEY_RE.match(key):
            raise SweepError(f"{where}: not a dotted config key")
        if key in RESERVED:
            raise SweepError(f"{where}: set by the sweep itself")
        if key in params:
            raise SweepError(f"{where}: also a param; a key is either swept or fixed")
        if isinstance(value, float) and not math.isfinite(value):
            raise SweepError(f"{where}: {toml_literal(value)} must be a finite number")
        try:
            toml_value(value)
        except SweepError:
            raise SweepError(f"{where}: {value!r} is not a value grin can read (a date or time?)")
    return dict(fixed)


def choose_budget(path, data, s):
    """The sampler, the budget (`trials`) and TPE's random start, into `s`."""
    all_lists = all(p.grid is not None for p in s.params)
    s.sampler = data.get("sampler", "grid" if all_lists else "random")
    if s.sampler not in SAMPLERS:
        raise SweepError(f"{path}: key `sampler`: {s.sampler!r} is not one of {', '.join(SAMPLERS)}")
    grid_size = math.prod(len(p.grid) for p in s.params if p.grid is not None)
    if s.sampler == "grid":
        for p in s.params:
            if p.grid is None:
                raise SweepError(
                    f"{path}: param `{p.key}` is a range, but sampler \"grid\" needs every param as a list; "
                    f"use sampler = \"random\" or \"tpe\", or give a list"
                )
        if grid_size > MAX_TRIALS:
            raise SweepError(
                f"{path}: the lists make a grid of {grid_size} points, more than {MAX_TRIALS}; shorten them, "
                f"or draw from them with sampler = \"random\" or \"tpe\" and key `trials`"
            )
    trials = data.get("trials")
    if trials is None and grid_size > MAX_TRIALS:
        raise SweepError(f"{path}: key `trials` is needed: the lists make {grid_size} combinations, over {MAX_TRIALS}")
    if trials is not None and not 1 <= trials <= MAX_TRIALS:
        raise SweepError(f"{path}: key `trials` must be between 1 and {MAX_TRIALS}, got {trials}")
    s.trials = trials if trials is not None else grid_size
    if s.sampler == "grid":
        s.trials = min(s.trials, grid_size)

    if "tpe_startup_trials" in data and s.sampler != "tpe":
        raise SweepError(f"{path}: key `tpe_startup_trials` is for sampler = \"tpe\", not {s.sampler!r}")
    s.tpe_startup_trials = data.get("tpe_startup_trials", min(10, max(2, s.trials // 4)))
    if not 1 <= s.tpe_startup_trials <= MAX_TRIALS:
        raise SweepError(f"{path}: key `tpe_startup_trials` must be between 1 and {MAX_TRIALS}, got {s.tpe_startup_trials}")


def check_pruning(path, data, s):
    """The pruner, into `s`; and, for a mode that trains on one stored dataset, no feature key swept or set."""
    s.pruner = data.get("pruner", "median" if s.metric in PRUNABLE_METRICS else "none")
    if s.pruner not in PRUNERS:
        raise SweepError(f"{path}: key `pruner`: {s.pruner!r} is not one of {', '.join(PRUNERS)}")
    if s.pruner != "none" and s.metric not in PRUNABLE_METRICS:
        raise SweepError(
            f"{path}: key `pruner`: trials report validation face AP, which says nothing about metric "
            f"{s.metric!r}; set pruner = \"none\""
        )
    if s.mode in STORED_MODES:
        for key in [p.key for p in s.params] + list(s.fixed):
            if key.startswith("features."):
                raise SweepError(
                    f"{path}: `{key}` changes the features, but mode {s.mode!r} trains every trial on one "
                    f"precomputed dataset; fix it in the base config, or sweep it with mode = \"on-the-fly\""
                )


def resolve_base(sweep_path, base):
    if os.path.isabs(base):
        candidates = [base]
    else:
        candidates = [os.path.join(os.path.dirname(os.path.abspath(sweep_path)), base), os.path.abspath(base)]
        candidates = list(dict.fromkeys(candidates))
    for c in candidates:
        if os.path.isfile(c):
            return os.path.abspath(c)
    raise SweepError(f"{sweep_path}: key `base`: config {base!r} not found (looked at {', '.join(candidates)})")
def parse_param(path, key, spec):
    where = f"{path}: param `{key}`"
    if not KEY_RE.match(key):
        raise SweepError(f"{where}: not a dotted config key")
    if key in RESERVED:
        raise SweepError(f"{where}: set by the sweep itself; it cannot be swept")
    if isinstance(spec, list):
        if not spec:
            raise SweepError(f"{where}: empty list")
        return Param(key, grid=check_grid(where, spec))
    if not isinstance(spec, dict):
        raise SweepError(f"{where}: expected a list or a table {{ min, max, log, int }} (a range)")
    unknown = sorted(set(spec) - {"min", "max", "log", "int"})
    if unknown:
        raise SweepError(f"{where}: unknown range key `{unknown[0]}` (known: min, max, log, int)")
    lo, hi = spec.get("min"), spec.get("max")
    for name, v in (("min", lo), ("max", hi)):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise SweepError(f"{where}: `{name}` must be a finite number")
        if isinstance(v, int) and not I64_MIN <= v <= I64_MAX or isinstance(v, float) and not math.isfinite(v):
            raise SweepError(f"{where}: `{name}` must be a finite number within 64-bit range, got {toml_literal(v)}")
    log, integer = spec.get("log", False), spec.get("int", False)
    if not isinstance(log, bool) or not isinstance(integer, bool):
        raise SweepError(f"{where}: `log` and `int` must be true or false")
    if lo > hi:
        raise SweepError(f"{where}: min {lo} is greater than max {hi}")
    if not math.isfinite(hi - lo):
        raise SweepError(f"{where}: the range {lo}..{hi} is too wide to draw from")
    if log and lo <= 0:
        raise SweepError(f"{where}: a log range needs min > 0, got {lo}")
    if integer and (lo != int(lo) or hi != int(hi)):
        raise SweepError(f"{where}: an int range needs whole-number min and max")
    if integer:
        lo, hi = int(lo), int(hi)
    else:
        lo, hi = float(lo), float(hi)
    return Param(key, lo=lo, hi=hi, log=log, integer=integer)


def grid_kind(v):
    """The kind of a list value, or None for one a list cannot hold (arrays, tables, dates)."""
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    return None


def check_grid(where, values):
    """A list holds numbers, strings or booleans, one kind per list and each value once, so every
    trial's value can be passed to grin, written to results.csv and best.toml, and plotted."""
    kinds = []
    for i, v in enumerate(values):
        kind = grid_kind(v)
        if kind is None:
            what = "an array" if isinstance(v, list) else "a table" if isinstance(v, dict) else "a date/time"
            raise SweepError(
                f"{where}: grid value {i + 1} ({toml_literal(v)}) is {what}; "
                f"a grid holds numbers, strings or true/false"
            )
        if kind == "float" and not math.isfinite(v):
            raise SweepError(f"{where}: grid value {i + 1} ({toml_literal(v)}) must be a finite number")
        if kind == "integer" and not I64_MIN <= v <= I64_MAX:
            raise SweepError(f"{where}: grid value {i + 1} ({v}) does not fit a 64-bit integer")
        if kinds and kind != kinds[0][1]:
            j, first = kinds[0]
            w = values[j]
            hint = ""
            if {first, kind} == {"integer", "float"}:
                hint = "; write every value as a float (1.0, not 1) for a float key, or as an integer for an integer key"
            raise SweepError(
                f"{where}: grid mixes kinds: value {j + 1} ({toml_literal(w)}) is {article(first)} but value {i + 1} "
                f"({toml_literal(v)}) is {article(kind)}{hint}"
            )
        if v in values[:i]:
            raise SweepError(f"{where}: grid value {i + 1} ({toml_literal(v)}) repeats value {values.index(v) + 1}")
        kinds.append((i, kind))
    return list(values)


def article(kind):
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"
