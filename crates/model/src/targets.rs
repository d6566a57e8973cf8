//! Target assignment as tensor ops, so it runs wherever the batch is: on the
//! host-fed paths and, unchanged, on batches cut and augmented in VRAM.
//!
//! A point is positive for a face when it lies inside the face box, within
//! `CENTER_RADIUS` strides of its centre, and on the level whose size range
//! holds the face. A point claimed by several faces takes the smallest.

use crate::points::{Points, CENTER_RADIUS};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// Points as broadcastable device tensors, built once per run.
#[derive(Debug, Clone)]
pub struct PointTensors<B: Backend> {
    /// `[1, N, 1]` each.
    cx: Tensor<B, 3>,
    cy: Tensor<B, 3>,
    stride: Tensor<B, 3>,
    size_lo: Tensor<B, 3>,
    size_hi: Tensor<B, 3>,
    /// `[1, 1, N]`: what [`crate::DetectorOutput::distances`] multiplies by.
    pub strides_row: Tensor<B, 3>,
    pub len: usize,
}

impl<B: Backend> PointTensors<B> {
    pub fn new(points: &Points, device: &B::Device) -> Self {
        let n = points.len();
        let column = |v: &[f32]| Tensor::<B, 3>::from_data(TensorData::new(v.to_vec(), [1, n, 1]), device);
        // Infinity does not survive every backend's comparisons; a huge size does.
        let hi: Vec<f32> = points.size_hi.iter().map(|&h| h.min(1e9)).collect();
        PointTensors {
            cx: column(&points.cx),
            cy: column(&points.cy),
            stride: column(&points.stride),
            size_lo: column(&points.size_lo),
            size_hi: column(&hi),
            strides_row: Tensor::from_data(TensorData::new(points.stride.clone(), [1, 1, n]), device),
            len: n,
        }
    }
}

/// Per-point training targets.
#[derive(Debug, Clone)]
pub struct Targets<B: Backend> {
    /// `[B, N]`: 1 at positive points.
    pub positive: Tensor<B, 2>,
    /// `[B, 4, N]`: left, top, right, bottom distances to the assigned face.
    pub distances: Tensor<B, 3>,
    /// `[B, N]`: 1 where the assigned face smiles.
    pub smile: Tensor<B, 2>,
    /// `[B, N]`: 1 at positives whose smile label is known.
    pub smile_known: Tensor<B, 2>,
}

const NOT_A_CANDIDATE: f32 = 1e12;

/// `boxes`: `[B, K, 4]` (x0, y0, x1, y1 pixels); `labels`: `[B, K]` with
/// 0/1 smile, -1 unknown smile, -2 empty slot.
pub fn assign<B: Backend>(points: &PointTensors<B>, boxes: Tensor<B, 3>, labels: Tensor<B, 2, Int>) -> Targets<B> {
    let [batch, slots, _] = boxes.dims();
    let n = points.len;
    // [B, 1, K] per coordinate.
    let coord = |i: usize| boxes.clone().narrow(2, i, 1).swap_dims(1, 2);
    let (x0, y0, x1, y1) = (coord(0), coord(1), coord(2), coord(3));

    let left = points.cx.clone() - x0.clone();
    let top = points.cy.clone() - y0.clone();
    let right = x1.clone() - points.cx.clone();
    let bottom = y1.clone() - points.cy.clone();
    let inside = left.clone().min_pair(top.clone()).min_pair(right.clone().min_pair(bottom.clone())).greater_elem(0.0);

    let radius = points.stride.clone() * CENTER_RADIUS;
    let near_x = (points.cx.clone() - (x0.clone() + x1.clone()) * 0.5).abs().lower(radius.clone());
    let near_y = (points.cy.clone() - (y0.clone() + y1.clone()) * 0.5).abs().lower(radius);

    let (w, h) = (x1 - x0, y1 - y0);
    let size = w.clone().max_pair(h.clone());
    let on_level =
        size.clone().greater_equal(points.size_lo.clone()).float() * size.lower_equal(points.size_hi.clone()).float();
    let filled = labels.clone().greater_elem(-2).float().unsqueeze_dim::<3>(1);

    let candidate = inside.float() * near_x.float() * near_y.float() * on_level * filled;
    let cost = (w * h) + (candidate.ones_like() - candidate) * NOT_A_CANDIDATE;
    let (best, index) = cost.min_dim_with_indices(2);
    let positive = best.lower_elem(NOT_A_CANDIDATE * 0.5).float().reshape([batch, n]);

    let pick = |t: Tensor<B, 3>| t.gather(2, index.clone());
    let distances = Tensor::cat(vec![pick(left), pick(top), pick(right), pick(bottom)], 2).swap_dims(1, 2);

    let label = labels.float().unsqueeze_dim::<3>(1).expand([batch, n, slots]);
    let label = pick(label).reshape([batch, n]);
    let smile = label.clone().equal_elem(1.0).float();
    let smile_known = label.greater_equal_elem(0.0).float() * positive.clone();
    Targets { positive, distances, smile, smile_known }
}
