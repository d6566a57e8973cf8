//! What a run folder may already hold when a run starts there, and what
//! the user must say about it: an interrupted run's checkpoint (`--resume`
//! continues it, `--overwrite` starts again) or a finished run's results
//! (only `--overwrite` replaces them). A finished run is hours of work, so
//! reusing its name is refused rather than replacing it silently; a sweep
//! removes a trial's folder itself before it reruns a trial it did not
//! record as finished.

use crate::checkpoint;
use anyhow::{bail, Context, Result};
use grin_output::{try_lock, LockMode, Locked, LOCK_FILE};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A run folder held for a run's life: a second run into it, `--overwrite`
/// included, is refused while this lives. The OS's advisory lock on
/// `grin.lock` (`grin_output::try_lock`, as datasets take theirs), so a killed run leaves no stale
/// lock; the file holds the holder's PID for the refusal to name.
#[derive(Debug)]
pub struct RunLock {
    _file: Option<File>,
}

/// The lock a run already holds (taken by the plan), or `run_dir`'s taken now.
pub(crate) fn held(run_dir: &Path, lock: Option<&Arc<RunLock>>) -> Result<Arc<RunLock>> {
    match lock {
        Some(lock) => Ok(lock.clone()),
        None => Ok(Arc::new(self::lock(run_dir)?)),
    }
}

/// Creates `run_dir` when missing and locks it, or names the process that
/// holds it. A filesystem without locks (some network mounts) is used
/// without one rather than refused.
pub(crate) fn lock(run_dir: &Path) -> Result<RunLock> {
    lock_or(run_dir, TO_TRAIN)
}

/// What a run to start is told of a folder in use.
const TO_TRAIN: &str = "wait for it to end, or give this run another name (--name)";

/// [`lock`], with `advice` for the refusal of a folder in use.
fn lock_or(run_dir: &Path, advice: &str) -> Result<RunLock> {
    std::fs::create_dir_all(run_dir).with_context(|| format!("{}: cannot create run folder", run_dir.display()))?;
    let path = run_dir.join(LOCK_FILE);
    let locked = try_lock(&path, LockMode::Exclusive)
        .with_context(|| format!("{}: cannot lock the run folder", path.display()))?;
    let mut file = match locked {
        Locked::Held(file) => file,
        Locked::Busy(file) => return Err(in_use(run_dir, file, advice)),
        Locked::Unsupported(_) => return Ok(RunLock { _file: None }),
    };
    let written = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{}", std::process::id()));
    written.with_context(|| format!("{}: cannot write the holder's PID", path.display()))?;
    Ok(RunLock { _file: Some(file) })
}

/// The refusal of a run folder another process holds, naming its PID.
fn in_use(run_dir: &Path, mut lock_file: File, advice: &str) -> anyhow::Error {
    let mut pid = String::new();
    let _ = lock_file.read_to_string(&mut pid);
    let holder = match pid.trim() {
        "" => "another grin process".to_string(),
        pid => format!("grin process {pid}"),
    };
    anyhow::anyhow!(
        "{}: in use by {holder} (a run training into it, or a command rewriting its model); {advice}",
        run_dir.display()
    )
}

/// The folder of the run whose model `model` is (through any link), held
/// while a command rewrites that model in place (`calibrate`, `model-set`):
/// a live run writes its models over the rewrite (round 14 of issue 90).
/// `None` for a model of no run's, or of a folder no run ever locked (no
/// run can be live there; one started meanwhile replaces the model, which
/// the rewrite's own hold, `grin_output::hold`, then refuses to write over).
pub fn hold_run_of_model(model: &Path) -> Result<Option<RunLock>> {
    let real = std::fs::canonicalize(model).unwrap_or_else(|_| model.to_path_buf());
    let Some(run_dir) = run_of_model(&real).filter(|dir| dir.join(LOCK_FILE).symlink_metadata().is_ok()) else {
        return Ok(None);
    };
    lock_or(run_dir, "wait for it to end, then change its model").map(Some)
}

/// Refuses a run folder a live run holds, before what its files say: a
/// second run into it was told to add --overwrite, or that it held no
/// checkpoint to resume (round 11). Probed without keeping the lock, by a
/// process that does not hold it.
pub(crate) fn refuse_a_held_folder(run_dir: &Path) -> Result<()> {
    let path = run_dir.join(LOCK_FILE);
    if path.symlink_metadata().is_err() {
        return Ok(());
    }
    let locked = try_lock(&path, LockMode::Exclusive)
        .with_context(|| format!("{}: cannot lock the run folder", path.display()))?;
    match locked {
        Locked::Busy(file) => Err(in_use(run_dir, file, TO_TRAIN)),
        Locked::Held(_) | Locked::Unsupported(_) => Ok(()),
    }
}

