//! Focal loss on faces, GIoU on boxes, BCE on smiles at positives only.
//!
//! One statement of the terms ([`terms`]), which can also give the gradient
//! of the total with respect to the raw output, taken by hand: on backends
//! that train through Burn's autodiff with grin's own backward ops (CUDA,
//! wgpu) the loss is then one autodiff op
//! ([`DetectorBackend::own_loss_backward`]), where Burn records some sixty
//! small ops forward and replays twice as many backward, each a cost to the
//! host on a step that the host bounds.

use crate::backend::DetectorBackend;
use crate::detector::DetectorOutput;
use crate::targets::{PointTensors, Targets};
use burn::tensor::activation::{log_sigmoid, sigmoid};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use grin_terms::output::{DISTANCE, FACE, LOG_DISTANCE_RANGE, OUTPUTS, SMILE};

/// The loss terms' settings: a config's `[train.loss]` table as it is.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LossWeights {
    pub focal_alpha: f32,
    pub focal_gamma: f32,
    pub box_weight: f32,
    pub smile_weight: f32,
}

impl Default for LossWeights {
    fn default() -> Self {
        LossWeights { focal_alpha: 0.25, focal_gamma: 2.0, box_weight: 2.0, smile_weight: 1.0 }
    }
}

/// The total to back-propagate and its parts, each a one-element tensor
/// (read them only at log intervals: reading forces a device sync).
#[derive(Debug, Clone)]
pub struct LossParts<B: Backend> {
    pub total: Tensor<B, 1>,
    pub face: Tensor<B, 1>,
    pub boxes: Tensor<B, 1>,
    pub smile: Tensor<B, 1>,
}

pub fn loss<B: DetectorBackend>(
    output: &DetectorOutput<B>,
    targets: &Targets<B>,
    points: &PointTensors<B>,
    w: LossWeights,
) -> LossParts<B> {
    if !B::DEVICE_AUTODIFF {
        return terms(&output.raw, targets, points, w, false).0;
    }
    // Computed apart from the graph; the one op then ties the total to the raw output.
    let (parts, gradient) = terms(&output.raw.clone().detach(), targets, points, w, true);
    let gradient = gradient.expect("asked for");
    let prim = |t: Tensor<B, 3>| t.into_primitive().tensor();
    let total = B::own_loss_backward(parts.total.into_primitive().tensor(), prim(output.raw.clone()), prim(gradient));
    LossParts { total: Tensor::from_primitive(TensorPrimitive::Float(total)), ..parts }
}

/// The loss and, with `gradient`, d(total)/d(raw) (`[batch, OUTPUTS,
/// points]`) from the same intermediate values. Public for the test that
/// checks the hand-taken gradient against Burn's autodiff of the value.
pub fn loss_with_gradient<B: Backend>(
    raw: &Tensor<B, 3>,
    targets: &Targets<B>,
    points: &PointTensors<B>,
    w: LossWeights,
) -> (LossParts<B>, Tensor<B, 3>) {
    let (parts, gradient) = terms(raw, targets, points, w, true);
    (parts, gradient.expect("asked for"))
}

