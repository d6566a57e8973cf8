//! A finished run's figures gathered from its loop state and written as
//! `summary.json`.

use crate::best::Best;
use crate::checkpoint::LoopState;
use crate::eval::EvalReport;
use crate::metrics::MetricRow;
use crate::photo_eval::PhotoReport;
use crate::run::RunSpec;
use anyhow::Result;
use grin_terms::median;
use grin_terms::summary::RunFigures;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// `summary.json`: what sweeps, the simulator and people read after a run:
/// the run's figures (one schema, [`RunFigures`], with its one reader in
/// grin-terms) and beside them the scores and the balance prediction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    #[serde(flatten)]
    pub run: RunFigures,
    /// Scores on held-out real photos, one entry per real source.
    #[serde(default)]
    pub photos: Vec<PhotoReport>,
    /// Scores on the validation photos (`train.val_photos`), one entry per real source.
    #[serde(default)]
    pub val_photos: Vec<PhotoReport>,
    /// Mean face AP@0.3 over `val_photos`' sources: what a sweep chooses on.
    #[serde(default)]
    pub val_photo_ap: Option<f32>,
    /// The balance check's figures and predicted device-busy share, to set
    /// beside the measured `gpu_busy_pct` (none with `--no-balance`).
    #[serde(default)]
    pub balance: Option<crate::balance::Prediction>,
    /// The step whose weights `best.grin` holds, chosen on the validation
    /// scores (`train.eval_every`); none without them.
    #[serde(default)]
    pub best: Option<Best>,
    /// Whether `train.patience` ended the run before `train.steps` (then
    /// `steps` is where it stopped).
    #[serde(default)]
    pub stopped_early: bool,
}

impl Summary {
    pub(crate) fn write(&self, path: &Path) -> Result<()> {
        grin_output::write_file(path, &[], serde_json::to_string_pretty(self)?.as_bytes())?;
        Ok(())
    }
}

pub(crate) fn summarise(run: &RunSpec, state: &LoopState, report: Option<EvalReport>, loaders: usize) -> Summary {
    let h = &state.history;
    // The first interval holds warm-up (allocation, autotune): leave it out
    // of the rates when there is anything else.
    let steady: Vec<&MetricRow> = if h.len() > 1 { h[1..].iter().collect() } else { h.iter().collect() };
    let step_ms: Vec<f64> = steady.iter().map(|r| r.compute_ms).collect();
    let produce: Vec<f64> = steady.iter().map(|r| r.produce_ms).collect();
    // Medians over the log intervals: one slow interval (a checkpoint, a
    // page fault storm) does not move the figures.
    let middle = |f: &dyn Fn(&MetricRow) -> f64| median(&steady.iter().map(|r| f(r)).collect::<Vec<f64>>());
    let samples_per_s = middle(&|r| r.samples_per_s);
    let load = median(&produce);
    let jitter = {
        let m = produce.iter().sum::<f64>() / produce.len().max(1) as f64;
        (produce.iter().map(|p| (p - m).powi(2)).sum::<f64>() / produce.len().max(1) as f64).sqrt()
    };
    let figures = RunFigures {
        name: run.name.clone(),
        mode: run.mode,
        backend: run.backend,
        steps: state.step,
        batch_size: run.train.batch_size,
        face_ap: report.and_then(|r| r.face_ap),
        smile_accuracy: report.and_then(|r| r.smile_accuracy),
        steps_per_s: samples_per_s / run.train.batch_size as f64,
        samples_per_s,
        gpu_busy_pct: middle(&|r| r.gpu_busy_pct),
        wall_s: state.wall_s,
        final_loss: h.last().map(|r| r.loss).unwrap_or(f32::NAN),
        produce_ms_per_batch: load,
        load_ms_per_batch: load * loaders.max(1) as f64,
        load_jitter_ms: jitter * loaders.max(1) as f64,
        loaders,
        step_ms: median(&step_ms),
        wait_ms_per_step: middle(&|r| r.wait_ms),
    };
    Summary {
        run: figures,
        photos: vec![],
        val_photos: vec![],
        val_photo_ap: None,
        balance: run.balance,
        best: state.watch.best,
        stopped_early: false,
    }
}

/// Mean AP@0.3 over the sources that have one.
pub(crate) fn mean_ap_loose(reports: &[PhotoReport]) -> Option<f32> {
    let aps: Vec<f32> = reports.iter().filter_map(|r| r.face_ap_loose).collect();
    (!aps.is_empty()).then(|| aps.iter().sum::<f32>() / aps.len() as f32)
}