/// What a finished run leaves besides its `config.toml`: `--overwrite`
/// removes them all before a new run starts, so a half-done replacement
/// never sits beside the old model and figures.
const RESULTS: [&str; 7] = [
    "model.grin",
    crate::best::BEST_MODEL,
    grin_terms::summary::SUMMARY_FILE,
    "metrics.csv",
    grin_events::FILE_NAME,
    "training.svg",
    "pr_curve.svg",
];

/// Every file a run writes into its folder: its results, its checkpoint,
/// its resolved config and `grin bench modes`' mark. None may be (a link
/// to) one of the run's inputs, nor written there by another command (a
/// mark written by `export --out` let bench modes replace a trained run,
/// round 15 of issue 90).
pub fn run_files() -> impl Iterator<Item = &'static str> {
    RESULTS.into_iter().chain(["checkpoint.ckpt", "config.toml", BENCH_MARK])
}

/// Refuses to start in `run_dir` unless `resume` / `overwrite` says what
/// to do with what is there. Reads only; called before anything slow (a
/// store build, a balance measurement) and again by the trainer.
pub(crate) fn check(run_dir: &Path, resume: bool, overwrite: bool) -> Result<()> {
    // A dataset's folder is no run's, --overwrite or not: a run and a
    // dataset shared one folder without a word (round 11).
    if run_dir.join(grin_store::MANIFEST_FILE).symlink_metadata().is_ok() {
        bail!(
            "{} is a precomputed dataset's folder (it holds {}): give this run another name (--name)",
            run_dir.display(),
            grin_store::MANIFEST_FILE
        );
    }
    let (ckpt_path, model_path, _) = run_paths(run_dir);
    if resume && !ckpt_path.exists() {
        let finished = if model_path.exists() { " (the run finished: model.grin is there)" } else { "" };
        bail!("--resume: {} does not exist{finished}; nothing to resume", ckpt_path.display());
    }
    if resume || overwrite {
        return Ok(());
    }
    if ckpt_path.exists() {
        // A checkpoint that cannot be read cannot be resumed: say so, and
        // leave --resume out of the advice (round 17 offered it).
        match checkpoint::load(&ckpt_path) {
            Ok(c) => bail!(
                "{} holds an interrupted run's checkpoint at step {}: add --resume to continue it, or --overwrite \
                 to start again",
                run_dir.display(),
                c.state.step
            ),
            Err(e) => bail!(
                "{} holds an interrupted run's checkpoint that cannot be resumed ({e:#}): add --overwrite to start \
                 again, or give this run another name (--name)",
                run_dir.display()
            ),
        }
    }
    if let Some(finished) = finished_run(run_dir) {
        bail!(
            "{} holds a finished run ({finished}): give this run another name (--name), or add --overwrite to replace it",
            run_dir.display()
        );
    }
    // A run killed before its first checkpoint leaves its best model: a
    // fresh run beside it would keep it, and `--best` would score it
    // (round 8 of issue 90).
    let best = run_dir.join(crate::best::BEST_MODEL);
    if best.exists() {
        bail!(
            "{} holds an earlier run's {} (it stopped before its first checkpoint): add --overwrite to start \
             again, or give this run another name (--name)",
            run_dir.display(),
            crate::best::BEST_MODEL
        );
    }
    // Files a run writes, in a folder holding no run named above: left by a
    // run killed before its first checkpoint, or the user's own (round 9: a
    // config.toml of the user's was replaced without a word).
    if let Some(name) = run_files().find(|name| run_dir.join(name).symlink_metadata().is_ok()) {
        bail!(
            "{} holds {name}, a file a run writes, but no run grin can resume: add --overwrite to replace it, \
             or give this run another name (--name)",
            run_dir.display()
        );
    }
    Ok(())
}

