//! The training step, once: forward, target assignment and loss, backward,
//! optimizer step. The training loop, the data-parallel split over several
//! devices and the balance check's `T_s` all call [`Stepper::step`], so the
//! time the check predicts with is the time the loop spends.
//!
//! Where the gradients come from depends on the backend: on the CPU,
//! grin's own fused step (grin-cpu-step); elsewhere (CUDA), Burn's
//! autodiff over the model's ops. Both hand Burn's optimizer the same
//! gradients (grin-cpu-step's `autodiff_parity.rs`).

use crate::adamw::{FlatAdamW, Settings};
use crate::config::TrainConfig;
use crate::device_batch::DeviceBatch;
use crate::parallel;
use crate::TrainBackend;
use anyhow::{Context, Result};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{AdamW, GradientsParams, Optimizer};
use burn::tensor::{Tensor, TensorData};
use grin_cpu_step::{Batch, CpuStep, Labels};
use grin_device_step::DeviceStep;
use grin_model::InitDetector;
use grin_model::Phase;
use grin_model::PointTensors;
use grin_model::{assign, loss, Detector, DetectorBackend, LossParts, LossWeights};
use grin_net::{DetectorSpec, Points};
use std::time::{Duration, Instant};

/// Time spent in each phase of the steps timed, device work included
/// (the device is synced at each phase's end only when timing).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimes {
    pub forward: Duration,
    pub loss: Duration,
    pub backward: Duration,
    pub optimizer: Duration,
}

/// The optimizer every run steps with: AdamW with the config's weight
/// decay, each parameter's gradient clipped to norm 10 ([`FlatAdamW`]:
/// Burn's arithmetic and record, on flat tensors on a GPU and in host
/// loops on the CPU).
pub(crate) type Optim<B> = FlatAdamW<Detector<B>, B>;

pub fn optimizer<B: TrainBackend>(cfg: &TrainConfig) -> Optim<B> {
    FlatAdamW::new(settings(cfg))
}

/// Each parameter's gradient is clipped to this L2 norm.
const CLIP_NORM: f32 = 10.0;

fn settings(cfg: &TrainConfig) -> Settings {
    Settings::new(cfg.weight_decay, CLIP_NORM)
}

/// Which implementation of that optimizer a benchmark steps with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerImpl {
    /// grin's: one update over all parameters at once (what runs train with).
    #[default]
    Flat,
    /// Burn's optimizer adaptor: the same arithmetic, parameter by parameter.
    Burn,
}

impl OptimizerImpl {
    pub fn describe(self) -> &'static str {
        match self {
            OptimizerImpl::Flat => "grin's AdamW",
            OptimizerImpl::Burn => "Burn's AdamW adaptor",
        }
    }
}

/// The run's optimizer as Burn's adaptor steps it, parameter by parameter:
/// `grin bench step --optimizer burn` times it beside [`optimizer`].
pub(crate) fn burn_optimizer<B: TrainBackend>(cfg: &TrainConfig) -> OptimizerAdaptor<AdamW, Detector<B>, B> {
    settings(cfg).burn_config().init()
}

/// What a step needs besides the model, the optimizer and the batch, made
/// once per run.
pub struct Stepper<B: TrainBackend> {
    points: Points,
    weights: LossWeights,
    devices: Vec<B::Device>,
    /// Burn's path: each device's point table.
    tables: Vec<PointTensors<B>>,
    /// The CPU path's buffers, kept across steps.
    cpu: CpuStep,
    /// The device path's state (CUDA, wgpu).
    device_step: DeviceStep,
    /// Data-parallel: the model on each device after the first, made on
    /// first use and given the master's weights every step.
    replicas: Vec<Option<Detector<B>>>,
    spec: DetectorSpec,
}

thread_local! {
    /// Steps and forward passes this thread has run through the [`Stepper`],
    /// so a test can tell which code a timer timed (`balance.rs`).
    static CALLS: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// (steps, forward passes) run through a [`Stepper`] on this thread so far.
#[cfg(test)]
pub(crate) fn calls_on_this_thread() -> (usize, usize) {
    CALLS.get()
}

/// Which gradient engine runs on `B`.
pub(crate) fn engine_name<B: TrainBackend>() -> &'static str {
    if B::InnerBackend::CPU_STEP {
        "grin's CPU step (fused conv + BatchNorm + ReLU, GEMM 1x1 convs)"
    } else if DeviceStep::runs_on::<B>() {
        "grin's device step (CubeCL kernels: conv, BatchNorm + ReLU, loss, AdamW)"
    } else {
        "Burn autodiff"
    }
}

