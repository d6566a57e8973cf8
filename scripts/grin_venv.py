#!/usr/bin/env python3
"""The one way grin's scripts get Python packages: an ignored venv per job, `.venv-NAME` at the
repository's root, built from PyPI on first use and rebuilt when its requirements change.

From a shell script (prints the venv's python, building it first if needed):

    PY=$(python3 scripts/grin_venv.py detect "opencv-python-headless>=4.8,<5" numpy) || exit 1

From a Python script that needs the packages in its own process (re-runs the script under the
venv's python; a no-op once there):

    grin_venv.reexec("sweep", ["optuna>=4,<5"], __file__)

One process builds a venv at a time (a lock file beside it); what it was built with is written
into it, so a changed requirement list rebuilds it rather than running against stale packages.
"""

import fcntl
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = "grin-requirements.txt"


class VenvError(Exception):
    pass


def folder(name):
    return os.path.join(ROOT, f".venv-{name}")


def inside(name):
    """Whether this interpreter is the venv's own."""
    return os.path.realpath(sys.prefix) == os.path.realpath(folder(name))


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def ensure(name, requirements):
    """The venv's python, after building the venv if it is missing or was built with other
    requirements. Raises VenvError naming the step that failed and pip's last line."""
    venv = folder(name)
    python = os.path.join(venv, "bin", "python")
    wanted = "\n".join(requirements) + "\n"
    marker = os.path.join(venv, MARKER)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(python) and _read(marker) == wanted:
            return python
        print(f"installing {', '.join(requirements)} into {venv} (once)", file=sys.stderr, flush=True)
        steps = [[sys.executable, "-m", "venv", "--clear", venv],
                 [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements]]
        for cmd in steps:
            # From the root: `-m venv` run in scripts/ would find this file, not the standard library's.
            done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:
                said = done.stderr + done.stdout
                last = ([ln for ln in said.splitlines() if ln.strip()] or ["?"])[-1]
                hint = " (Debian: apt-get install python3-venv)" if "ensurepip" in said else ""
                raise VenvError(f"cannot install {', '.join(requirements)} into {venv}: "
                                f"{shlex.join(cmd[:4])}...: {last}{hint}")
        with open(marker, "w") as f:
            f.write(wanted)
    return python


def reexec(name, requirements, script):
    """Re-runs `script` with this process's arguments under the venv's python (built if needed);
    returns at once when already there."""
    if inside(name):
        return
    python = ensure(name, requirements)
    sys.stdout.flush()
    os.execv(python, [python, os.path.abspath(script), *sys.argv[1:]])


def main(argv):
    if len(argv) < 2 or argv[0].startswith("-"):
        print("usage: scripts/grin_venv.py NAME REQUIREMENT... (prints the venv's python)", file=sys.stderr)
        return 2
    try:
        print(ensure(argv[0], argv[1:]))
    except VenvError as e:
        print(f"scripts/grin_venv.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
