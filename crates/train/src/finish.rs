//! The end of a run: the last model written, held-out scoring (scenes,
//! test photos, validation photos), the summary and the plots, and the
//! checkpoint removed.

use crate::checkpoint::LoopState;
use crate::eval::{evaluate, EvalReport};
use crate::metrics;
use crate::photo_eval::{evaluate_split, PhotoScoring};
use crate::photo_plots::plot_pr;
use crate::run::RunSpec;
use crate::run_folder::run_paths;
use crate::summary::{mean_ap_loose, summarise, Summary};
use crate::TrainBackend;
use anyhow::{Context, Result};
use grin_features::Split;
use grin_model::{file, Detector};
use grin_terms::summary::SUMMARY_FILE;
use std::path::{Path, PathBuf};

/// The error a run interrupted once its steps were done returns: its model
/// is written, its held-out scoring not begun.
#[derive(Debug, thiserror::Error)]
#[error("interrupted after the last step: the model is written to {}; `grin eval --run {}` scores it", model.display(), run.display())]
pub struct InterruptedScoring {
    pub model: PathBuf,
    pub run: PathBuf,
}

/// What a run whose model could not be written leaves to continue from: a
/// run that wrote no checkpoint cannot be resumed, and its message said
/// nothing of it (issue 90, round 18: a full disk at the last write).
fn left_to_resume(ckpt_path: &Path, cfg: &crate::config::TrainConfig) -> String {
    if ckpt_path.exists() {
        format!("{} is kept: free space, then add --resume", ckpt_path.display())
    } else {
        let every = cfg.checkpoint_every;
        format!("no checkpoint was written (train.checkpoint_every {every}): the run cannot be resumed")
    }
}

/// Writes `inference` (the last step's weights, or their average under
/// `train.ema`) to `model_path`, scores it,
/// and writes `summary.json` and `training.svg`.
pub(crate) fn finish<B: TrainBackend>(
    run: &RunSpec,
    state: &LoopState,
    inference: &Detector<B::InnerBackend>,
    model_path: &Path,
    loaders: usize,
    stopped_early: bool,
    device: &B::Device,
) -> Result<Summary> {
    let cfg = &run.train;
    let spec = run.detector_spec();
    let (ckpt_path, _, _) = run_paths(&run.run_dir);
    let run_spec = run.run_spec();
    file::save_model(model_path, &run_spec, inference).with_context(|| {
        format!("{}: cannot write the trained model; {}", model_path.display(), left_to_resume(&ckpt_path, cfg))
    })?;
    // The model holds every step: the checkpoint would only make a rerun of
    // this config refuse to start, whether the scoring ends or is stopped.
    std::fs::remove_file(&ckpt_path)
        .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
        .with_context(|| format!("{}: cannot remove the finished run's checkpoint", ckpt_path.display()))?;
    if run.stop.as_ref().is_some_and(|stop| stop.enter_scoring()) {
        let run = run.run_dir.clone();
        return Err(InterruptedScoring { model: model_path.to_path_buf(), run }.into());
    }

    let report: Option<EvalReport> = if run.evaluate && cfg.eval_samples > 0 {
        Some(evaluate(inference, &spec, &run.features, cfg.eval_samples, device)?)
    } else {
        None
    };
    // Each split's photos letterboxed to the run size, as the run is deployed.
    let scoring = |split, limit| PhotoScoring { split, limit, min_face: cfg.eval_min_face, own_size: None };
    let photos = if run.evaluate && cfg.eval_photos > 0 {
        evaluate_split(inference, &run_spec, &run.features, scoring(Split::Test, cfg.eval_photos), device)?
    } else {
        vec![]
    };
    let val_photos = if run.evaluate && cfg.val_photos > 0 {
        evaluate_split(inference, &run_spec, &run.features, scoring(Split::Val, cfg.val_photos), device)?
    } else {
        vec![]
    };
    if let Some(svg) = plot_pr(&photos)? {
        grin_output::write_file(&run.run_dir.join("pr_curve.svg"), &[], svg.as_bytes())?;
    }
    let mut summary = summarise(run, state, report, loaders);
    summary.stopped_early = stopped_early;
    summary.photos = photos;
    summary.val_photo_ap = mean_ap_loose(&val_photos);
    summary.val_photos = val_photos;
    summary.write(&run.run_dir.join(SUMMARY_FILE))?;
    metrics::plot(&run.run_dir.join("training.svg"), &state.history)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_model_that_cannot_be_written_says_what_is_left_to_resume() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("checkpoint.ckpt");
        let cfg = crate::config::TrainConfig { checkpoint_every: 1000, ..Default::default() };
        assert!(
            super::left_to_resume(&ckpt, &cfg).ends_with("(train.checkpoint_every 1000): the run cannot be resumed")
        );
        std::fs::write(&ckpt, b"").unwrap();
        assert!(super::left_to_resume(&ckpt, &cfg).ends_with("checkpoint.ckpt is kept: free space, then add --resume"));
    }
}
