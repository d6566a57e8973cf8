"""scripts/sweep's code: hyperparameter search for grin on Optuna. `scripts/sweep` runs it
(`cli.main`); the usage text is `cli`'s docstring.

Modules, each importing only those before it: errors, values, sweep_file (the sweep file, parsed
and checked), grin (the binary and `grin config`), optuna_venv (Optuna in .venv-sweep), study
(folders, storage, study, samplers), outcomes, dataset, trial (one `grin train`), workers,
results (results.csv, ranking), plot (SVG), best (best.toml, Optuna's plots, the outputs), slurm,
cli."""
