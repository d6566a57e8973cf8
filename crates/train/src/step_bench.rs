//! `grin bench step`: the training step alone, timed phase by phase, on
//! batches cut from a store held in device memory (the in-VRAM feed): what
//! `scripts/bench-train.sh` sets beside PyTorch eager on the same records.

use crate::config::{GrinConfig, Mode};
use crate::feed::{build_feed, FeedPlan};
use crate::step::{burn_optimizer, optimizer, OptimizerImpl, PhaseTimes, Stepper};
use crate::TrainBackend;
use anyhow::{bail, Result};
use burn::module::Module;
use burn::optim::Optimizer;
use grin_model::Detector;
use grin_model::InitDetector;
use grin_store::Store;
use serde::Serialize;
use std::time::Instant;

/// One timed window of steps: rates and milliseconds per step by phase.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StepTimes {
    pub steps_per_s: f64,
    /// Waiting for the batch: cutting (and augmenting) it from the store.
    pub batch_ms: f64,
    pub forward_ms: f64,
    /// Target assignment and the loss.
    pub loss_ms: f64,
    pub backward_ms: f64,
    pub optimizer_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepBench {
    pub engine: &'static str,
    pub optimizer: OptimizerImpl,
    pub threads: usize,
    pub batch: usize,
    pub width: usize,
    pub height: usize,
    pub width_mult: f32,
    pub params: usize,
    /// Median of each figure over the windows.
    pub median: StepTimes,
    pub windows: Vec<StepTimes>,
    /// Kernel launches, when counted (`Windows::count_launches`).
    pub launches: Option<Launches>,
}

/// Kernel launches over a window of steps: per step, cutting the batch
/// and in the step itself (forward, loss, backward, optimizer), and the
/// step's by kernel, most first.
#[derive(Debug, Clone, Serialize)]
pub struct Launches {
    pub steps: usize,
    pub batch_per_step: f64,
    pub step_per_step: f64,
    pub by_kernel: Vec<(String, u64)>,
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    grin_terms::median(&values.collect::<Vec<f64>>())
}

/// How many steps `grin bench step` times.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    /// Untimed steps first.
    pub warmup: usize,
    /// Steps per timed window.
    pub steps: usize,
    /// Timed windows.
    pub repeats: usize,
    /// Then one more window of `steps` steps whose kernel launches are
    /// counted (the launch counter must be installed first: `bench::install_launch_counter`).
    pub count_launches: bool,
}

/// Trains `warmup` steps, then `repeats` windows of `steps` steps each, on
/// the config's model and batch, with the optimizer `which` implements.
pub fn bench_step<B: TrainBackend>(
    c: &GrinConfig,
    store: Store,
    windows: Windows,
    which: OptimizerImpl,
    device: &B::Device,
) -> Result<StepBench> {
    if windows.steps == 0 || windows.repeats == 0 {
        bail!("--steps and --repeats must be at least 1");
    }
    match which {
        OptimizerImpl::Flat => bench_with(c, store, windows, which, optimizer::<B>(&c.train), device),
        OptimizerImpl::Burn => bench_with(c, store, windows, which, burn_optimizer::<B>(&c.train), device),
    }
}