fn terms<B: Backend>(
    raw: &Tensor<B, 3>,
    targets: &Targets<B>,
    points: &PointTensors<B>,
    w: LossWeights,
    gradient: bool,
) -> (LossParts<B>, Option<Tensor<B, 3>>) {
    let [batch, _, n] = raw.dims();
    let output = DetectorOutput { raw: raw.clone() };
    // Normalising by the positive count keeps the loss scale independent of
    // how many faces a batch happens to hold.
    let positives = targets.positive.clone().sum().clamp_min(1.0);
    let (alpha, gamma) = (w.focal_alpha, w.focal_gamma);

    // Focal: -alpha (1-p)^gamma ln p at faces, -(1-alpha) p^gamma ln(1-p) on the background.
    let x = output.face_logits();
    let p = sigmoid(x.clone());
    let y = targets.positive.clone();
    let (lp, lq) = (log_sigmoid(x.clone()), log_sigmoid(x.neg()));
    let (q_face, q_back) = ((p.ones_like() - p.clone()).powf_scalar(gamma), p.clone().powf_scalar(gamma));
    let background = (y.ones_like() - y.clone()) * (y.ones_like() - targets.ignore.clone());
    let at_face = y.clone() * q_face * alpha;
    let at_back = background * q_back * (1.0 - alpha);
    let face = -(at_face.clone() * lp.clone() + at_back.clone() * lq.clone()).sum() / positives.clone();

    let predicted = output.distances(points.strides_row.clone());
    // Targets of negative points are arbitrary: clamp so the masked-out
    // terms stay finite (0 * NaN would poison the sum).
    let target = targets.distances.clone().clamp(0.0, 1e6);
    let giou = Giou::of(&predicted, &target);
    let y3 = y.clone().reshape([batch, 1, n]);
    let boxes = ((giou.value.ones_like() - giou.value.clone()) * y3.clone()).sum() / positives.clone();

    // Smiles: BCE at positives whose smile is known.
    let s = output.smile_logits();
    let (t, known) = (targets.smile.clone(), targets.smile_known.clone());
    let bce = -(t.clone() * log_sigmoid(s.clone()) + (t.ones_like() - t.clone()) * log_sigmoid(s.clone().neg()));
    let known_count = known.clone().sum().clamp_min(1.0);
    let smile = (bce * known.clone()).sum() / known_count.clone();

    let total = face.clone() + boxes.clone() * w.box_weight + smile.clone() * w.smile_weight;
    let parts = LossParts { total, face, boxes, smile };
    if !gradient {
        return (parts, None);
    }
    // d/dx of the focal terms: -alpha (1-p)^gamma ((1-p) - gamma p ln p) and
    // -(1-alpha) p^gamma (gamma (1-p) ln(1-p) - p).
    let one_minus_p = p.ones_like() - p.clone();
    let d_face = -(at_face * (one_minus_p.clone() - p.clone() * lp * gamma) + at_back * (one_minus_p * lq * gamma - p))
        / positives.clone().reshape([1, 1]);
    // The clamp passes the gradient inside its range only.
    let (lo, hi) = LOG_DISTANCE_RANGE;
    let r = raw.clone().narrow(1, DISTANCE, 4);
    let inside = r.clone().greater_equal_elem(lo).float() * r.lower_equal_elem(hi).float();
    let d_boxes =
        -giou.gradient(&predicted, &target) * predicted * inside * y3 * w.box_weight / positives.reshape([1, 1, 1]);
    let d_smile = (sigmoid(s) - t) * known * w.smile_weight / known_count.reshape([1, 1]);
    let mut channels =
        [(FACE, d_face.reshape([batch, 1, n])), (DISTANCE, d_boxes), (SMILE, d_smile.reshape([batch, 1, n]))];
    channels.sort_by_key(|(c, _)| *c);
    debug_assert_eq!(channels.iter().map(|(_, t)| t.dims()[1]).sum::<usize>(), OUTPUTS, "every output channel once");
    (parts, Some(Tensor::cat(channels.into_iter().map(|(_, t)| t).collect(), 1)))
}

/// GIoU of two boxes given as distances (left, top, right, bottom) from the
/// same point, `[B, 4, N]` -> `[B, 1, N]`, with what its gradient reads.
struct Giou<B: Backend> {
    value: Tensor<B, 3>,
    inter: Tensor<B, 3>,
    union: Tensor<B, 3>,
    enclosing: Tensor<B, 3>,
    /// The intersection's, the enclosing box's and the predicted box's
    /// width and height.
    iw: Tensor<B, 3>,
    ih: Tensor<B, 3>,
    ew: Tensor<B, 3>,
    eh: Tensor<B, 3>,
    width: Tensor<B, 3>,
    height: Tensor<B, 3>,
}

impl<B: Backend> Giou<B> {
    fn of(predicted: &Tensor<B, 3>, target: &Tensor<B, 3>) -> Self {
        let side = |t: &Tensor<B, 3>, i: usize| t.clone().narrow(1, i, 1);
        let (pl, pt, pr, pb) = (side(predicted, 0), side(predicted, 1), side(predicted, 2), side(predicted, 3));
        let (tl, tt, tr, tb) = (side(target, 0), side(target, 1), side(target, 2), side(target, 3));
        let (width, height) = (pl.clone() + pr.clone(), pt.clone() + pb.clone());
        let area_t = (tl.clone() + tr.clone()) * (tt.clone() + tb.clone());
        let iw = pl.clone().min_pair(tl.clone()) + pr.clone().min_pair(tr.clone());
        let ih = pt.clone().min_pair(tt.clone()) + pb.clone().min_pair(tb.clone());
        let inter = iw.clone() * ih.clone();
        let union = width.clone() * height.clone() + area_t - inter.clone() + 1e-6;
        let ew = pl.max_pair(tl) + pr.max_pair(tr);
        let eh = pt.max_pair(tt) + pb.max_pair(tb);
        let enclosing = ew.clone() * eh.clone() + 1e-6;
        let value = inter.clone() / union.clone() - (enclosing.clone() - union.clone()) / enclosing.clone();
        Giou { value, inter, union, enclosing, iw, ih, ew, eh, width, height }
    }

