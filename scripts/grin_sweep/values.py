"""How the sweep writes values for grin (TOML literals: `--set key=value`, best.toml) and reads
numbers back from grin's files."""

import json
import math
import re

from .errors import SweepError


def toml_literal(v):
    """toml_value, or str for what toml_value cannot write (dates; only for error messages)."""
    try:
        return toml_value(v)
    except SweepError:
        return str(v)


def toml_value(v):
    """A Python value as a TOML literal, for `--set key=value` and for best.toml."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise SweepError(f"cannot write {v!r} ({type(v).__name__}) as TOML")


def toml_key(k):
    return k if re.match(r"^[A-Za-z0-9_-]+$", k) else json.dumps(k)


def number(v):
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None
