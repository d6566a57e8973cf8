//! `summary.json`'s figures: what a finished run measured, written once by
//! the trainer (inside its `Summary`, beside the scores) and read back
//! through [`read`] by `grin simulate --from-run`, `grin bench modes` and
//! the run-folder check. `scripts/sweep` reads the same keys.

use crate::mode::{BackendChoice, Mode};
use serde::{Deserialize, Deserializer, Serialize};
use std::path::{Path, PathBuf};

/// The file a run folder keeps its figures in.
pub const SUMMARY_FILE: &str = "summary.json";

/// A finished run's throughput and held-out figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    pub name: String,
    pub mode: Mode,
    pub backend: BackendChoice,
    pub steps: usize,
    pub batch_size: usize,
    pub face_ap: Option<f32>,
    pub smile_accuracy: Option<f32>,
    pub steps_per_s: f64,
    pub samples_per_s: f64,
    pub gpu_busy_pct: f64,
    pub wall_s: f64,
    /// NaN (written as null) when the run logged no step.
    #[serde(deserialize_with = "null_as_nan")]
    pub final_loss: f32,
    /// Median wall time to produce one batch, all loaders together (host
    /// modes), or to cut one (in VRAM).
    #[serde(default)]
    pub produce_ms_per_batch: f64,
    /// One loader's time per batch: `produce_ms_per_batch * loaders`, since
    /// the loaders split each batch between them. What `grin simulate
    /// --from-run` models as N loaders each making whole batches. In VRAM
    /// (no loaders) the cut time.
    pub load_ms_per_batch: f64,
    pub load_jitter_ms: f64,
    /// Loaders that made batches side by side: the feature workers
    /// on-the-fly, the store's loader thread precomputed, 0 in VRAM (the
    /// batch is cut on the training thread).
    pub loaders: usize,
    /// Median compute time of one step.
    pub step_ms: f64,
    /// Time per step the training thread waited on data (median over log intervals).
    #[serde(default)]
    pub wait_ms_per_step: f64,
}

impl RunFigures {
    /// A plausible host-mode run with four loaders: the figures tests of
    /// the readers write and read back.
    pub fn example(mode: Mode) -> RunFigures {
        RunFigures {
            name: "example".into(),
            mode,
            backend: BackendChoice::Cpu,
            steps: 100,
            batch_size: 16,
            face_ap: Some(0.5),
            smile_accuracy: None,
            steps_per_s: 10.0,
            samples_per_s: 160.0,
            gpu_busy_pct: 88.0,
            wall_s: 10.0,
            final_loss: 1.0,
            produce_ms_per_batch: 10.125,
            load_ms_per_batch: 40.5,
            load_jitter_ms: 3.0,
            loaders: 4,
            step_ms: 12.0,
            wait_ms_per_step: 0.5,
        }
    }
}

fn null_as_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
    Ok(Option::<f32>::deserialize(d)?.unwrap_or(f32::NAN))
}

/// Why a run's summary could not be read: the file and what was wrong,
/// serde's message naming the key.
#[derive(Debug)]
pub struct SummaryError {
    pub path: PathBuf,
    pub message: String,
}

impl std::fmt::Display for SummaryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for SummaryError {}

/// The figures in `run_dir`'s `summary.json`. Keys beyond [`RunFigures`]'
/// (the scores on photos, the balance prediction, ...) are left alone.
pub fn read(run_dir: &Path) -> Result<RunFigures, SummaryError> {
    let path = run_dir.join(SUMMARY_FILE);
    let error = |message: String| SummaryError { path: path.clone(), message };
    if path.symlink_metadata().is_err() && run_dir.is_dir() {
        // Written last: "No such file or directory" left the reason out.
        return Err(error("missing: the run has not finished (grin train writes it at the end)".into()));
    }
    let bytes =
        grin_output::read_plain(&path, u64::MAX).map_err(|e| error(format!("cannot read the run's summary: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| error(format!("not a run summary: {e}")))
}

#[cfg(test)]
mod tests;