fn bench_with<B: TrainBackend, O: Optimizer<Detector<B>, B>>(
    c: &GrinConfig,
    store: Store,
    Windows { warmup, steps, repeats, count_launches }: Windows,
    which: OptimizerImpl,
    mut optim: O,
    device: &B::Device,
) -> Result<StepBench> {
    let spec = c.detector_spec();
    let mut model = spec.init_seeded::<B>(c.features.seed, device);
    let mut stepper = Stepper::<B>::new(&spec, c.train.loss, std::slice::from_ref(device));
    let plan = FeedPlan::new(Mode::InVram, &c.features, &c.train, Some(store));
    let mut feed = build_feed::<B>(&plan, device, 0)?;
    let lr = c.train.lr;
    let mut windows = Vec::with_capacity(repeats);
    let mut step = 0;
    for window in 0..=repeats {
        // Window 0 is the warm-up: allocation, first-touch page faults, autotune.
        let count = if window == 0 { warmup } else { steps };
        let mut phases = PhaseTimes::default();
        let mut batch_wait = 0.0;
        let _ = B::sync(device);
        let started = Instant::now();
        for _ in 0..count {
            let (batch, timing) = feed.next(step)?;
            batch_wait += timing.wait.as_secs_f64();
            let (next, _) = stepper.step(model, &mut optim, lr, batch, Some(&mut phases))?;
            model = next;
            step += 1;
        }
        let _ = B::sync(device);
        if window == 0 {
            continue;
        }
        let per_step = |d: std::time::Duration| 1e3 * d.as_secs_f64() / steps as f64;
        windows.push(StepTimes {
            steps_per_s: steps as f64 / started.elapsed().as_secs_f64(),
            batch_ms: 1e3 * batch_wait / steps as f64,
            forward_ms: per_step(phases.forward),
            loss_ms: per_step(phases.loss),
            backward_ms: per_step(phases.backward),
            optimizer_ms: per_step(phases.optimizer),
        });
    }
    let launches = if count_launches {
        let mut cut = Counted::<B>::new(device);
        let mut stepped = Counted::<B>::new(device);
        for _ in 0..steps {
            let (batch, _) = cut.count(|| feed.next(step))?;
            let (next, _) = stepped.count(|| stepper.step(model.clone(), &mut optim, lr, batch, None))?;
            model = next;
            step += 1;
        }
        Some(Launches::of(steps, cut, stepped))
    } else {
        None
    };
    let m = |f: fn(&StepTimes) -> f64| median(windows.iter().map(f));
    let median = StepTimes {
        steps_per_s: m(|w| w.steps_per_s),
        batch_ms: m(|w| w.batch_ms),
        forward_ms: m(|w| w.forward_ms),
        loss_ms: m(|w| w.loss_ms),
        backward_ms: m(|w| w.backward_ms),
        optimizer_ms: m(|w| w.optimizer_ms),
    };
    Ok(StepBench {
        engine: crate::step::engine_name::<B>(),
        optimizer: which,
        threads: rayon::current_num_threads(),
        batch: c.train.batch_size,
        width: spec.width,
        height: spec.height,
        width_mult: spec.model.width_mult,
        params: model.num_params(),
        median,
        windows,
        launches,
    })
}

/// Launches counted over calls, each from a synced device to a synced
/// device (so that a call's launches are its own).
struct Counted<'a, B: TrainBackend> {
    device: &'a B::Device,
    counts: std::collections::BTreeMap<String, u64>,
}

impl<'a, B: TrainBackend> Counted<'a, B> {
    fn new(device: &'a B::Device) -> Self {
        Counted { device, counts: Default::default() }
    }

    fn count<T>(&mut self, call: impl FnOnce() -> Result<T>) -> Result<T> {
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        {
            let _ = B::sync(self.device);
            crate::launches::take();
            let out = call()?;
            let _ = B::sync(self.device);
            for (name, n) in crate::launches::take() {
                *self.counts.entry(name).or_insert(0) += n;
            }
            Ok(out)
        }
        #[cfg(not(any(feature = "cuda", feature = "wgpu")))]
        {
            let _ = (self.device, call);
            bail!("kernel launches are counted on CUDA and wgpu only")
        }
    }

    fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

impl Launches {
    fn of<B: TrainBackend>(steps: usize, cut: Counted<B>, stepped: Counted<B>) -> Launches {
        let per_step = |c: &Counted<B>| c.total() as f64 / steps as f64;
        let (batch_per_step, step_per_step) = (per_step(&cut), per_step(&stepped));
        let mut by_kernel: Vec<(String, u64)> = stepped.counts.into_iter().collect();
        by_kernel.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Launches { steps, batch_per_step, step_per_step, by_kernel }
    }
}
