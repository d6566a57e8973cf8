//! The training loop: feed, step, and account for every millisecond.
//!
//! Timing rule: the device is synced only at log intervals. Between syncs
//! the host measures how long it waited for data (queue + upload); the rest
//! of the interval's wall time is compute. Device-busy % = compute / wall.

use crate::best::BEST_MODEL;
use crate::checkpoint::LoopState;
use crate::config::TrainConfig;
use crate::ema::Ema;
use crate::feed::{Feed, FeedTiming};
use crate::metrics::{self, Interval, MetricRow};
use crate::progress::Progress;
use crate::run::RunSpec;
use crate::run_folder::run_paths;
use crate::step::Stepper;
use crate::summary::Summary;
use crate::TrainBackend;
use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use burn::tensor::ElementConversion;
use grin_model::{file, Detector};
use std::path::PathBuf;
use std::time::Instant;

/// The error a stopped run returns once its checkpoint is on disk.
#[derive(Debug, thiserror::Error)]
#[error("interrupted at step {step} of {steps}: checkpoint written to {}; add --resume to continue", checkpoint.display())]
pub struct Interrupted {
    pub step: usize,
    pub steps: usize,
    pub checkpoint: PathBuf,
}

fn learning_rate(cfg: &TrainConfig, step: usize) -> f64 {
    let warmup = cfg.warmup_steps.min(cfg.steps / 2);
    if step < warmup {
        return cfg.lr * (step + 1) as f64 / warmup as f64;
    }
    // Cosine decay to 5% of the peak.
    let progress = (step - warmup) as f64 / (cfg.steps - warmup).max(1) as f64;
    cfg.lr * (0.05 + 0.95 * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()))
}

/// Trains from `feed_for(start_step)` and writes everything under `run.run_dir`.
///
/// `feed_for` is a trait object, not a generic: the loop is compiled once per
/// backend, not once per caller's closure (each was a copy of the whole
/// loop in every binary and test that trains).
pub fn train<B: TrainBackend>(
    run: &RunSpec,
    device: &B::Device,
    feed_for: &mut dyn FnMut(usize) -> Result<Feed<B>>,
) -> Result<Summary> {
    train_parallel(run, std::slice::from_ref(device), feed_for)
}

/// Data-parallel over `devices` (the first one holds the master weights and
/// the feed): each device runs forward and backward on its slice of the
/// batch, and the gradients are summed on the first (`parallel.rs`). With
/// one device this is the plain training step.
pub fn train_parallel<B: TrainBackend>(
    run: &RunSpec,
    devices: &[B::Device],
    feed_for: &mut dyn FnMut(usize) -> Result<Feed<B>>,
) -> Result<Summary> {
    let device = devices.first().context("no device to train on")?;
    if run.train.steps == 0 {
        bail!("key `train.steps`: 0 trains nothing, so no model would be written; give at least 1");
    }
    let _lock = crate::run_folder::held(&run.run_dir, run.lock.as_ref())?;
    crate::run_folder::check(&run.run_dir, run.resume, run.overwrite)?;
    let (ckpt_path, model_path, csv_path) = run_paths(&run.run_dir);
    let spec = run.detector_spec();
    let cfg = &run.train;

    let crate::resume::Start { mut model, mut optim, mut state, mut ema } =
        crate::resume::start::<B>(run, &spec, device, &ckpt_path)?;
    // Once the weights to start from have loaded: only now may --overwrite clear the old results.
    crate::run_folder::prepare(&run.run_dir, run.resume, run.overwrite)?;
    grin_output::write_file(&run.run_dir.join("config.toml"), &[], run.config_toml.as_bytes())?;

    if ema.is_some() {
        eprintln!("{}: scoring, keeping and writing the weights' moving average (train.ema = {})", run.name, cfg.ema);
    }
    let mut stepper = Stepper::<B>::new(&spec, cfg.loss, devices);
    let mut feed = feed_for(state.step)?;

    let label = format!("{} {}", run.name, run.mode.name());
    let mut progress = if run.show_progress { Progress::new(cfg.steps, label) } else { Progress::hidden(label) };
    progress.set_position(state.step);

    let mut interval = Interval::new();
    let run_started = Instant::now();
    let wall_before = state.wall_s;
    let predicted_busy = run.balance.map(|b| b.predicted_busy_pct);
    let mut finished = cfg.steps;

    run.stop.iter().for_each(|stop| stop.enter_loop());
    for step in state.step..cfg.steps {
        let (batch, timing): (_, FeedTiming) = feed.next(step)?;
        interval.add(&timing);

        let (next, parts) = stepper.step(model, &mut optim, learning_rate(cfg, step), batch, None)?;
        model = next;
        if let Some(ema) = &mut ema {
            ema.update(model.valid());
        }

        let done = step + 1;
        if done % cfg.log_every == 0 || done == cfg.steps {
            // The only sync of the interval: reading the loss waits for the device.
            B::sync(device).map_err(|e| anyhow::anyhow!("device sync failed: {e:?}"))?;
            let scalar = |t: &burn::tensor::Tensor<B, 1>| t.clone().into_scalar().elem::<f32>();
            let losses = [scalar(&parts.total), scalar(&parts.face), scalar(&parts.boxes), scalar(&parts.smile)];
            let mut row = interval.close(done, losses, learning_rate(cfg, step), cfg.batch_size);
            if !row.loss.is_finite() {
                bail!("loss became {} at step {done}; lower train.lr", row.loss);
            }
            // After the interval's timing is taken, so scoring is not counted as compute.
            let stop_early = validate::<B>(run, &mut state, &mut row, &scored(&model, &ema), device)?;
            progress.bar().set_message(format!(
                "loss {:.3} | {:.0} samples/s | device busy {:.0}%",
                row.loss, row.samples_per_s, row.gpu_busy_pct
            ));
            state.history.push(row);
            metrics::write_csv(&csv_path, &state.history)?;
            metrics::write_events(&run.run_dir, &state.history, predicted_busy)?;
            free_autodiff_graphs::<B>(device);
            // Scoring and writing the files are not part of the next interval.
            interval = Interval::new();
            if stop_early {
                finished = done;
                break;
            }
        }
        progress.set_position(done);

        // The last step needs neither: the model is written next.
        let mid_run = done < cfg.steps;
        let stopping = mid_run && run.stop.as_ref().is_some_and(|stop| stop.requested());
        let checkpoint_due = mid_run && cfg.checkpoint_every > 0 && done % cfg.checkpoint_every == 0;
        if checkpoint_due || stopping {
            state.step = done;
            state.wall_s = wall_before + run_started.elapsed().as_secs_f64();
            crate::resume::save(&ckpt_path, &state, &spec, &model, &optim, ema.as_ref())?;
        }
        if stopping {
            progress.finish();
            return Err(Interrupted { step: done, steps: cfg.steps, checkpoint: ckpt_path }.into());
        }
    }
    let loaders = feed.loaders();
    drop(feed);
    progress.finish();
    state.step = finished;
    state.wall_s = wall_before + run_started.elapsed().as_secs_f64();

    let last = scored(&model, &ema);
    crate::finish::finish::<B>(run, &state, &last, &model_path, loaders, finished < cfg.steps, device)
}

