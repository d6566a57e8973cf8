//! The training loop: feed, step, and account for every millisecond.
//!
//! Timing rule: the device is synced only at log intervals. Between syncs
//! the host measures how long it waited for data (queue + upload); the rest
//! of the interval's wall time is compute. Device-busy % = compute / wall.

use crate::best::{Best, BEST_MODEL};
use crate::checkpoint::{self, Checkpoint, LoopState};
use crate::config::{Mode, TrainConfig};
use crate::eval::{evaluate, EvalReport};
use crate::feed::{Feed, FeedTiming};
use crate::metrics::{self, MetricRow};
use crate::photo_eval::{evaluate_photos, evaluate_split, PhotoReport};
use crate::photo_plots::plot_pr;
use crate::progress::Progress;
use crate::run::RunSpec;
use crate::run_folder::run_paths;
use crate::step::{self, Stepper};
use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::ElementConversion;
use grin_features::Split;
use grin_model::{file, Detector, TrainBackend};
use grin_terms::median;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The error a stopped run returns once its checkpoint is on disk.
#[derive(Debug, thiserror::Error)]
#[error("interrupted at step {step} of {steps}: checkpoint written to {}; add --resume to continue", checkpoint.display())]
pub struct Interrupted {
    pub step: usize,
    pub steps: usize,
    pub checkpoint: PathBuf,
}