impl<B: TrainBackend> Stepper<B> {
    pub fn new(spec: &DetectorSpec, weights: LossWeights, devices: &[B::Device]) -> Stepper<B> {
        let points = spec.points();
        let tables = if B::InnerBackend::CPU_STEP || DeviceStep::runs_on::<B>() {
            vec![]
        } else {
            devices.iter().map(|d| PointTensors::new(&points, d)).collect()
        };
        let replicas = (1..devices.len()).map(|_| None).collect();
        Stepper {
            points,
            weights,
            devices: devices.to_vec(),
            tables,
            cpu: CpuStep::new(),
            device_step: DeviceStep::new(),
            replicas,
            spec: spec.clone(),
        }
    }

    /// One training step on `batch`: the updated model and the loss parts
    /// (read them only when needed: on a GPU that syncs). With `timing`,
    /// each phase's time is added to it (with a device sync per phase).
    pub fn step<O: Optimizer<Detector<B>, B>>(
        &mut self,
        model: Detector<B>,
        optim: &mut O,
        lr: f64,
        batch: DeviceBatch<B>,
        mut timing: Option<&mut PhaseTimes>,
    ) -> Result<(Detector<B>, LossParts<B>)> {
        CALLS.set((CALLS.get().0 + 1, CALLS.get().1));
        if self.devices.len() == 1 {
            let (parts, grads) = self.gradients(&model, batch, 0, timing.as_deref_mut())?;
            let started = Instant::now();
            let model = optim.step(lr, model, grads);
            self.mark(0, started, timing, |t| &mut t.optimizer);
            return Ok((model, parts));
        }
        // Data-parallel: each device runs forward and backward on its share
        // of the batch, the first on the master, the others on replicas
        // given the master's weights; the gradients are summed on the
        // first device, each weighted by its share (`parallel.rs`).
        let n = batch.images.dims()[0];
        let share = n.div_ceil(self.devices.len());
        let weights = parallel::weights(&model)?;
        let mut grads = Vec::with_capacity(self.devices.len());
        let mut shares = Vec::with_capacity(self.devices.len());
        let mut losses: Vec<LossParts<B>> = Vec::with_capacity(self.devices.len());
        for i in 0..self.devices.len() {
            let (start, len) = (i * share, share.min(n.saturating_sub(i * share)));
            if len == 0 {
                break;
            }
            let device = self.devices[i].clone();
            let part = DeviceBatch {
                images: parallel::move_to(batch.images.clone().narrow(0, start, len), &device),
                boxes: parallel::move_to(batch.boxes.clone().narrow(0, start, len), &device),
                labels: parallel::move_to(batch.labels.clone().narrow(0, start, len), &device),
            };
            let weight = len as f32 / n as f32;
            let (parts, g) = if i == 0 {
                self.gradients_scaled(&model, part, i, weight, timing.as_deref_mut())?
            } else {
                let replica = match self.replicas[i - 1].take() {
                    Some(replica) => replica,
                    None => self.spec.init::<B>(&device),
                };
                let replica = parallel::refresh(replica, &weights, &device)?;
                let out = self.gradients_scaled(&replica, part, i, weight, timing.as_deref_mut())?;
                self.replicas[i - 1] = Some(replica);
                out
            };
            grads.push(g);
            shares.push(weight);
            losses.push(parts);
        }
        let first = self.devices[0].clone();
        let replicas: Vec<&Detector<B>> = self.replicas.iter().flatten().take(shares.len() - 1).collect();
        let model = parallel::average_running_stats(model, &replicas, &shares);
        let grads = parallel::sum_gradients(&model, grads, &first);
        let started = Instant::now();
        let model = optim.step(lr, model, grads);
        self.mark(0, started, timing, |t| &mut t.optimizer);
        // The batch's loss: the shards' losses weighted by their shares.
        let weighted = |f: fn(&LossParts<B>) -> &Tensor<B, 1>| {
            losses.iter().zip(&shares).map(|(l, &w)| parallel::move_to(f(l).clone(), &first) * w).reduce(|a, b| a + b)
        };
        let parts = LossParts {
            total: weighted(|l| &l.total).context("empty batch")?,
            face: weighted(|l| &l.face).context("empty batch")?,
            boxes: weighted(|l| &l.boxes).context("empty batch")?,
            smile: weighted(|l| &l.smile).context("empty batch")?,
        };
        Ok((model, parts))
    }

    /// The training forward pass alone, on the ops the step runs: `T_i`.
    pub(crate) fn forward(&mut self, model: &Detector<B>, batch: &DeviceBatch<B>) -> Result<()> {
        CALLS.set((CALLS.get().0, CALLS.get().1 + 1));
        if B::InnerBackend::CPU_STEP {
            let cpu = &mut self.cpu;
            with_host_batch(batch, |host| cpu.forward_only(model, host))?;
        } else {
            // Held until the device has computed it: a lazy backend (Burn's
            // fusion) need not compute an output dropped unread.
            let output = model.forward(batch.images.clone());
            let _ = B::sync(&self.devices[0]);
            drop(output);
        }
        Ok(())
    }

