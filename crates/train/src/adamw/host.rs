//! The same update as plain loops over each parameter's values, for a
//! backend whose tensors live in host memory (the CPU's).
//!
//! Why: there the flat update's ops each allocate and walk the whole set
//! (about 20 passes), and burn-ndarray's reductions do not sum in a fixed
//! order, so two runs of one config drifted apart; Burn's adaptor, which
//! the CPU used before, runs about 25 ops for each of ~100 parameters: 1.2
//! ms a step, against about 0.1 ms of arithmetic. Here each parameter is
//! one pass in a fixed order, the same bits on every run.

use super::params::Entry;
use super::{Inner, Records, Settings, ToRecord};
use crate::TrainBackend;
use burn::module::{AutodiffModule, ParamId};
use burn::tensor::{Tensor, TensorData};
use grin_model::{values_of, DetectorBackend};
use std::collections::HashMap;

/// One parameter's moments, in host memory.
pub(super) struct Moments<B: TrainBackend> {
    /// Steps taken (Burn's `time`).
    time: usize,
    m: Vec<f32>,
    v: Vec<f32>,
    dims: Vec<usize>,
    to_record: ToRecord<B>,
    device: burn::tensor::Device<Inner<B>>,
}

impl<B: TrainBackend> Clone for Moments<B> {
    fn clone(&self) -> Self {
        Moments {
            time: self.time,
            m: self.m.clone(),
            v: self.v.clone(),
            dims: self.dims.clone(),
            to_record: self.to_record,
            device: self.device.clone(),
        }
    }
}

/// The moments of every parameter that has taken a step here.
pub(super) type Host<B> = HashMap<ParamId, Moments<B>>;

/// Steps each entry's parameter, taking its moments from `loose` (a record
/// read earlier) or starting them at zero; returns the updated values.
pub(super) fn step<M: AutodiffModule<B>, B: TrainBackend>(
    s: Settings,
    lr: f64,
    host: &mut Host<B>,
    loose: &mut Records<M, B>,
    entries: Vec<Entry<B>>,
) -> HashMap<ParamId, Tensor<Inner<B>, 1>> {
    // Burn's scalars: the f64 factors meet f32 tensors as f32.
    let (decay, lr_f32) = ((1.0 - lr * s.weight_decay as f64) as f32, lr as f32);
    let (b1, b2) = (s.beta_1, s.beta_2);
    let mut updated = HashMap::with_capacity(entries.len());
    for e in entries {
        let device = e.grad.device();
        let moments = host.entry(e.id).or_insert_with(|| {
            let n = e.dims.iter().product();
            let (time, m, v) = match loose.remove(&e.id) {
                Some(record) => {
                    let (time, m, v) = (e.from_record)(record);
                    (time, values_of(m), values_of(v))
                }
                None => (0, vec![0.0; n], vec![0.0; n]),
            };
            Moments { time, m, v, dims: e.dims.clone(), to_record: e.to_record, device: device.clone() }
        });
        let grad = values_of(e.grad);
        // Burn's clipping: times min(1, clip / (|g| + min_positive)).
        let norm = grad.iter().map(|g| g * g).sum::<f32>().sqrt();
        let coef = (s.clip_norm / (norm + f32::MIN_POSITIVE)).min(1.0);
        moments.time += 1;
        let t = moments.time as i32;
        let (c1, c2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
        let values = Inner::<B>::with_values(e.value.into_primitive().tensor(), |w| {
            let Moments { m, v, .. } = moments;
            w.iter()
                .zip(&grad)
                .zip(m.iter_mut().zip(v.iter_mut()))
                .map(|((w, g), (m, v))| {
                    // Burn's AdamW, op for op (`AdaptiveMomentumW::transform`, then the decay).
                    let g = g * coef;
                    *m = *m * b1 + g * (1.0 - b1);
                    *v = *v * b2 + g * g * (1.0 - b2);
                    let delta = (*m / c1) / ((*v / c2).sqrt() + s.epsilon);
                    w * decay - delta * lr_f32
                })
                .collect::<Vec<f32>>()
        });
        let n = values.len();
        updated.insert(e.id, Tensor::from_data(TensorData::new(values, [n]), &device));
    }
    updated
}

/// `host`'s moments as Burn's records, added to `loose`.
pub(super) fn into_records<M: AutodiffModule<B>, B: TrainBackend>(host: &Host<B>, loose: &mut Records<M, B>) {
    for (id, moments) in host {
        let tensor = |values: &[f32]| {
            Tensor::<Inner<B>, 1>::from_data(TensorData::new(values.to_vec(), [values.len()]), &moments.device)
        };
        let record = (moments.to_record)(moments.time, tensor(&moments.m), tensor(&moments.v), &moments.dims);
        loose.insert(*id, record);
    }
}