/// `summary.json`: what sweeps, the simulator and people read after a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub name: String,
    pub mode: Mode,
    pub backend: String,
    pub steps: usize,
    pub batch_size: usize,
    pub face_ap: Option<f32>,
    pub smile_accuracy: Option<f32>,
    pub steps_per_s: f64,
    pub samples_per_s: f64,
    pub gpu_busy_pct: f64,
    pub wall_s: f64,
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
pub fn train<B: TrainBackend>(
    run: &RunSpec,
    device: &B::Device,
    feed_for: impl FnOnce(usize) -> Result<Feed<B>>,
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
    feed_for: impl FnOnce(usize) -> Result<Feed<B>>,
) -> Result<Summary> {
    let device = devices.first().context("no device to train on")?;
    if run.train.steps == 0 {
        bail!("key `train.steps`: 0 trains nothing, so no model would be written; give at least 1");
    }
    crate::run_folder::check(&run.run_dir, run.resume, run.overwrite)?;
    let (ckpt_path, model_path, csv_path) = run_paths(&run.run_dir);
    let config_json = serde_json::to_string(&(&run.features, &run.model, &run.train))?;
    let spec = run.detector_spec();
    let cfg = &run.train;

    B::seed(device, run.features.seed);
    let mut model: Detector<B> = spec.init(device);
    let mut optim = step::optimizer::<B>(cfg);
    let mut state = LoopState {
        step: 0,
        config_json: config_json.clone(),
        history: vec![],
        wall_s: 0.0,
        watch: Default::default(),
    };

    if let (Some(init), false) = (&cfg.init, run.resume) {
        let (init_spec, loaded) =
            file::load_model::<B>(init, device).map_err(|e| anyhow::anyhow!("key `train.init`: {e}"))?;
        if init_spec.channels != spec.channels || init_spec.widths() != spec.widths() {
            bail!(
                "key `train.init`: {} has {} channel(s) and widths {:?}; this run's model has {} and {:?}",
                init.display(),
                init_spec.channels,
                init_spec.widths(),
                spec.channels,
                spec.widths()
            );
        }
        model = match (init_spec.model.top_down, spec.model.top_down) {
            (false, true) => {
                eprintln!("{}: adding top-down fusion (starting as a no-op) to {}", run.name, init.display());
                loaded.with_top_down(device)
            }
            (true, false) => bail!(
                "key `train.init`: {} has top-down fusion; this run's model has none (set model.top_down = true)",
                init.display()
            ),
            _ => loaded,
        };
        eprintln!("{}: starting from the weights of {}", run.name, init.display());
    }
    if run.resume {
        let ck = checkpoint::load(&ckpt_path)?;
        if ck.state.config_json != config_json {
            bail!("{}: checkpoint was written with a different config; start a new run name", ckpt_path.display());
        }
        let (_, loaded) =
            file::from_bytes::<B>(&ck.model, device).map_err(|e| anyhow::anyhow!("{}: {e}", ckpt_path.display()))?;
        model = loaded;
        let record = BinBytesRecorder::<FullPrecisionSettings>::default()
            .load(ck.optimizer, device)
            .with_context(|| format!("{}: optimizer state", ckpt_path.display()))?;
        optim = optim.load_record(record);
        state = ck.state;
        eprintln!("resuming {} at step {}", run.name, state.step);
    }
    // Once the weights to start from have loaded: only now may --overwrite clear the old results.
    crate::run_folder::prepare(&run.run_dir, run.resume, run.overwrite)?;
    grin_output::write_file(&run.run_dir.join("config.toml"), &[], run.config_toml.as_bytes())?;

    let mut stepper = Stepper::<B>::new(&spec, cfg.loss.weights(), devices);
    let mut feed = feed_for(state.step)?;

    let label = format!("{} {}", run.name, run.mode.name());
    let mut progress = if run.show_progress { Progress::new(cfg.steps, label) } else { Progress::hidden(label) };
    progress.set_position(state.step);

    let mut interval_start = Instant::now();
    let mut interval_wait = Duration::ZERO;
    let mut interval_steps = 0usize;
    let mut produce_ms: Vec<f64> = Vec::new();
    let run_started = Instant::now();
    let wall_before = state.wall_s;
    let predicted_busy = run.balance.map(|b| b.predicted_busy_pct);
    let mut finished = cfg.steps;

    for step in state.step..cfg.steps {
        let (batch, timing): (_, FeedTiming) = feed.next(step)?;
        interval_wait += timing.wait;
        produce_ms.push(timing.produce.as_secs_f64() * 1e3);

        let (next, parts) = stepper.step(model, &mut optim, learning_rate(cfg, step), batch, None)?;
        model = next;
        interval_steps += 1;

        let done = step + 1;
        if done % cfg.log_every == 0 || done == cfg.steps {
            // The only sync of the interval: reading the loss waits for the device.
            B::sync(device).map_err(|e| anyhow::anyhow!("device sync failed: {e:?}"))?;
            let scalar = |t: &burn::tensor::Tensor<B, 1>| t.clone().into_scalar().elem::<f32>();
            let parts = &parts;
            let wall = interval_start.elapsed().as_secs_f64();
            let wait = interval_wait.as_secs_f64().min(wall);
            let mut row = MetricRow {
                step: done,
                loss: scalar(&parts.total),
                face_loss: scalar(&parts.face),
                box_loss: scalar(&parts.boxes),
                smile_loss: scalar(&parts.smile),
                lr: learning_rate(cfg, step),
                samples_per_s: (interval_steps * cfg.batch_size) as f64 / wall,
                gpu_busy_pct: 100.0 * (wall - wait) / wall,
                wait_ms: 1e3 * wait / interval_steps as f64,
                compute_ms: 1e3 * (wall - wait) / interval_steps as f64,
                produce_ms: median(&produce_ms),
                val_face_ap: None,
                val_smile_accuracy: None,
                unix_time: metrics::unix_now(),
            };
            if !row.loss.is_finite() {
                bail!("loss became {} at step {done}; lower train.lr", row.loss);
            }
            // After the interval's timing is taken, so scoring is not counted as compute.
            let since = state.history.last().map_or(0, |r| r.step);
            if let Some(val) = crate::validation::score_if_due(run, since, done, &model, device)? {
                (row.val_face_ap, row.val_smile_accuracy) = (val.face_ap, val.smile_accuracy);
            }
            let stop_early = match row.val_face_ap {
                Some(ap) => keep_best(run, &mut state, done, ap, &model)?,
                None => false,
            };
            progress.bar().set_message(format!(
                "loss {:.3} | {:.0} samples/s | device busy {:.0}%",
                row.loss, row.samples_per_s, row.gpu_busy_pct
            ));
            state.history.push(row);
            metrics::write_csv(&csv_path, &state.history)?;
            metrics::write_events(&run.run_dir, &state.history, predicted_busy)?;
            interval_start = Instant::now();
            interval_wait = Duration::ZERO;
            interval_steps = 0;
            produce_ms.clear();
            if stop_early {
                finished = done;
                break;
            }
        }
        progress.set_position(done);

        // The last step needs neither: the model is written next.
        let mid_run = done < cfg.steps;
        let stopping = mid_run && run.stop.as_ref().is_some_and(|stop| stop.load(Ordering::Relaxed));
        let checkpoint_due = mid_run && cfg.checkpoint_every > 0 && done % cfg.checkpoint_every == 0;
        if checkpoint_due || stopping {
            state.step = done;
            state.wall_s = wall_before + run_started.elapsed().as_secs_f64();
            let optimizer = BinBytesRecorder::<FullPrecisionSettings>::default().record(optim.to_record(), ())?;
            let ck = Checkpoint { state: state.clone(), model: file::to_bytes(&spec, &model), optimizer };
            checkpoint::save(&ckpt_path, &ck)?;
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

    let inference: Detector<B::InnerBackend> = model.valid();
    let run_spec = run.run_spec();
    file::save_model(&model_path, &run_spec, &inference)
        .with_context(|| format!("{}: cannot write", model_path.display()))?;

    let report: Option<EvalReport> = if run.evaluate && cfg.eval_samples > 0 {
        Some(evaluate(&inference, &spec, &run.features, cfg.eval_samples, device)?)
    } else {
        None
    };
    let photos = if run.evaluate && cfg.eval_photos > 0 {
        evaluate_photos(&inference, &run_spec, &run.features, cfg.eval_photos, cfg.eval_min_face, device)?
    } else {
        vec![]
    };
    let val_photos = if run.evaluate && cfg.val_photos > 0 {
        let min_face = cfg.eval_min_face;
        evaluate_split(&inference, &run_spec, &run.features, Split::Val, cfg.val_photos, min_face, device)?
    } else {
        vec![]
    };
    let _plotted = plot_pr(&run.run_dir.join("pr_curve.svg"), &photos)?;
    let mut summary = summarise(run, &state, report, loaders);
    summary.stopped_early = finished < cfg.steps;
    summary.photos = photos;
    summary.val_photo_ap = mean_ap_loose(&val_photos);
    summary.val_photos = val_photos;
    grin_output::write_file(
        &run.run_dir.join("summary.json"),
        &[],
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )?;
    metrics::plot(&run.run_dir.join("training.svg"), &state.history)?;
    // The run is complete and its model written: the checkpoint would only
    // make a rerun of this config refuse to start.
    std::fs::remove_file(&ckpt_path)
        .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
        .with_context(|| format!("{}: cannot remove the finished run's checkpoint", ckpt_path.display()))?;
    Ok(summary)
}

fn summarise(run: &RunSpec, state: &LoopState, report: Option<EvalReport>, loaders: usize) -> Summary {
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
    Summary {
        name: run.name.clone(),
        mode: run.mode,
        backend: run.backend.clone(),
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
        photos: vec![],
        val_photos: vec![],
        val_photo_ap: None,
        balance: run.balance,
        best: state.watch.best,
        stopped_early: false,
    }
}

/// Records the validation score at `step`: a new best writes `best.grin`
/// (from the weights being trained, before the next step changes them).
/// Returns whether `train.patience` is exhausted, and says so.
fn keep_best<B: TrainBackend>(
    run: &RunSpec,
    state: &mut LoopState,
    step: usize,
    val_face_ap: f32,
    model: &Detector<B>,
) -> Result<bool> {
    let verdict = state.watch.observe(step, val_face_ap, run.train.patience);
    if verdict.improved {
        let path = run.run_dir.join(BEST_MODEL);
        file::save_model(&path, &run.run_spec(), &model.valid())
            .with_context(|| format!("{}: cannot write", path.display()))?;
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

/// Mean AP@0.3 over the sources that have one.
fn mean_ap_loose(reports: &[PhotoReport]) -> Option<f32> {
    let aps: Vec<f32> = reports.iter().filter_map(|r| r.face_ap_loose).collect();
    (!aps.is_empty()).then(|| aps.iter().sum::<f32>() / aps.len() as f32)
}
