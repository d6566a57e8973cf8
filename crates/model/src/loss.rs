//! Focal loss on faces, GIoU on boxes, BCE on smiles at positives only, as
//! Burn's ops: what Burn's autodiff differentiates for the parity tests'
//! reference, and what evaluation scores with. The training steps state
//! the same terms per point with their gradients by hand (grin-cpu-step's
//! `loss`, grin-device-step's `cube::loss`).

use crate::detector::DetectorOutput;
use crate::targets::{PointTensors, Targets};
use burn::tensor::activation::{log_sigmoid, sigmoid};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

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

pub fn loss<B: Backend>(
    output: &DetectorOutput<B>,
    targets: &Targets<B>,
    points: &PointTensors<B>,
    w: LossWeights,
) -> LossParts<B> {
    let [batch, _, n] = output.raw.dims();
    // Normalising by the positive count keeps the loss scale independent of
    // how many faces a batch happens to hold.
    let positives = targets.positive.clone().sum().clamp_min(1.0);
    let (alpha, gamma) = (w.focal_alpha, w.focal_gamma);

    // Focal: -alpha (1-p)^gamma ln p at faces, -(1-alpha) p^gamma ln(1-p) on the background.
    let x = output.face_logits();
    let p = sigmoid(x.clone());
    let y = targets.positive.clone();
    let (lp, lq) = (log_sigmoid(x.clone()), log_sigmoid(x.neg()));
    let (q_face, q_back) = ((p.ones_like() - p.clone()).powf_scalar(gamma), p.powf_scalar(gamma));
    let background = (y.ones_like() - y.clone()) * (y.ones_like() - targets.ignore.clone());
    let at_face = y.clone() * q_face * alpha;
    let at_back = background * q_back * (1.0 - alpha);
    let face = -(at_face * lp + at_back * lq).sum() / positives.clone();

    let predicted = output.distances(points.strides_row.clone());
    // Targets of negative points are arbitrary: clamp so the masked-out
    // terms stay finite (0 * NaN would poison the sum).
    let target = targets.distances.clone().clamp(0.0, 1e6);
    let giou = giou(&predicted, &target);
    let y3 = y.reshape([batch, 1, n]);
    let boxes = ((giou.ones_like() - giou) * y3).sum() / positives;

    // Smiles: BCE at positives whose smile is known.
    let s = output.smile_logits();
    let (t, known) = (targets.smile.clone(), targets.smile_known.clone());
    let bce = -(t.clone() * log_sigmoid(s.clone()) + (t.ones_like() - t) * log_sigmoid(s.neg()));
    let known_count = known.clone().sum().clamp_min(1.0);
    let smile = (bce * known).sum() / known_count;

    let total = face.clone() + boxes.clone() * w.box_weight + smile.clone() * w.smile_weight;
    LossParts { total, face, boxes, smile }
}

/// GIoU of two boxes given as distances (left, top, right, bottom) from the
/// same point, `[B, 4, N]` -> `[B, 1, N]`.
fn giou<B: Backend>(predicted: &Tensor<B, 3>, target: &Tensor<B, 3>) -> Tensor<B, 3> {
    let side = |t: &Tensor<B, 3>, i: usize| t.clone().narrow(1, i, 1);
    let (pl, pt, pr, pb) = (side(predicted, 0), side(predicted, 1), side(predicted, 2), side(predicted, 3));
    let (tl, tt, tr, tb) = (side(target, 0), side(target, 1), side(target, 2), side(target, 3));
    let area_p = (pl.clone() + pr.clone()) * (pt.clone() + pb.clone());
    let area_t = (tl.clone() + tr.clone()) * (tt.clone() + tb.clone());
    let iw = pl.clone().min_pair(tl.clone()) + pr.clone().min_pair(tr.clone());
    let ih = pt.clone().min_pair(tt.clone()) + pb.clone().min_pair(tb.clone());
    let inter = iw * ih;
    let union = area_p + area_t - inter.clone() + 1e-6;
    let ew = pl.max_pair(tl) + pr.max_pair(tr);
    let eh = pt.max_pair(tt) + pb.max_pair(tb);
    let enclosing = ew * eh + 1e-6;
    inter / union.clone() - (enclosing.clone() - union) / enclosing
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;
    use grin_net::Points;

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
