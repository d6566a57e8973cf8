//! AdamW over every parameter at once: Burn's AdamW with per-parameter norm
//! clipping, computed on one flat tensor instead of one small tensor per
//! parameter.
//!
//! Why: on a GPU the detector's step is host-bound (SM busy about 20% on an
//! H200, `docs/benchmarks.md`), and Burn's optimizer adaptor runs about 25
//! ops for each of the model's ~100 parameters, each registered, fused and
//! launched on its own: the optimizer took longer than the forward pass.
//! Here the gradients and weights are concatenated into chunks of
//! [`CHUNK`] values, each parameter padded to whole chunks, and the update
//! is some twenty ops on the whole set, whatever the parameter count. The
//! clipping norms are per parameter, as Burn's: chunk sums, then each
//! parameter's chunks gathered and summed.
//!
//! On a backend whose tensors live in host memory the same update runs as
//! plain loops instead (`host.rs`).
//!
//! The arithmetic is Burn's (`burn::optim::AdamW` with
//! `GradientClippingConfig::Norm`), op for op, and the record is Burn's
//! adaptor's, so checkpoints written before this optimizer resume with it
//! and the other way round (tests below).

mod host;
mod layout;
mod params;

use crate::TrainBackend;
use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::record::AdaptorRecord;
use burn::optim::{AdamW, AdamWConfig, GradientsParams, MultiGradientsParams};
use burn::optim::{LearningRate, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use grin_device_step::{AdamwScalars, FlatState, StepKernels};
use grin_model::DetectorBackend;
use layout::Flat;
use params::{Collect, Grads, Spread};
use std::marker::PhantomData;

/// Values per chunk: a parameter is padded to whole chunks so that each
/// chunk belongs to one parameter (and starts where a device can bind a view).
use grin_device_step::CHUNK;

/// Burn's per-parameter optimizer state, keyed by parameter: the record
/// both optimizers write.
pub(crate) type Records<M, B> = <OptimizerAdaptor<AdamW, M, B> as Optimizer<M, B>>::Record;

/// AdamW's constants and the clipping norm.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    weight_decay: f32,
    /// Each parameter's gradient is scaled to at most this L2 norm.
    clip_norm: f32,
}

impl Settings {
    /// Burn's `AdamWConfig` defaults with this weight decay and clip norm.
    pub(crate) fn new(weight_decay: f32, clip_norm: f32) -> Settings {
        Settings { beta_1: 0.9, beta_2: 0.999, epsilon: 1e-5, weight_decay, clip_norm }
    }

    /// The same optimizer as Burn's adaptor, for the parity tests.
    pub(crate) fn burn_config(&self) -> AdamWConfig {
        AdamWConfig::new()
            .with_beta_1(self.beta_1)
            .with_beta_2(self.beta_2)
            .with_epsilon(self.epsilon)
            .with_weight_decay(self.weight_decay)
            .with_grad_clipping(Some(burn::grad_clipping::GradientClippingConfig::Norm(self.clip_norm)))
    }
}

/// AdamW on flat tensors, or in host loops; see the module's comment.
pub struct FlatAdamW<M: AutodiffModule<B>, B: TrainBackend> {
    settings: Settings,
    flat: Option<Flat<B>>,
    /// States not in `flat`: read from a record, or left by a parameter
    /// that had no gradient at the last step. Moved into `flat` when their
    /// parameter next has one.
    loose: Records<M, B>,
    /// Set on a host-memory backend: every step runs in host loops, with
    /// the moments here (`host.rs`).
    host: Option<host::Host<B>>,
    module: PhantomData<M>,
}

impl<M: AutodiffModule<B>, B: TrainBackend> Clone for FlatAdamW<M, B> {
    fn clone(&self) -> Self {
        FlatAdamW {
            settings: self.settings,
            flat: self.flat.clone(),
            loose: self.loose.clone(),
            host: self.host.clone(),
            module: PhantomData,
        }
    }
}

type Inner<B> = <B as AutodiffBackend>::InnerBackend;
type Flat1<B> = Tensor<Inner<B>, 1>;
/// Burn's record of one parameter's state from (time, moment 1, moment 2,
/// shape), made for the parameter's rank.
type ToRecord<B> = fn(usize, Flat1<B>, Flat1<B>, &[usize]) -> AdaptorRecord<AdamW, B>;
/// The other way: (time, moment 1, moment 2) flattened.
type FromRecord<B> = fn(AdaptorRecord<AdamW, B>) -> (usize, Flat1<B>, Flat1<B>);

impl<M: AutodiffModule<B>, B: TrainBackend> FlatAdamW<M, B> {
    /// Host loops where the backend's tensors are host memory, else flat tensors.
    pub(crate) fn new(settings: Settings) -> Self {
        let host = Inner::<B>::HOST_MEMORY.then(host::Host::new);
        FlatAdamW { host, ..Self::with_flat_tensors(settings) }
    }

