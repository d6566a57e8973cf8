//! Validation during training (`train.eval_every`): face AP on held-out
//! scenes of the validation split, added to the metric row of the log
//! interval that reaches each multiple of `eval_every`. `metrics.csv` is
//! rewritten at every interval, so a sweep reads these figures while the run
//! goes on and stops a hopeless trial early.
//!
//! Scenes rather than held-out photos: every source makes scenes (synthetic,
//! crops, photos), at the training size, so one score costs `eval_samples`
//! scene generations and forward passes at the size the step already runs;
//! held-out photos exist only for real photo sources, and each is decoded
//! and letterboxed to the run size every time. The validation split, not
//! the test split of the final figures, so pruning never looks at the
//! scenes a run is finally scored on.

use crate::eval::{evaluate_split_until, EvalReport};
use crate::run::RunSpec;
use crate::TrainBackend;
use anyhow::{Context, Result};
use grin_features::Split;
use grin_model::Detector;

/// Face AP and smile accuracy on the validation scenes when the interval
/// `(since, step]` holds a multiple of `train.eval_every`, else `None`.
pub(crate) fn score_if_due<B: TrainBackend>(
    run: &RunSpec,
    since: usize,
    step: usize,
    model: &Detector<B::InnerBackend>,
    device: &B::Device,
) -> Result<Option<EvalReport>> {
    let every = run.train.eval_every;
    if every == 0 || !run.evaluate || step / every == since / every {
        return Ok(None);
    }
    // An interrupt stops the scoring between two batches: the loop then
    // checkpoints this step and stops, its row without a validation score.
    let stop = || run.stop.as_ref().is_some_and(|stop| stop.requested());
    let spec = run.detector_spec();
    let report = evaluate_split_until(model, &spec, &run.features, Split::Val, run.train.eval_samples, device, &stop)
        .with_context(|| format!("validation at step {step} (train.eval_every)"))?;
    Ok(report)
}