    /// Loss and gradients of `model` on `batch` on the first device, without
    /// the optimizer: what a parity test compares between backends.
    pub fn loss_and_gradients(
        &mut self,
        model: &Detector<B>,
        batch: DeviceBatch<B>,
    ) -> Result<(LossParts<B>, GradientsParams)> {
        self.gradients(model, batch, 0, None)
    }

    fn gradients(
        &mut self,
        model: &Detector<B>,
        batch: DeviceBatch<B>,
        device: usize,
        timing: Option<&mut PhaseTimes>,
    ) -> Result<(LossParts<B>, GradientsParams)> {
        self.gradients_scaled(model, batch, device, 1.0, timing)
    }

    /// Loss and gradients of `model` on `batch` (on device `device`), the
    /// gradients scaled by `scale`.
    fn gradients_scaled(
        &mut self,
        model: &Detector<B>,
        batch: DeviceBatch<B>,
        device: usize,
        scale: f32,
        mut timing: Option<&mut PhaseTimes>,
    ) -> Result<(LossParts<B>, GradientsParams)> {
        let dev = self.devices[device].clone();
        if B::InnerBackend::CPU_STEP {
            let mut last = Instant::now();
            let mut phase = |p: Phase| {
                if let Some(t) = timing.as_deref_mut() {
                    *phase_slot(t, p) += last.elapsed();
                    last = Instant::now();
                }
            };
            if scale != 1.0 {
                anyhow::bail!("the CPU step trains on one device; --devices names several");
            }
            let (cpu, points, weights) = (&mut self.cpu, &self.points, self.weights);
            let (values, grads) =
                with_host_batch(&batch, |host| cpu.gradients(model, host, points, weights, &dev, &mut phase))?;
            let scalar = |v: f32| Tensor::<B, 1>::from_data(TensorData::new(vec![v], [1]), &dev);
            let parts = LossParts {
                total: scalar(values.total),
                face: scalar(values.face),
                boxes: scalar(values.boxes),
                smile: scalar(values.smile),
            };
            return Ok((parts, grads));
        }
        if DeviceStep::runs_on::<B>() {
            let sync = &self.devices[device];
            let mut last = Instant::now();
            let mut phase = |p: Phase| {
                if let Some(t) = timing.as_deref_mut() {
                    let _ = B::sync(sync);
                    *phase_slot(t, p) += last.elapsed();
                    last = Instant::now();
                }
            };
            let batch =
                grin_device_step::DeviceBatch { images: &batch.images, boxes: &batch.boxes, labels: &batch.labels };
            let step = &mut self.device_step;
            return Ok(step.gradients(model, batch, &self.points, self.weights, scale, &mut phase));
        }
        let started = Instant::now();
        let output = model.forward(batch.images);
        self.mark(device, started, timing.as_deref_mut(), |t| &mut t.forward);
        let started = Instant::now();
        let table = &self.tables[device];
        let parts = loss(&output, &assign(table, batch.boxes, batch.labels), table, self.weights);
        self.mark(device, started, timing.as_deref_mut(), |t| &mut t.loss);
        let started = Instant::now();
        let total = if scale == 1.0 { parts.total.clone() } else { parts.total.clone() * scale };
        let grads = GradientsParams::from_grads(total.backward(), model);
        self.mark(device, started, timing, |t| &mut t.backward);
        Ok((parts, grads))
    }

    /// Adds the time since `started` to a phase, after syncing the device,
    /// when timing.
    fn mark(
        &self,
        device: usize,
        started: Instant,
        timing: Option<&mut PhaseTimes>,
        slot: impl FnOnce(&mut PhaseTimes) -> &mut Duration,
    ) {
        if let Some(t) = timing {
            let _ = B::sync(&self.devices[device]);
            *slot(t) += started.elapsed();
        }
    }
}

/// Where a phase's time goes.
fn phase_slot(t: &mut PhaseTimes, p: Phase) -> &mut Duration {
    match p {
        Phase::Forward => &mut t.forward,
        Phase::Loss => &mut t.loss,
        Phase::Backward => &mut t.backward,
    }
}

/// Runs the CPU step's `f` on `batch` read as plain values (on the CPU
/// backend, the tensors' own memory).
fn with_host_batch<B: TrainBackend, R>(batch: &DeviceBatch<B>, f: impl FnOnce(Batch) -> R) -> Result<R> {
    let [n, channels, height, width] = batch.images.dims();
    let slots = batch.labels.dims()[1];
    let err = |e| anyhow::anyhow!("reading a batch back: {e:?}");
    let boxes = batch.boxes.clone().into_data().convert::<f32>().to_vec::<f32>().map_err(err)?;
    let labels = batch.labels.clone().into_data().convert::<i64>().to_vec::<i64>().map_err(err)?;
    let images = batch.images.clone().inner().into_primitive().tensor();
    Ok(B::InnerBackend::with_values(images, |images| {
        let labels = Labels { boxes: &boxes, labels: &labels, slots };
        f(Batch { images, batch: n, channels, height, width, labels })
    }))
}
