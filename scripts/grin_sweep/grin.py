"""The grin binary: finding it, and `grin config`, which checks every value a trial can get and
resolves configs (the sweep keeps no copy of grin's schema)."""

import os
import shlex
import shutil
import subprocess
import tempfile
import tomllib

from .errors import SweepError
from .sweep_file import STORED_MODES
from .values import toml_literal, toml_value

# The repository: target/release/grin is looked for there.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_grin(given):
    if given:
        path = shutil.which(given) or (given if os.path.isfile(given) else None)
        if not path:
            raise SweepError(f"--grin {given}: no such program")
        return os.path.abspath(path)
    for candidate in (shutil.which("grin"), os.path.join(REPO, "target", "release", "grin")):
        if candidate and os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise SweepError("no grin binary: pass --grin PATH (e.g. target/release/grin) or put grin on PATH")


def fixed_sets(sweep):
    """The overrides every trial shares, as `--set` arguments' values."""
    sets = {"train.mode": sweep.mode, **sweep.fixed}
    if sweep.mode in STORED_MODES and sweep.samples is not None:
        sets["train.store_samples"] = sweep.samples
    return sets


def grin_config(grin, base, sets):
    """`grin config` on the base with `sets`: (ok, stdout or grin's one-line error)."""
    cmd = [grin, "config", "--config", base]
    for key, value in sets.items():
        cmd += ["--set", f"{key}={toml_value(value)}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise SweepError(f"cannot run {shlex.join(cmd)}: {e}")
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        message = lines[0] if lines else f"exit {done.returncode}"
        return False, message.removeprefix("error: ")
    return True, done.stdout


def grin_defaults(grin, sweep):
    """Every key of a minimal config (the sweep's name alone) as grin resolves it, flattened: the
    defaults a key grin gained since a study began is compared with."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "minimal.toml")
        with open(path, "w") as f:
            f.write(f"name = {toml_literal(sweep.name)}\n")
        ok, resolved = grin_config(grin, path, {})
    return flat_keys(resolved) if ok else {}


def check_values(sweep, grin):
    """Every value a trial can get goes through `grin config` before anything runs: the base with
    [set], then each list value and each range's ends (grin's ranges are intervals, so the ends
    stand for the values between). Returns the resolved shared config, what the study remembers."""
    where = sweep.given
    shared = fixed_sets(sweep)
    ok, resolved = grin_config(grin, sweep.base, shared)
    if not ok:
        raise SweepError(f"{where}: the base config with [set] and mode is refused by grin config: {resolved}")
    for p in sweep.params:
        values = p.grid if p.grid is not None else list(dict.fromkeys([p.lo, p.hi]))
        for v in values:
            ok, message = grin_config(grin, sweep.base, {**shared, p.key: v})
            if not ok:
                what = "value" if p.grid is not None else ("min" if v == p.lo else "max")
                raise SweepError(f"{where}: param `{p.key}`: {what} {toml_literal(v)} is refused by grin config: {message}")
    # A metric no trial would report is found now, not after every trial has trained.
    if sweep.metric == "val_photo_ap" and tomllib.loads(resolved)["train"].get("val_photos", 0) == 0:
        raise SweepError(f"{where}: metric `val_photo_ap` needs train.val_photos > 0 (the validation photos it scores): "
                         f"set it in the base config or in [set]")
    if sweep.metric == "best_val_face_ap" and tomllib.loads(resolved)["train"].get("eval_every", 0) == 0:
        raise SweepError(f"{where}: metric `best_val_face_ap` needs train.eval_every > 0 (the validation scores "
                         f"best.grin is chosen on): set it in the base config or in [set]")
    return resolved


def flat_keys(text):
    """A resolved config's leaves as dotted keys (`train.lr`, `features.source.parts.1.kind`)."""
    out = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}{k}.", v)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, v in enumerate(value):
                walk(f"{prefix}{i}.", v)
        else:
            out[prefix[:-1]] = value

    walk("", tomllib.loads(text))
    return out