    /// The flat tensor update on any backend (the parity tests run it on the CPU).
    pub(crate) fn with_flat_tensors(settings: Settings) -> Self {
        let loose = settings.burn_config().init::<B, M>().to_record();
        FlatAdamW { settings, flat: None, loose, host: None, module: PhantomData }
    }

    fn step_with(&mut self, lr: LearningRate, module: M, mut grads: Grads) -> M {
        // A device step's flat buffers, in this optimizer's layout.
        let given = grads.flat::<Inner<B>>();
        let mut collect = Collect { grads, entries: vec![] };
        module.visit(&mut collect);
        let entries = collect.entries;
        if let Some(host) = &mut self.host {
            let updated = host::step::<M, B>(self.settings, lr, host, &mut self.loose, entries);
            return module.map(&mut Spread { updated });
        }
        let Some(device) = entries.first().map(|e| e.grad.device()) else {
            return module;
        };
        // A model moved to another device takes its moments along.
        let same_layout = self.flat.as_ref().is_some_and(|f| {
            f.moment_1.device() == device
                && f.slots.len() == entries.len()
                && f.slots.iter().zip(&entries).all(|(s, e)| s.id == e.id && s.dims == e.dims)
        });
        if !same_layout {
            self.dissolve();
            self.flat = Some(self.lay_out(&entries, &device));
        }
        let flat = self.flat.as_mut().expect("laid out above");
        let join = |parts: Vec<Tensor<Inner<B>, 1>>| {
            let mut all = Vec::with_capacity(2 * parts.len() + 1);
            for (part, pad) in parts.into_iter().zip(&flat.pads) {
                all.push(part);
                all.extend(pad.clone());
            }
            all.extend(flat.pads.last().cloned().flatten());
            Tensor::cat(all, 0).reshape([flat.chunks, CHUNK])
        };
        let whole = flat.chunks * CHUNK;
        let (values, grads) = match given {
            // The step wrote both in this layout: the same starts for the
            // same parameters in the same order (`FlatLayout::of_model`).
            Some((v, g)) if v.dims() == [whole] && g.dims() == [whole] => {
                (v.reshape([flat.chunks, CHUNK]), g.reshape([flat.chunks, CHUNK]))
            }
            _ => {
                let (values, grads): (Vec<_>, Vec<_>) = entries.into_iter().map(|e| (e.value, e.grad)).unzip();
                (join(values), join(grads))
            }
        };
        for slot in &mut flat.slots {
            slot.time += 1;
        }
        let values = match self.kernel_step(lr, values.clone(), grads.clone()) {
            Some(values) => values,
            None => self.tensor_step(lr, values, grads, &device),
        };
        let flat = self.flat.as_ref().expect("laid out above");
        let values = values.reshape([whole]).into_primitive().tensor();
        let updated = flat
            .slots
            .iter()
            .map(|slot| {
                let view = Inner::<B>::flat_view(values.clone(), slot.start, &[slot.len]);
                (slot.id, Tensor::from_primitive(TensorPrimitive::Float(view)))
            })
            .collect();
        module.map(&mut Spread { updated })
    }

    /// The update as the backend's own kernels (`StepKernels::adamw_flat`:
    /// two launches on CUDA and wgpu), when it has them and every slot has
    /// taken the same steps (one bias correction for all).
    fn kernel_step(
        &mut self,
        lr: LearningRate,
        values: Tensor<Inner<B>, 2>,
        grads: Tensor<Inner<B>, 2>,
    ) -> Option<Tensor<Inner<B>, 2>> {
        let s = self.settings;
        let flat = self.flat.as_mut().expect("laid out before the step");
        let time = flat.slots[0].time;
        if flat.slots.iter().any(|slot| slot.time != time) {
            return None;
        }
        let t = time as i32;
        let scalars = AdamwScalars {
            lr: lr as f32,
            beta_1: s.beta_1,
            beta_2: s.beta_2,
            epsilon: s.epsilon,
            decay: (lr * s.weight_decay as f64) as f32,
            clip_norm: s.clip_norm,
            correction_1: 1f32 - s.beta_1.powi(t),
            correction_2: 1f32 - s.beta_2.powi(t),
        };
        let shape = [flat.chunks, CHUNK];
        let float = |t: Tensor<Inner<B>, 2>| t.into_primitive().tensor();
        let state = FlatState {
            values: float(values),
            grads: float(grads),
            moment_1: float(flat.moment_1.clone()),
            moment_2: float(flat.moment_2.clone()),
            chunk_slot: flat.chunk_slot.clone().into_primitive(),
            spans: flat.spans.clone().into_primitive(),
            slots: flat.slots.len(),
        };
        let (values, m, v) = Inner::<B>::adamw_flat(state, scalars)?;
        let tensor = |t| Tensor::<Inner<B>, 1>::from_primitive(TensorPrimitive::Float(t)).reshape(shape);
        flat.moment_1 = tensor(m);
        flat.moment_2 = tensor(v);
        Some(tensor(values))
    }

