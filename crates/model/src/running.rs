//! BatchNorm's running averages, as both training steps move them.
//!
//! Each average is replaced through the state's own mapping, never through
//! `RunningState::update`: `update` keeps the value aside per thread and
//! averages them at the next read with tensor ops, and on an autodiff
//! backend every op outside a backward pass registers a graph that nothing
//! frees (about 0.3 MB a step on the CPU, issue 80). The arithmetic runs on
//! the inner backend for the same reason.

use burn::module::{Module, ModuleMapper, Param, RunningState};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};

/// `state = (1 - momentum) * state + momentum * batch`, as Burn's BatchNorm.
pub fn update<B: AutodiffBackend>(
    state: &RunningState<Tensor<B, 1>>,
    batch: Vec<f32>,
    momentum: f64,
    device: &B::Device,
) {
    let n = batch.len();
    let batch = Tensor::<B::InnerBackend, 1>::from_data(TensorData::new(batch, [n]), device);
    let moved = state.value().inner().mul_scalar(1.0 - momentum).add(batch.mul_scalar(momentum));
    set(state, Tensor::from_inner(moved));
}

/// Sets a running average to `value`, one already moved by the momentum,
/// in the value every clone of the state shares.
pub fn set<B: Backend>(state: &RunningState<Tensor<B, 1>>, value: Tensor<B, 1>) {
    struct To<B: Backend>(Option<Tensor<B, 1>>);
    impl<B: Backend> ModuleMapper<B> for To<B> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, old, mapper) = param.consume();
            let value = self.0.take().expect("one running average");
            assert_eq!(value.shape(), old.shape(), "a running average keeps its shape");
            // The same values at the mapper's rank, without a reshape (an op).
            Param::from_mapped_value(id, Tensor::from_primitive(value.into_primitive()), mapper)
        }
    }
    let _ = state.clone().map(&mut To(Some(value)));
}
