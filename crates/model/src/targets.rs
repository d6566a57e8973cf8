//! Target assignment as tensor ops, so it runs wherever the batch is: on the
//! host-fed paths and, unchanged, on batches cut and augmented in VRAM.
//!
//! A point is positive for a face when it lies inside the face box, within
//! `CENTER_RADIUS` strides of its centre, and on the level whose size range
//! holds the face. A point claimed by several faces takes the smallest.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use grin_net::{Points, CENTER_RADIUS};
use grin_terms::label::{LABEL_IGNORE, LABEL_PADDING};

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
    /// `[B, N]`: 1 at points inside an ignore region: left out of the
    /// negative (background) term of the face loss.
    pub ignore: Tensor<B, 2>,
}

const NOT_A_CANDIDATE: f32 = 1e12;

/// `boxes`: `[B, K, 4]` (x0, y0, x1, y1 pixels); `labels`: `[B, K]` with
/// the codes of `grin_terms::label` (0/1 smile, -1 unknown smile, -2 empty
/// slot, -3 ignore region).
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
    let ignore_slot = labels.clone().float().equal_elem(LABEL_IGNORE as f32).float().unsqueeze_dim::<3>(1);
    let ignore = (inside.clone().float() * ignore_slot).max_dim(2).reshape([batch, n]);

    let radius = points.stride.clone() * CENTER_RADIUS;
    let near_x = (points.cx.clone() - (x0.clone() + x1.clone()) * 0.5).abs().lower(radius.clone());
    let near_y = (points.cy.clone() - (y0.clone() + y1.clone()) * 0.5).abs().lower(radius);

    let (w, h) = (x1 - x0, y1 - y0);
    let size = w.clone().max_pair(h.clone());
    let on_level =
        size.clone().greater_equal(points.size_lo.clone()).float() * size.lower_equal(points.size_hi.clone()).float();
    let filled = labels.clone().greater_elem(LABEL_PADDING as i32).float().unsqueeze_dim::<3>(1);

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
    Targets { positive, distances, smile, smile_known, ignore }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    fn run(boxes: &[[f32; 4]], labels: &[i64]) -> (Points, Targets<B>) {
        let device = Default::default();
        let points = Points::new(64, 64);
        let table = PointTensors::<B>::new(&points, &device);
        let k = boxes.len();
        let flat: Vec<f32> = boxes.iter().flatten().copied().collect();
        let boxes = Tensor::<B, 3>::from_data(TensorData::new(flat, [1, k, 4]), &device);
        let labels = Tensor::<B, 2, Int>::from_data(TensorData::new(labels.to_vec(), [1, k]), &device);
        (points, assign(&table, boxes, labels))
    }

    fn values(t: Tensor<B, 2>) -> Vec<f32> {
        t.into_data().to_vec::<f32>().unwrap()
    }

    #[test]
    fn a_face_claims_the_points_near_its_centre_on_its_level() {
        // A 24 px face centred at (32, 32): stride-8 level (sizes up to 48).
        let (points, t) = run(&[[20.0, 20.0, 44.0, 44.0]], &[1]);
        let positive = values(t.positive);
        let hits: Vec<usize> = (0..points.len()).filter(|&i| positive[i] > 0.5).collect();
        assert!(!hits.is_empty());
        for &i in &hits {
            assert_eq!(points.stride[i], 8.0, "only the level whose size range holds the face");
            assert!((points.cx[i] - 32.0).abs() < 8.0 * grin_net::CENTER_RADIUS);
        }
        let smile = values(t.smile);
        let known = values(t.smile_known);
        assert!(hits.iter().all(|&i| smile[i] == 1.0 && known[i] == 1.0));
        // Distances of a positive point reach the box's sides.
        let d = t.distances.into_data().to_vec::<f32>().unwrap();
        let n = points.len();
        let i = hits[0];
        let (l, top, r, b) = (d[i], d[n + i], d[2 * n + i], d[3 * n + i]);
        assert!((points.cx[i] - l - 20.0).abs() < 1e-4 && (points.cy[i] - top - 20.0).abs() < 1e-4);
        assert!((points.cx[i] + r - 44.0).abs() < 1e-4 && (points.cy[i] + b - 44.0).abs() < 1e-4);
    }

    #[test]
    fn unknown_smiles_are_not_smile_targets_and_padding_is_nothing() {
        let (_, t) = run(&[[20.0, 20.0, 44.0, 44.0], [0.0, 0.0, 64.0, 64.0]], &[-1, -2]);
        let positive = values(t.positive);
        assert!(positive.iter().any(|&p| p > 0.5));
        assert!(values(t.smile_known).iter().all(|&k| k == 0.0), "unknown smile: no smile target");
        // The padded slot spans the image but claims nothing and ignores nothing.
        assert!(values(t.ignore).iter().all(|&v| v == 0.0));
    }

    #[test]
    fn points_inside_a_face_it_does_not_claim_are_background_not_ignored() {
        // A 40 px face centred at (32, 32): stride 8 claims the points within
        // 12 px of its centre; the rest of its box at stride 8 (its lower
        // half, say, where a mouth box would sit) and every point of the
        // other levels inside it are negatives: the face loss's background
        // term sees them (nothing is ignored), which is what teaches a
        // second, smaller box inside a face to stay quiet.
        let (points, t) = run(&[[12.0, 12.0, 52.0, 52.0]], &[0]);
        let (positive, ignore) = (values(t.positive), values(t.ignore));
        assert!(ignore.iter().all(|&v| v == 0.0), "no ignore region: nothing is left out of the loss");
        let inside_unclaimed: Vec<usize> = (0..points.len())
            .filter(|&i| (12.0..52.0).contains(&points.cx[i]) && (12.0..52.0).contains(&points.cy[i]))
            .filter(|&i| positive[i] == 0.0)
            .collect();
        let lower_half = inside_unclaimed.iter().filter(|&&i| points.stride[i] == 8.0 && points.cy[i] >= 40.0).count();
        assert!(lower_half > 0, "the face's lower half at stride 8 holds unclaimed points");
        assert!(inside_unclaimed.iter().all(|&i| positive[i] == 0.0 && ignore[i] == 0.0), "all of them background");
    }

    #[test]
    fn ignore_regions_mask_background_but_claim_no_point() {
        let (points, t) = run(&[[0.0, 0.0, 30.0, 30.0]], &[-3]);
        assert!(values(t.positive).iter().all(|&p| p == 0.0), "an ignore region is never a positive");
        for (i, v) in values(t.ignore).into_iter().enumerate() {
            let inside = points.cx[i] < 30.0 && points.cy[i] < 30.0;
            assert_eq!(v > 0.5, inside, "point {i} at ({}, {})", points.cx[i], points.cy[i]);
        }
    }

    #[test]
    fn a_hand_worked_pair_of_faces_gets_exactly_its_points_and_distances() {
        // 64x64: 8x8 points at stride 8 (indices 0..64), 4x4 at stride 16
        // (64..80), 2x2 at stride 32. Face A, 24 px centred on (32, 32), is
        // stride 8's only (sizes 0..=48); within 1.5 * 8 = 12 px of its
        // centre lie the points at 28 and 36 on both axes: rows/cols 3 and 4.
        // Face B, 32 px with the same centre, is on stride 8 too, but those
        // points take A (smaller); on stride 16 (sizes 32..=96) it claims
        // the points within 24 px: centres 24 and 40, rows/cols 1 and 2.
        let a = [20.0, 20.0, 44.0, 44.0];
        let b = [16.0, 16.0, 48.0, 48.0];
        let (points, t) = run(&[a, b], &[1, 0]);
        let n = points.len();
        assert_eq!(n, 64 + 16 + 4);
        let fine = [3 * 8 + 3, 3 * 8 + 4, 4 * 8 + 3, 4 * 8 + 4];
        let coarse = [64 + 4 + 1, 64 + 4 + 2, 64 + 8 + 1, 64 + 8 + 2];
        let positive = values(t.positive);
        let expected: Vec<usize> = fine.iter().chain(&coarse).copied().collect();
        assert_eq!((0..n).filter(|&i| positive[i] == 1.0).collect::<Vec<_>>(), expected);
        let (smile, known) = (values(t.smile), values(t.smile_known));
        assert!(fine.iter().all(|&i| smile[i] == 1.0 && known[i] == 1.0), "A smiles");
        assert!(coarse.iter().all(|&i| smile[i] == 0.0 && known[i] == 1.0), "B does not, and that is known");
        let d = t.distances.into_data().to_vec::<f32>().unwrap();
        let sides = |i: usize| [d[i], d[n + i], d[2 * n + i], d[3 * n + i]];
        // Point (28, 28) to A's sides; point (24, 24) to B's.
        assert_eq!(sides(fine[0]), [8.0, 8.0, 16.0, 16.0]);
        assert_eq!(sides(coarse[0]), [8.0, 8.0, 24.0, 24.0]);
        assert!(values(t.ignore).iter().all(|&v| v == 0.0));
    }
}