/// The weights a run scores, keeps and writes: the average when
/// `train.ema` is on, else the last step's.
fn scored<B: TrainBackend>(model: &Detector<B>, ema: &Option<Ema<B::InnerBackend>>) -> Detector<B::InnerBackend> {
    ema.as_ref().map_or_else(|| model.valid(), |e| e.model().clone())
}

/// Scores the validation scenes into `row` when `train.eval_every` is due,
/// and keeps the best; returns whether `train.patience` ends the run.
fn validate<B: TrainBackend>(
    run: &RunSpec,
    state: &mut LoopState,
    row: &mut MetricRow,
    model: &Detector<B::InnerBackend>,
    device: &B::Device,
) -> Result<bool> {
    let since = state.history.last().map_or(0, |r| r.step);
    let Some(val) = crate::validation::score_if_due::<B>(run, since, row.step, model, device)? else {
        return Ok(false);
    };
    (row.val_face_ap, row.val_smile_accuracy) = (val.face_ap, val.smile_accuracy);
    match val.face_ap {
        Some(ap) => keep_best::<B>(run, state, row.step, ap, model),
        None => Ok(false),
    }
}

/// Records the validation score at `step`: a new best writes `best.grin`
/// (the weights [`scored`] gives, before the next step changes them).
/// Returns whether `train.patience` is exhausted, and says so.
fn keep_best<B: TrainBackend>(
    run: &RunSpec,
    state: &mut LoopState,
    step: usize,
    val_face_ap: f32,
    model: &Detector<B::InnerBackend>,
) -> Result<bool> {
    let verdict = state.watch.observe(step, val_face_ap, run.train.patience);
    if verdict.improved {
        let path = run.run_dir.join(BEST_MODEL);
        file::save_model(&path, &run.run_spec(), model).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    if verdict.exhausted {
        let best = state.watch.best.expect("a score was recorded");
        eprintln!(
            "{}: no better validation face AP in {} scores (train.patience); stopping at step {step}, \
             best.grin holds step {} (AP {:.4})",
            run.name, run.train.patience, best.step, best.val_face_ap
        );
    }
    Ok(verdict.exhausted)
}

/// Frees what Burn's autodiff kept of the steps since the last log line.
/// Both of grin's steps take their gradients without Burn's backward pass,
/// yet each step's new parameters are registered as tracked tensors, and
/// Burn frees the graphs of dropped tensors only at the end of a backward
/// pass: without one, a run grew about 0.14 MB a step (issue 80). One
/// backward of a single value lets it collect them; out of the step, so
/// `grin bench step` and the launch budget do not count it.
fn free_autodiff_graphs<B: TrainBackend>(device: &B::Device) {
    let _ = burn::tensor::Tensor::<B, 1>::zeros([1], device).require_grad().sum().backward();
}
