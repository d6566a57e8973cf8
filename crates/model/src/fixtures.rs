//! What the tests of every crate need: a top-down fusion with values (a new
//! fusion is all zeros, a no-op, so a test of its forward pass (CPU step,
//! Pi engine, ONNX export) would pass without it), a batch's labelled boxes
//! that put every term of the loss in play, and the one bound on how
//! far two f32 paths that round the same sums in different orders may
//! differ, each measured against one reference.

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

/// Labelled boxes for `batch` images of 96x72, `[batch, slots, 4]` (x0, y0,
/// x1, y1) and `[batch, slots]`, and the slot count: faces on each level, a
/// smile, a known non-smile, an unknown smile, an ignore region and an
/// empty slot, each image's shifted a little so that images differ.
pub fn labelled_boxes(batch: usize) -> (Vec<f32>, Vec<i64>, usize) {
    let slots = [
        ([10.0, 12.0, 30.0, 34.0], 1),
        ([40.0, 8.0, 84.0, 56.0], 0),
        ([60.0, 40.0, 80.0, 62.0], -1),
        ([0.0, 40.0, 30.0, 72.0], -3),
        ([0.0, 0.0, 0.0, 0.0], -2),
    ];
    let (mut boxes, mut labels) = (Vec::new(), Vec::new());
    for b in 0..batch {
        for (i, (bx, label)) in slots.iter().enumerate() {
            let shift = if *label == -2 { 0.0 } else { (b * 3 + i) as f32 };
            boxes.extend(bx.iter().map(|v| v + shift));
            labels.push(*label as i64);
        }
    }
    (boxes, labels, slots.len())
}

/// f32's unit roundoff.
pub const U: f64 = f32::EPSILON as f64 / 2.0;

/// How much larger one f32 path's worst error over `n` elements may be
/// than another's, both measured against one reference, when the
/// two round the same sums in different orders. Model: each element's error
/// is an independent draw of one half-normal |N(0, σ²)|. Then the larger
/// maximum is below σ·√(2·ln(n/p)) (a union bound on the tail
/// 2(1−Φ(q)) ≤ exp(−q²/2)), and the smaller one above σ·√(π/2)·p^(1/n)
/// (erf(x) ≤ 2x/√π), each but with probability p; p = 1e-6. 25 for n = 8,
/// 5.5 for n = 1000.
pub(crate) fn error_ratio(n: usize) -> f64 {
    const P: f64 = 1e-6;
    (2.0 * (n as f64 / P).ln()).sqrt() / ((std::f64::consts::PI / 2.0).sqrt() * P.powf(1.0 / n as f64))
}

/// The error one path may have against the values `reference`, given
/// another path's error `other_error` on them: `error_ratio` times it,
/// plus one rounding of the largest value.
pub fn allowed_error(reference: &[f64], other_error: f64) -> f64 {
    error_ratio(reference.len()) * other_error + 2.0 * U * max_abs(reference)
}

pub fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0f64, |m, &x| m.max(x.abs()))
}

pub fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0f64, |m, (&x, &y)| m.max((x - y).abs()))
}