/// [`check`], then the folder made ready: created, and under `overwrite`
/// emptied of the previous run's results.
pub(crate) fn prepare(run_dir: &Path, resume: bool, overwrite: bool) -> Result<()> {
    check(run_dir, resume, overwrite)?;
    std::fs::create_dir_all(run_dir).with_context(|| format!("{}: cannot create run folder", run_dir.display()))?;
    if overwrite {
        for name in RESULTS {
            let path = run_dir.join(name);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e)
                        .with_context(|| format!("{}: cannot remove the previous run's file", path.display()));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// A description of the finished run in `run_dir` (its steps and held-out
/// figures from `summary.json`), or None when there is none. A `model.grin`
/// without a readable summary still counts: the model is the result.
fn finished_run(run_dir: &Path) -> Option<String> {
    let s = match grin_terms::summary::read(run_dir) {
        Ok(s) => s,
        // Say what is there: a folder holding only a damaged summary has no
        // model.grin to speak of (round 10).
        Err(_) if run_dir.join("model.grin").exists() => return Some("model.grin, no readable summary.json".into()),
        Err(_) if run_dir.join(grin_terms::summary::SUMMARY_FILE).exists() => {
            return Some("a summary.json grin cannot read, no model.grin".into())
        }
        Err(_) => return None,
    };
    let figure = |v: Option<f32>| v.map_or_else(|| "n/a".into(), |v| format!("{v:.3}"));
    Some(format!(
        "summary.json: {} steps, held-out face AP@0.5 {}, smile accuracy {}",
        s.steps,
        figure(s.face_ap),
        figure(s.smile_accuracy)
    ))
}

/// The model file of a finished run: `best.grin` (the step with the best
/// validation score) when `best`, else `model.grin` (the last step).
fn model_path(run_dir: &Path, best: bool) -> PathBuf {
    run_dir.join(if best { crate::best::BEST_MODEL } else { "model.grin" })
}

/// [`model_path`] of a run the user named (`--run`), and the run's
/// `config.toml`: a folder that is missing, or holds no run, is named as
/// such rather than by the first file a command fails to open.
pub fn run_model(run_dir: &Path, best: bool) -> anyhow::Result<(PathBuf, PathBuf)> {
    let shown = run_dir.display();
    if !run_dir.is_dir() {
        anyhow::bail!("{shown}: no such run (a run folder is runs/<name>, or <runs-dir>/<name>)");
    }
    let config = run_dir.join("config.toml");
    refuse_a_non_file(&config)?;
    if !config.is_file() {
        anyhow::bail!("{shown}: not a run folder: it holds no config.toml (grin train writes one)");
    }
    let model = model_path(run_dir, best);
    refuse_a_non_file(&model)?;
    if !model.is_file() {
        // A best model is written when a validation finishes: none ran
        // (`train.eval_every` 0), or each was interrupted (round 17 blamed
        // eval_every alone).
        let why = if best {
            "it is written when a validation finishes: train.eval_every was 0, or none finished"
        } else {
            "the run has not finished"
        };
        anyhow::bail!("{shown}: no {}: {why}", model.file_name().unwrap_or_default().to_string_lossy());
    }
    Ok((model, config))
}

/// The file `grin bench modes` leaves in each run folder it writes: what it
/// may replace without `--overwrite`.
const BENCH_MARK: &str = "bench-modes.txt";

/// A folder `grin bench modes` did not write (a `grin train` run of the
/// same name, finished or interrupted, or anything else) is refused: bench
/// modes replaced it without a word (issue 90, rounds 7 and 8).
pub fn refuse_a_run_not_its_own(run_dir: &Path) -> Result<()> {
    let holds_files = std::fs::read_dir(run_dir).is_ok_and(|mut entries| entries.next().is_some());
    if holds_files && !run_dir.join(BENCH_MARK).exists() {
        let what = if finished_run(run_dir).is_some() { "a finished run" } else { "files" };
        bail!(
            "{}: holds {what} that grin bench modes did not write; it replaces only its own runs: name another \
             --runs-dir",
            run_dir.display()
        );
    }
    Ok(())
}

/// Marks `run_dir` (made when missing) as written by `grin bench modes`,
/// which may replace it: before the run, so that one stopped midway is
/// replaced by the next bench too (round 14 of issue 90 refused it).
pub fn mark_as_its_own(run_dir: &Path) -> Result<()> {
    std::fs::create_dir_all(run_dir).with_context(|| format!("{}: cannot create run folder", run_dir.display()))?;
    std::fs::write(run_dir.join(BENCH_MARK), "written by grin bench modes, which replaces it each time\n")
        .with_context(|| format!("{}: cannot mark the run as grin bench modes'", run_dir.display()))
}

/// The run folder `model` sits in (one that holds a `config.toml`), if any:
/// a command that reads a run's model through `--model` takes the folder as
/// an input as a whole, as `--run` does, so that its output never lands on
/// the run's config or summary (issue 90, round 7).
pub fn run_of_model(model: &Path) -> Option<&Path> {
    let folder = model.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })?;
    folder.join("config.toml").exists().then_some(folder)
}

/// A run's file that is there but is no plain file (a FIFO, a device, a
/// folder, a link to nothing or to itself) is named as such, not as missing
/// (round 8 of issue 90: "the run has not finished" for a FIFO model).
fn refuse_a_non_file(path: &Path) -> anyhow::Result<()> {
    if std::fs::symlink_metadata(path).is_ok() && !path.is_file() {
        anyhow::bail!("{}: not a regular file (a FIFO, device, folder or broken link)", path.display());
    }
    Ok(())
}

/// `checkpoint.ckpt`, `model.grin` and `metrics.csv` of a run folder.
pub(crate) fn run_paths(run_dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (run_dir.join("checkpoint.ckpt"), model_path(run_dir, false), run_dir.join("metrics.csv"))
}

#[cfg(test)]
mod tests;
