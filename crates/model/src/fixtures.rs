//! Models the tests of every crate need: a top-down fusion with values. A
//! new fusion is all zeros, a no-op, so a test of its forward pass (CPU
//! step, Pi engine, ONNX export) would pass without it.

use crate::detector::Detector;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor};

/// `model` with its fusion's two parameters (the last in module order)
/// drawn from N(0, 0.1) by the backend's seeded generator; a model without
/// fusion comes back as it was.
pub fn with_live_fusion<B: Backend>(model: Detector<B>) -> Detector<B> {
    if !model.has_top_down() {
        return model;
    }
    let count = model.num_params_tensors();
    model.map(&mut Live { seen: 0, from: count - 2 })
}

struct Live {
    seen: usize,
    from: usize,
}

impl<B: Backend> ModuleMapper<B> for Live {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        self.seen += 1;
        let tensor = if self.seen > self.from {
            let tracked = tensor.is_require_grad();
            tensor.random_like(Distribution::Normal(0.0, 0.1)).set_require_grad(tracked)
        } else {
            tensor
        };
        Param::from_mapped_value(id, tensor, mapper)
    }
}
