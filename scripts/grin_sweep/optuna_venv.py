"""Optuna from this interpreter when it has it, else from .venv-sweep, which scripts/grin_venv.py (the
one venv helper of grin's scripts) builds from PyPI on first use."""

import os

import grin_venv  # scripts/grin_venv.py: scripts/sweep puts scripts/ first on sys.path

from .errors import SweepError

# The venv's name: its folder is .venv-sweep at the repository's root.
VENV_NAME = "sweep"
# plotly: optuna.visualization draws with it (the study's history and parameter importances).
REQUIREMENTS = ("optuna>=4,<5", "psycopg[binary]>=3.1,<4", "plotly>=5,<7")
# What re-runs under the venv's python and what SLURM jobs run: the launcher, not a module file.
LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sweep")


def bootstrap_optuna():
    """Optuna from this interpreter when it has it, else from .venv-sweep (built from PyPI on
    first use, one process at a time): the sweep re-runs itself under the venv's python."""
    try:
        import optuna  # noqa: F401
        return
    except ImportError:
        if grin_venv.inside(VENV_NAME):
            raise SweepError(f"{grin_venv.folder(VENV_NAME)} has no optuna; remove the folder and run again to rebuild it")
    try:
        grin_venv.reexec(VENV_NAME, REQUIREMENTS, LAUNCHER)
    except grin_venv.VenvError as e:
        raise SweepError(str(e))
