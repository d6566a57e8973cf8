//! The parameters' side of [`FlatAdamW`](super::FlatAdamW): gathering each
//! one that has a gradient (with its rank's record conversions) and handing
//! each its slice of the updated weights.

use super::{FromRecord, Inner, ToRecord};
use crate::TrainBackend;
use burn::module::{ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::record::AdaptorRecord;
use burn::optim::{AdamW, AdamWState, AdaptiveMomentumState, GradientsParams, MultiGradientsParams};
use burn::tensor::backend::Backend;
use burn::tensor::{Shape, Tensor};
use grin_device_step::FlatLayout;
use std::collections::HashMap;

/// A parameter that has a gradient this step.
pub(super) struct Entry<B: TrainBackend> {
    pub(super) id: ParamId,
    pub(super) dims: Vec<usize>,
    pub(super) value: Tensor<Inner<B>, 1>,
    pub(super) grad: Tensor<Inner<B>, 1>,
    pub(super) to_record: ToRecord<B>,
    pub(super) from_record: FromRecord<B>,
}

fn to_record<B: TrainBackend, const D: usize>(
    time: usize,
    moment_1: Tensor<Inner<B>, 1>,
    moment_2: Tensor<Inner<B>, 1>,
    dims: &[usize],
) -> AdaptorRecord<AdamW, B> {
    let shape = Shape::from(dims.to_vec());
    let momentum = AdaptiveMomentumState {
        time,
        moment_1: moment_1.reshape::<D, _>(shape.clone()),
        moment_2: moment_2.reshape::<D, _>(shape),
        max_moment_2: None,
    };
    AdaptorRecord::from_state::<D>(AdamWState { momentum })
}

fn from_record<B: TrainBackend, const D: usize>(
    record: AdaptorRecord<AdamW, B>,
) -> (usize, Tensor<Inner<B>, 1>, Tensor<Inner<B>, 1>) {
    let state: AdamWState<Inner<B>, D> = record.into_state::<D>();
    let m = state.momentum;
    let n = m.moment_1.shape().num_elements();
    (m.time, m.moment_1.reshape([n]), m.moment_2.reshape([n]))
}

/// Where the gradients come from: one device's, or several summed.
pub(super) enum Grads {
    Single(GradientsParams),
    Multi(MultiGradientsParams),
}

impl Grads {
    /// A device step's flat (values, gradients) in the optimizer's layout
    /// (`grin_device_step::FlatLayout`), taken out: one device's only,
    /// where they are the step's whole gradients.
    pub(super) fn flat<B: Backend>(&mut self) -> Option<(Tensor<B, 1>, Tensor<B, 1>)> {
        let Grads::Single(g) = self else { return None };
        let grads = g.remove::<B, 1>(FlatLayout::grads_id());
        let values = g.remove::<B, 1>(FlatLayout::values_id());
        values.zip(grads)
    }

    fn remove<B: Backend, const D: usize>(&mut self, id: ParamId) -> Option<Tensor<B, D>> {
        match self {
            Grads::Single(g) => g.remove::<B, D>(id),
            Grads::Multi(g) => g.remove::<B, D>(id).map(|(t, _)| t),
        }
    }
}

/// Gathers each parameter that has a gradient, in the module's order.
pub(super) struct Collect<B: TrainBackend> {
    pub(super) grads: Grads,
    pub(super) entries: Vec<Entry<B>>,
}

impl<B: TrainBackend> ModuleVisitor<B> for Collect<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(grad) = self.grads.remove::<Inner<B>, D>(param.id) {
            // Several devices' gradients are summed on one chosen by the
            // parameter's id: the update runs where the weights are.
            let grad = match self.grads {
                Grads::Multi(_) => grad.to_device(&param.val().device()),
                Grads::Single(_) => grad,
            };
            let dims = grad.dims().to_vec();
            let n = dims.iter().product::<usize>();
            self.entries.push(Entry {
                id: param.id,
                dims,
                value: param.val().inner().reshape([n]),
                grad: grad.reshape([n]),
                to_record: to_record::<B, D>,
                from_record: from_record::<B, D>,
            });
        }
    }
}

/// Hands each updated parameter its new values.
pub(super) struct Spread<B: TrainBackend> {
    pub(super) updated: HashMap<ParamId, Tensor<Inner<B>, 1>>,
}

impl<B: TrainBackend> ModuleMapper<B> for Spread<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some(updated) = self.updated.remove(&param.id) else {
            return param;
        };
        let (id, tensor, mapper) = param.consume();
        let mut updated = Tensor::from_inner(updated.reshape(tensor.shape()));
        if tensor.is_require_grad() {
            updated = updated.require_grad();
        }
        Param::from_mapped_value(id, updated, mapper)
    }
}
