//! The run's types: what a run needs besides the backend.

use crate::backend::BackendChoice;
use crate::config::{GrinConfig, Mode, TrainConfig};
use anyhow::Result;
use grin_features::FeatureConfig;
use grin_net::{DetectorSpec, ModelConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Everything a run needs besides the backend.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub name: String,
    pub run_dir: PathBuf,
    pub features: FeatureConfig,
    pub model: ModelConfig,
    pub train: TrainConfig,
    /// The mode actually used (never `Auto`).
    pub mode: Mode,
    pub backend: BackendChoice,
    pub resume: bool,
    /// Start afresh even when `run_dir` holds an interrupted run's checkpoint.
    pub overwrite: bool,
    /// The resolved config as TOML, saved as `config.toml`.
    pub config_toml: String,
    pub show_progress: bool,
    /// Skip the held-out evaluation (benchmarks).
    pub evaluate: bool,
    /// Raised (by `grin train`'s Ctrl-C / SIGTERM handler) to stop at the
    /// next step boundary: the loop writes a checkpoint there and returns
    /// [`Interrupted`], so an interrupt loses no steps.
    pub stop: Option<Arc<Interrupt>>,
    /// What the balance check predicted for this run, when it ran.
    pub balance: Option<crate::balance::Prediction>,
    /// The run folder's lock, taken by the plan before anything slow; the
    /// trainer takes it itself when none was taken.
    pub lock: Option<Arc<crate::run_folder::RunLock>>,
}

/// An interrupt asked for, and whether the training loop is there to
/// answer it. Before the loop (loading photos, building the feed) there is
/// nothing to checkpoint and nobody to look at the flag: a run stuck
/// reading a FIFO in a data folder swallowed the first SIGTERM (issue 80).
#[derive(Debug, Default)]
pub struct Interrupt {
    requested: AtomicBool,
    in_loop: AtomicBool,
}

impl Interrupt {
    /// Asks the loop to stop at its next step boundary. False when the loop
    /// has not started: the caller should then end the process at once.
    pub fn request(&self) -> bool {
        self.requested.store(true, Ordering::SeqCst);
        self.in_loop.load(Ordering::SeqCst)
    }

    pub(crate) fn requested(&self) -> bool {
        self.requested.load(Ordering::Relaxed)
    }

    /// The loop is running: from here an interrupt ends in a checkpoint.
    pub(crate) fn enter_loop(&self) {
        self.in_loop.store(true, Ordering::SeqCst);
    }
}

impl RunSpec {
    /// A fresh run of `config` in `mode` (resolved, never `Auto`), written
    /// to `run_dir`: no resume, progress shown, scored at the end.
    pub fn new(config: &GrinConfig, mode: Mode, backend: BackendChoice, run_dir: PathBuf) -> Result<RunSpec> {
        Ok(RunSpec {
            name: config.name.clone(),
            run_dir,
            features: config.features.clone(),
            model: config.model.clone(),
            train: config.train.clone(),
            mode,
            backend,
            resume: false,
            overwrite: false,
            config_toml: toml::to_string(config)?,
            show_progress: true,
            evaluate: true,
            stop: None,
            balance: None,
            lock: None,
        })
    }

    /// The detector as it trains: at the features' size.
    pub fn detector_spec(&self) -> DetectorSpec {
        crate::config::detector_spec(&self.model, &self.features)
    }

    /// The detector as it ships: at `train.run_size` when set.
    pub(crate) fn run_spec(&self) -> DetectorSpec {
        let spec = self.detector_spec();
        match self.train.run_size {
            Some([width, height]) => DetectorSpec { width: width as usize, height: height as usize, ..spec },
            None => spec,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Interrupt;

    #[test]
    fn an_interrupt_before_the_loop_says_nobody_will_answer_it() {
        let stop = Interrupt::default();
        assert!(!stop.request(), "no loop yet: the handler must quit at once");
        stop.enter_loop();
        assert!(stop.request() && stop.requested(), "the loop checkpoints and stops");
    }
}
