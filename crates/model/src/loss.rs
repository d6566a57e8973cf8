//! Focal loss on faces, GIoU on boxes, BCE on smiles at positives only.

use crate::detector::DetectorOutput;
use crate::targets::{PointTensors, Targets};
use burn::tensor::activation::{log_sigmoid, sigmoid};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

#[derive(Debug, Clone, Copy)]
pub struct LossWeights {
    pub focal_alpha: f32,
    pub focal_gamma: f32,
    pub box_weight: f32,
    pub smile_weight: f32,
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
    // Normalising by the positive count keeps the loss scale independent of
    // how many faces a batch happens to hold.
    let positives = targets.positive.clone().sum().clamp_min(1.0);

    let logits = output.face_logits();
    let p = sigmoid(logits.clone());
    let y = targets.positive.clone();
    let pos_term = y.clone() * (p.ones_like() - p.clone()).powf_scalar(w.focal_gamma) * log_sigmoid(logits.clone());
    let background = (y.ones_like() - y.clone()) * (y.ones_like() - targets.ignore.clone());
    let neg_term = background * p.powf_scalar(w.focal_gamma) * log_sigmoid(logits.neg());
    let face = -(pos_term * w.focal_alpha + neg_term * (1.0 - w.focal_alpha)).sum() / positives.clone();

    let pred = output.distances(points.strides_row.clone());
    let boxes = (giou_loss(pred, targets.distances.clone()) * y).sum() / positives;

    let s = output.smile_logits();
    let known = targets.smile_known.clone();
    let t = targets.smile.clone();
    let bce = -(t.clone() * log_sigmoid(s.clone()) + (t.ones_like() - t) * log_sigmoid(s.neg()));
    let smile = (bce * known.clone()).sum() / known.sum().clamp_min(1.0);

    let total = face.clone() + boxes.clone() * w.box_weight + smile.clone() * w.smile_weight;
    LossParts { total, face, boxes, smile }
}

/// 1 - GIoU of two boxes given as distances from the same point, `[B, 4, N]` -> `[B, N]`.
fn giou_loss<B: Backend>(pred: Tensor<B, 3>, target: Tensor<B, 3>) -> Tensor<B, 2> {
    let [b, _, n] = pred.dims();
    let side = |t: &Tensor<B, 3>, i: usize| t.clone().narrow(1, i, 1).reshape([b, n]);
    let (pl, pt, pr, pb) = (side(&pred, 0), side(&pred, 1), side(&pred, 2), side(&pred, 3));
    // Targets of negative points are arbitrary: clamp so the masked-out
    // terms stay finite (0 * NaN would poison the sum).
    let target = target.clamp(0.0, 1e6);
    let (tl, tt, tr, tb) = (side(&target, 0), side(&target, 1), side(&target, 2), side(&target, 3));
    let area_p = (pl.clone() + pr.clone()) * (pt.clone() + pb.clone());
    let area_t = (tl.clone() + tr.clone()) * (tt.clone() + tb.clone());
    let iw = pl.clone().min_pair(tl.clone()) + pr.clone().min_pair(tr.clone());
    let ih = pt.clone().min_pair(tt.clone()) + pb.clone().min_pair(tb.clone());
    let inter = iw * ih;
    let union = area_p + area_t - inter.clone() + 1e-6;
    let iou = inter / union.clone();
    let ew = pl.max_pair(tl) + pr.max_pair(tr);
    let eh = pt.max_pair(tt) + pb.max_pair(tb);
    let enclosing = ew * eh + 1e-6;
    let giou = iou - (enclosing.clone() - union) / enclosing;
    giou.ones_like() - giou
}
