"""The outputs a study ends with: best.toml, Optuna's own plots, and (finish) all of them with
results.csv, the ranking and the SVG plot."""

import os

from .errors import SweepError
from .grin import fixed_sets, grin_config
from .plot import write_plot
from .results import print_ranking, ranked, replace_file, study_rows, write_csv
from .sweep_file import STORED_MODES
from .values import toml_value


def write_best(sweep, paths, rows, grin):
    """best.toml: the base config with [set] and the best trial's params, resolved by `grin config`
    (every default filled in), so this script keeps no copy of grin's schema. Relative paths in a
    grin config are relative to the folder grin runs from, as for the trials, so they are written as
    they are."""
    order = ranked(sweep, rows)
    if not order:
        return None
    best = order[0]
    overrides = {p.key: best[p.key] for p in sweep.params}
    sets = {**fixed_sets(sweep), **overrides}
    if sweep.mode in STORED_MODES:
        sets["train.store"] = os.path.relpath(paths.data)
    ok, text = grin_config(grin, sweep.base, sets)
    if not ok:
        raise SweepError(f"best.toml: grin config refused {best['trial']}'s config: {text}")
    header = [
        f"# Best trial of sweep {sweep.name!r}: {best['trial']} with {sweep.metric} = {best['value']}",
        f"# Base config: {sweep.base}",
        "# Overrides: " + ", ".join(f"{k} = {toml_value(v)}" for k, v in {**sweep.fixed, **overrides}.items()),
        f"# Train it from this folder: grin train --config {os.path.relpath(paths.best)}",
        "",
    ]
    replace_file(paths.best, lambda f: f.write("\n".join(header) + text))
    return best


def write_optuna_plots(sweep, paths, study):
    """Optuna's own pictures of the study, as HTML beside results.csv (plotly.js written once, as
    plotly.min.js next to them, so they open offline): the optimization history (each trial's
    value and the best so far) and the parameters' importances (PED-ANOVA, which needs no
    scikit-learn, unlike Optuna's default fANOVA; it needs two complete trials and a parameter
    that varies). A picture that cannot be drawn never fails the sweep: returns a line per
    picture, its path or why not."""
    import optuna
    from optuna.trial import TrialState

    vis = optuna.visualization
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    importance = optuna.importance.PedAnovaImportanceEvaluator()
    plots = [("history.html", lambda st, **kw: vis.plot_optimization_history(st, **kw), 1),
             ("importances.html", lambda st, **kw: vis.plot_param_importances(st, evaluator=importance, **kw), 2)]
    lines = []
    for name, draw, needed in plots:
        path = os.path.join(paths.root, name)
        if len(complete) < needed:
            lines.append(f"{name} not drawn: {len(complete)} complete trial(s), it needs {needed}")
            continue
        try:
            figure = draw(study, target_name=sweep.metric)
            figure.write_html(path, include_plotlyjs="directory")
            lines.append(path)
        except Exception as e:  # noqa: BLE001 -- a picture is never worth a failed sweep
            lines.append(f"{name} not drawn: {type(e).__name__}: {e}")
    return lines


def finish(sweep, paths, study, grin):
    """Writes the outputs from the study; exit code 0 when every trial is complete or pruned, else 1."""
    rows = study_rows(study, sweep.metric)
    write_csv(sweep, paths, rows)
    print_ranking(sweep, rows)
    write_plot(sweep, paths, rows)
    drawn = write_optuna_plots(sweep, paths, study)
    best = write_best(sweep, paths, rows, grin)
    print(f"\nresults: {paths.csv}\nplot:    {paths.plot}")
    for line in drawn:
        print(f"optuna:  {line}")
    if best:
        print(f"best:    {paths.best} ({best['trial']}, {sweep.metric} = {best['value']:.4g})")
    else:
        print("best:    none (no trial complete)")
    tally = {}
    for r in rows:
        tally[r["status"]] = tally.get(r["status"], 0) + 1
    print("trials:  " + ", ".join(f"{n} {s}" for s, n in sorted(tally.items())))
    return 1 if tally.get("failed") else 0