    /// d(GIoU)/d(predicted), `[B, 4, N]`. GIoU = inter / union - 1 + union /
    /// enclosing, so d GIoU = (d inter * union - inter * d union) / union^2 +
    /// (d union * enclosing - union * d enclosing) / enclosing^2; a side
    /// moves the intersection while it is the nearer one, the enclosing box
    /// while it is the farther.
    fn gradient(&self, predicted: &Tensor<B, 3>, target: &Tensor<B, 3>) -> Tensor<B, 3> {
        // A horizontal side (left, right) scales heights, a vertical one widths.
        let across =
            |h: &Tensor<B, 3>, w: &Tensor<B, 3>| Tensor::cat(vec![h.clone(), w.clone(), h.clone(), w.clone()], 1);
        let d_inter = predicted.clone().lower(target.clone()).float() * across(&self.ih, &self.iw);
        let d_union = across(&self.height, &self.width) - d_inter.clone();
        let d_enclosing = predicted.clone().greater(target.clone()).float() * across(&self.eh, &self.ew);
        let (union, enclosing) = (&self.union, &self.enclosing);
        (d_inter * union.clone() - d_union.clone() * self.inter.clone()) / union.clone().square()
            + (d_union * enclosing.clone() - d_enclosing * union.clone()) / enclosing.clone().square()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::points::Points;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    const WEIGHTS: LossWeights =
        LossWeights { focal_alpha: 0.25, focal_gamma: 2.0, box_weight: 2.0, smile_weight: 0.5 };

    fn tensor<const D: usize>(values: &[f32], shape: [usize; D]) -> Tensor<B, D> {
        Tensor::from_data(TensorData::new(values.to_vec(), shape), &Default::default())
    }

    /// Two stride-8 points: point 0 is a face's, point 1 background (or
    /// ignored). Every output is 0: face probability 0.5, a predicted box
    /// of 8 px to each side, smile probability 0.5.
    fn parts(ignore_background: bool) -> [f32; 4] {
        let points = Points {
            width: 16,
            height: 8,
            levels: vec![(1, 2)],
            cx: vec![4.0, 12.0],
            cy: vec![4.0, 4.0],
            stride: vec![8.0, 8.0],
            size_lo: vec![0.0, 0.0],
            size_hi: vec![48.0, 48.0],
        };
        let table = PointTensors::<B>::new(&points, &Default::default());
        let output = DetectorOutput { raw: tensor(&[0.0; 12], [1, 6, 2]) };
        let targets = Targets {
            positive: tensor(&[1.0, 0.0], [1, 2]),
            // Point 0's face: 8 px left and up, 24 px right and down.
            // Point 1's distances are junk, as on a real negative.
            distances: tensor(&[8.0, -5.0, 8.0, -5.0, 24.0, 1e9, 24.0, 0.0], [1, 4, 2]),
            smile: tensor(&[1.0, 0.0], [1, 2]),
            smile_known: tensor(&[1.0, 0.0], [1, 2]),
            ignore: tensor(&[0.0, if ignore_background { 1.0 } else { 0.0 }], [1, 2]),
        };
        let l = loss(&output, &targets, &table, WEIGHTS);
        [l.total, l.face, l.boxes, l.smile].map(|t| t.into_scalar())
    }

    #[test]
    fn each_part_matches_its_formula_on_a_hand_worked_case() {
        let ln2 = std::f32::consts::LN_2;
        let [total, face, boxes, smile] = parts(false);
        // Focal, p = 0.5 both: the face adds 0.25 * 0.5^2 * ln 2, the
        // background 0.75 * 0.5^2 * ln 2; one positive to divide by.
        assert!((face - 0.25 * ln2).abs() < 1e-6, "{face}");
        // Predicted 16x16 box inside the 32x32 target: IoU 256 / 1024, the
        // enclosing box is the target, so GIoU 0.25 and the loss 0.75.
        assert!((boxes - 0.75).abs() < 1e-5, "{boxes}");
        // BCE of p = 0.5 against a smile: ln 2.
        assert!((smile - ln2).abs() < 1e-6, "{smile}");
        assert!((total - (face + 2.0 * boxes + 0.5 * smile)).abs() < 1e-6, "{total}");
    }

    #[test]
    fn an_ignored_point_leaves_the_face_loss() {
        let [_, face, boxes, smile] = parts(true);
        assert!((face - 0.0625 * std::f32::consts::LN_2).abs() < 1e-6, "only the face's own term: {face}");
        assert!((boxes - 0.75).abs() < 1e-5 && (smile - std::f32::consts::LN_2).abs() < 1e-6);
    }
}