    /// The update as Burn's tensor ops (about twenty, whatever the
    /// parameter count).
    fn tensor_step(
        &mut self,
        lr: LearningRate,
        values: Tensor<Inner<B>, 2>,
        grads: Tensor<Inner<B>, 2>,
        device: &burn::tensor::Device<Inner<B>>,
    ) -> Tensor<Inner<B>, 2> {
        let s = self.settings;
        let flat = self.flat.as_ref().expect("laid out before the step");
        // Burn's clipping: each parameter's gradient times
        // min(1, clip / (|g| + min_positive)).
        let chunk_sums = grads.clone().square().sum_dim(1).reshape([flat.chunks]);
        let norms = chunk_sums
            .select(0, flat.slot_chunks.clone())
            .reshape([flat.slots.len(), flat.widest])
            .sum_dim(1)
            .sqrt()
            .reshape([flat.slots.len()]);
        let coef = norms.add_scalar(f32::MIN_POSITIVE).recip().mul_scalar(s.clip_norm).clamp_max(1.0);
        let grads = grads * coef.select(0, flat.chunk_slot.clone()).reshape([flat.chunks, 1]);

        // Burn's AdamW (`AdaptiveMomentumW::transform`, then the decay).
        let m = flat.moment_1.clone().mul_scalar(s.beta_1).add(grads.clone().mul_scalar(1.0 - s.beta_1));
        let v = flat.moment_2.clone().mul_scalar(s.beta_2).add(grads.square().mul_scalar(1.0 - s.beta_2));
        let (m_hat, v_hat) = self.corrected(m.clone(), v.clone(), device);
        let flat = self.flat.as_mut().expect("laid out before the step");
        flat.moment_1 = m;
        flat.moment_2 = v;
        let delta = m_hat.div(v_hat.sqrt().add_scalar(s.epsilon));
        let decay = lr * s.weight_decay as f64;
        values.mul_scalar(1.0 - decay) - delta.mul_scalar(lr)
    }

    /// The moments divided by `1 - beta^time`: one scalar when every slot
    /// has taken the same steps (the usual case), else per chunk.
    fn corrected(
        &self,
        m: Tensor<Inner<B>, 2>,
        v: Tensor<Inner<B>, 2>,
        device: &burn::tensor::Device<Inner<B>>,
    ) -> (Tensor<Inner<B>, 2>, Tensor<Inner<B>, 2>) {
        let s = self.settings;
        let flat = self.flat.as_ref().expect("laid out before correcting");
        let time = flat.slots[0].time;
        if flat.slots.iter().all(|slot| slot.time == time) {
            let t = time as i32;
            return (m.div_scalar(1f32 - s.beta_1.powi(t)), v.div_scalar(1f32 - s.beta_2.powi(t)));
        }
        let per_chunk = |beta: f32| {
            let mut values = Vec::with_capacity(flat.chunks);
            for slot in &flat.slots {
                values.extend(std::iter::repeat_n(1f32 - beta.powi(slot.time as i32), slot.len.div_ceil(CHUNK)));
            }
            // The padding chunk: any nonzero divisor (its moments are zero).
            values.push(1.0);
            Tensor::<Inner<B>, 1>::from_data(TensorData::new(values, [flat.chunks]), device).reshape([flat.chunks, 1])
        };
        (m.div(per_chunk(s.beta_1)), v.div(per_chunk(s.beta_2)))
    }
}

impl<M: AutodiffModule<B>, B: TrainBackend> Optimizer<M, B> for FlatAdamW<M, B> {
    type Record = Records<M, B>;

    fn step(&mut self, lr: LearningRate, module: M, grads: GradientsParams) -> M {
        self.step_with(lr, module, Grads::Single(grads))
    }

    fn step_multi(&mut self, lr: LearningRate, module: M, grads: MultiGradientsParams) -> M {
        self.step_with(lr, module, Grads::Multi(grads))
    }

    fn to_record(&self) -> Self::Record {
        let mut copy = self.clone();
        copy.dissolve();
        if let Some(host) = &copy.host {
            host::into_records::<M, B>(host, &mut copy.loose);
        }
        copy.loose
    }

    fn load_record(mut self, record: Self::Record) -> Self {
        self.flat = None;
        if let Some(host) = &mut self.host {
            host.clear();
        }
        self.loose = record;
        self
    }
}

#[cfg(test)]
mod tests;
