"""--slurm: job scripts for a SLURM array of workers, with the dataset built before and the
results merged after."""

import os
import shlex

from .optuna_venv import LAUNCHER


def write_slurm(sweep, paths, args, storage_spec):
    paths.make()
    # The compute nodes' python3 (3.11+ for tomllib); the script moves into .venv-sweep itself.
    base_cmd = ["python3", LAUNCHER, sweep.path, "--runs-dir", os.path.abspath(args.runs_dir),
                "--grin", args.grin_path, "--storage", storage_spec]
    # --sbatch lines (GPUs, time, partition) are for the workers; precompute and merge get none.
    extra = "".join(f"#SBATCH {opt}\n" for opt in args.sbatch)
    cwd = os.getcwd()

    def job(file, name, body, array=None):
        text = "#!/bin/bash\n"
        text += f"#SBATCH --job-name=grin-{sweep.name}-{name}\n"
        if array:
            text += f"#SBATCH --array={array}\n#SBATCH --output={paths.logs}/slurm-%A_%a.out\n" + extra
        else:
            text += f"#SBATCH --output={paths.logs}/slurm-{name}-%j.out\n"
        text += f"set -euo pipefail\ncd {shlex.quote(cwd)}\n{body}\n"
        path = os.path.join(paths.root, file)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
        return path

    pre = job("precompute.slurm", "precompute", shlex.join(base_cmd + ["--prepare"]))
    arr = job("sweep.slurm", "workers", shlex.join(base_cmd + ["--jobs", "1"]), array=f"0-{args.jobs - 1}")
    merge = job("merge.slurm", "merge", shlex.join(base_cmd + ["--merge"]))
    print(f"wrote {pre}\n      {arr} ({args.jobs} array tasks, each an Optuna worker on study `{sweep.name}`)\n      {merge}")
    print("submit with:")
    print(f"  pre=$(sbatch --parsable {shlex.quote(pre)})")
    print(f"  arr=$(sbatch --parsable --dependency=afterok:$pre {shlex.quote(arr)})")
    print(f"  sbatch --dependency=afterany:$arr {shlex.quote(merge)}")
