//! The run's types: what a run needs besides the backend.

use crate::backend::BackendChoice;
use crate::config::{GrinConfig, Mode, TrainConfig};
use anyhow::Result;
use grin_features::FeatureConfig;
use grin_net::{DetectorSpec, ModelConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
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
    /// What a run trains from, as a checkpoint records it: a precomputed or
    /// in-VRAM run's dataset (its sample count and fingerprint), an on-the-
    /// fly run's source files (their identity). None when no plan ran.
    pub data: Option<String>,
    /// The run folder's lock, taken by the plan before anything slow; the
    /// trainer takes it itself when none was taken.
    pub lock: Option<Arc<crate::run_folder::RunLock>>,
}

/// An interrupt asked for, and where the run is to answer it. Before the
/// loop (loading photos, building the feed) there is nothing to checkpoint
/// and nobody to look at the flag: a run stuck reading a FIFO in a data
/// folder swallowed the first SIGTERM (issue 80). After it, the model is
/// written and only scored: nobody looks at the flag either, and a SIGTERM
/// there was answered "stopping after this step" and then ignored for the
/// scoring's 47 s (issue 90, round 11).
#[derive(Debug, Default)]
pub struct Interrupt {
    /// The [`Phase`] in the low bits, [`REQUESTED`] above them: one word,
    /// so a request and a change of phase cannot cross unseen.
    state: AtomicU8,
}

/// Where a run is when an interrupt comes, and so what the interrupt does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Loading and building the feed: nothing to checkpoint, quit at once.
    Before,
    /// The steps: the loop checkpoints at its next step boundary and stops.
    Loop,
    /// The model is written and being scored: quit at once; the model stays.
    Scoring,
}

const PHASE: u8 = 0b11;
const REQUESTED: u8 = 0b100;

impl Interrupt {
    /// Raises the flag, and says where the run was: only in
    /// [`Phase::Loop`] does the run answer it itself.
    pub fn request(&self) -> Phase {
        match self.state.fetch_or(REQUESTED, Ordering::SeqCst) & PHASE {
            1 => Phase::Loop,
            2 => Phase::Scoring,
            _ => Phase::Before,
        }
    }

    pub(crate) fn requested(&self) -> bool {
        self.state.load(Ordering::SeqCst) & REQUESTED != 0
    }

    /// The loop is running: from here an interrupt ends in a checkpoint.
    pub(crate) fn enter_loop(&self) {
        self.enter(Phase::Loop);
    }

    /// The model is written: from here an interrupt quits at once. True
    /// when one came before, which the loop did not answer (it came during
    /// the last step): the caller stops now.
    pub(crate) fn enter_scoring(&self) -> bool {
        self.enter(Phase::Scoring)
    }

    /// Moves to `phase`; whether an interrupt was asked for before.
    fn enter(&self, phase: Phase) -> bool {
        let bits = match phase {
            Phase::Before => 0,
            Phase::Loop => 1,
            Phase::Scoring => 2,
        };
        let before = self.state.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| Some((s & REQUESTED) | bits));
        before.unwrap_or_default() & REQUESTED != 0
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
            data: None,
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
    use super::{Interrupt, Phase};

    #[test]
    fn an_interrupt_outside_the_loop_says_nobody_will_answer_it() {
        let stop = Interrupt::default();
        assert_eq!(stop.request(), Phase::Before, "no loop yet: the handler must quit at once");
        let stop = Interrupt::default();
        stop.enter_loop();
        assert!(!stop.requested());
        assert_eq!(stop.request(), Phase::Loop, "the loop checkpoints and stops");
        assert!(stop.requested());
        // One asked for during the last step, which the loop does not
        // answer: the model is written, and scoring does not start.
        assert!(stop.enter_scoring());
        let stop = Interrupt::default();
        stop.enter_loop();
        assert!(!stop.enter_scoring());
        assert_eq!(stop.request(), Phase::Scoring, "the model is written: the handler quits at once");
    }
}
