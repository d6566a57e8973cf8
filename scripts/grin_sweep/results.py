"""The study's trials as rows: results.csv and the ranking printed at the end."""

import csv
import os
import threading

from .outcomes import outcome
from .study import trial_name
from .sweep_file import METRICS
from .values import number, toml_value


def study_rows(study, metric):
    """One row per trial that ran or is to run, in number order."""
    rows = []
    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    for t in trials:
        status = outcome(t)
        if status == "surplus":
            continue
        # A queued retry has no params of its own until it starts: they are its original's.
        params = t.params or (trials[t.user_attrs["retry_of"]].params if "retry_of" in t.user_attrs else {})
        row = {"trial": trial_name(t.number), "number": t.number, "status": status, **params}
        # The sweep's own metric too when it is not one of METRICS (val_photo_ap).
        for key in dict.fromkeys(METRICS + (metric, "best_step", "val_step", "val_face_ap", "pruned_at", "log", "error")):
            if key in t.user_attrs:
                row[key] = t.user_attrs[key]
        if t.user_attrs.get("retry_of") is not None:
            row["continues"] = trial_name(t.user_attrs["retry_of"])
        row["value"] = t.value if status == "complete" else None
        rows.append(row)
    return rows


def csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple, dict)):
        return toml_value(v)
    return str(v)


def replace_file(path, write):
    """Writes `path` whole through a temporary file, so several workers may rewrite it at once."""
    tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
    with open(tmp, "w", newline="") as f:
        write(f)
    os.replace(tmp, path)


def write_csv(sweep, paths, rows):
    param_keys = [p.key for p in sweep.params]
    metrics = list(METRICS) + ([sweep.metric] if sweep.metric not in METRICS else [])
    header = (["trial", "number", "status"] + param_keys + metrics
              + ["best_step", "val_step", "val_face_ap", "pruned_at", "continues", "log", "error"])

    def write(f):
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            w.writerow([csv_cell(row.get(k)) for k in header])

    replace_file(paths.csv, write)


def ranked(sweep, rows):
    done = [r for r in rows if r["status"] == "complete" and number(r.get("value")) is not None]
    sign = -1 if sweep.goal == "max" else 1
    # Equal scores in trial order.
    return sorted(done, key=lambda r: (sign * r["value"], r["number"]))


def fmt(v, width=10):
    x = number(v)
    if x is None:
        return f"{'-' if v in (None, '') else str(v):>{width}}"
    if float(x).is_integer() and abs(x) < 1e9:
        return f"{int(x):>{width}}"
    return f"{x:>{width}.4g}"


def print_ranking(sweep, rows):
    order = ranked(sweep, rows)
    keys = [p.key for p in sweep.params]
    cols = [sweep.metric] + [m for m in METRICS if m != sweep.metric]
    print(f"\nranking by {sweep.metric} ({'higher' if sweep.goal == 'max' else 'lower'} is better):")
    widths = [max(len(k), 8) for k in keys]
    print(f"{'rank':>4}  {'trial':<12}" + "".join(f"{c[:14]:>15}" for c in cols)
          + "".join(f"  {k:>{w}}" for k, w in zip(keys, widths)))
    for rank, r in enumerate(order, start=1):
        line = f"{rank:>4}  {r['trial']:<12}" + "".join(f"{fmt(r.get(c), 15)}" for c in cols)
        print(line + "".join(f"  {csv_cell(r.get(k)):>{w}}" for k, w in zip(keys, widths)))
    for r in rows:
        if r["status"] == "pruned":
            print(f"   -  {r['trial']:<12} pruned at step {r.get('pruned_at')} (validation AP {fmt(r.get('val_face_ap'), 0)})")
        elif r["status"] != "complete":
            print(f"   -  {r['trial']:<12} {r['status']}: {str(r.get('error', ''))[:200]}")
