//! Target assignment and the loss with its gradient, written out per point:
//! the same rule as [`grin_model::assign`] and the same terms as
//! [`grin_model::loss()`] (focal loss on faces, GIoU on boxes, BCE on known
//! smiles, each normalised as there), with the derivatives taken by hand.
//! As tensor ops, these were some sixty small Burn ops forward and as many
//! backward on `[batch, points, slots]` tensors; here they are one pass per
//! image.

use grin_model::LossWeights;
use grin_net::{Points, CENTER_RADIUS};
use grin_terms::label::LABEL_IGNORE;
use grin_terms::output::{DISTANCE, FACE, LOG_DISTANCE_RANGE, OUTPUTS, SMILE};
use rayon::prelude::*;

/// The loss and its parts, as [`grin_model::LossParts`] holds them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LossValues {
    pub total: f32,
    pub face: f32,
    pub boxes: f32,
    pub smile: f32,
}

/// One batch's labelled boxes: `boxes` `[batch, slots, 4]` (x0, y0, x1, y1
/// pixels), `labels` `[batch, slots]` with the codes of `assign`.
#[derive(Clone, Copy)]
pub struct Labels<'a> {
    pub boxes: &'a [f32],
    pub labels: &'a [i64],
    pub slots: usize,
}

/// What a point is trained towards.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    /// Positive for the face in this slot: distances (l, t, r, b) and label.
    Face {
        distances: [f32; 4],
        label: i64,
    },
    Background,
    /// Inside an ignore region: in neither term of the face loss.
    Ignored,
}

/// The rule of `assign`: a point is positive for the smallest face whose box
/// holds it, whose centre is within `CENTER_RADIUS` strides, whose size its
/// level owns, and whose slot is filled; else ignored inside an ignore
/// region; else background.
fn assign(points: &Points, i: usize, labels: &Labels, b: usize) -> Target {
    let (cx, cy, stride) = (points.cx[i], points.cy[i], points.stride[i]);
    let (lo, hi) = (points.size_lo[i], points.size_hi[i].min(1e9));
    let radius = stride * CENTER_RADIUS;
    let mut best: Option<(f32, [f32; 4], i64)> = None;
    let mut ignored = false;
    for slot in 0..labels.slots {
        let label = labels.labels[b * labels.slots + slot];
        let [x0, y0, x1, y1]: [f32; 4] = labels.boxes[(b * labels.slots + slot) * 4..][..4].try_into().unwrap();
        let d = [cx - x0, cy - y0, x1 - cx, y1 - cy];
        let inside = d[0].min(d[1]).min(d[2].min(d[3])) > 0.0;
        if label == LABEL_IGNORE as i64 {
            ignored |= inside;
            continue;
        }
        let (w, h) = (x1 - x0, y1 - y0);
        let size = w.max(h);
        let near = (cx - (x0 + x1) * 0.5).abs() < radius && (cy - (y0 + y1) * 0.5).abs() < radius;
        let candidate = label > -2 && inside && near && size >= lo && size <= hi;
        // The smallest face wins; on a tie, the first slot (argmin's rule).
        if candidate && best.is_none_or(|(area, _, _)| w * h < area) {
            best = Some((w * h, d, label));
        }
    }
    match best {
        Some((_, distances, label)) => Target::Face { distances, label },
        None if ignored => Target::Ignored,
        None => Target::Background,
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// ln(sigmoid(x)), without overflow for large |x|.
fn log_sigmoid(x: f32) -> f32 {
    -((-x).max(0.0) + (-x.abs()).exp().ln_1p())
}

/// 1 - GIoU of two boxes given as distances (l, t, r, b) from one point,
/// and its gradient with respect to the predicted distances.
fn giou_loss(p: [f32; 4], t: [f32; 4]) -> (f32, [f32; 4]) {
    let [pl, pt, pr, pb] = p;
    let [tl, tt, tr, tb] = t;
    let (iw, ih) = (pl.min(tl) + pr.min(tr), pt.min(tt) + pb.min(tb));
    let inter = iw * ih;
    let union = (pl + pr) * (pt + pb) + (tl + tr) * (tt + tb) - inter + 1e-6;
    let (ew, eh) = (pl.max(tl) + pr.max(tr), pt.max(tt) + pb.max(tb));
    let enclosing = ew * eh + 1e-6;
    let giou = inter / union - (enclosing - union) / enclosing;
    // giou = inter / union - 1 + union / enclosing, so
    // d giou = (d inter * union - inter * d union) / union^2
    //        + (d union * enclosing - union * d enclosing) / enclosing^2.
    let mut grad = [0.0f32; 4];
    for (k, g) in grad.iter_mut().enumerate() {
        // Horizontal sides (l, r) scale the heights; vertical ones the widths.
        let (own, target, across, inter_across, enclose_across) = match k {
            0 => (pl, tl, pt + pb, ih, eh),
            1 => (pt, tt, pl + pr, iw, ew),
            2 => (pr, tr, pt + pb, ih, eh),
            _ => (pb, tb, pl + pr, iw, ew),
        };
        let d_inter = if own < target { inter_across } else { 0.0 };
        let d_union = across - d_inter;
        let d_enclosing = if own > target { enclose_across } else { 0.0 };
        let d_giou = (d_inter * union - inter * d_union) / (union * union)
            + (d_union * enclosing - union * d_enclosing) / (enclosing * enclosing);
        *g = -d_giou;
    }
    (1.0 - giou, grad)
}

/// Per image: the loss sums (face, box, smile) and the gradient of each sum
/// with respect to the raw outputs `[points][OUTPUTS]` (scaled afterwards).
fn image_terms(
    raw: &dyn Fn(usize, usize) -> f32,
    targets: &[Target],
    points: &Points,
    w: LossWeights,
    grad: &mut [f32],
) -> [f32; 3] {
    let (alpha, gamma) = (w.focal_alpha, w.focal_gamma);
    let mut sums = [0.0f32; 3];
    for (i, target) in targets.iter().enumerate() {
        let g = &mut grad[i * OUTPUTS..][..OUTPUTS];
        g.fill(0.0);
        let x = raw(FACE, i);
        let p = sigmoid(x);
        match *target {
            Target::Face { distances, label } => {
                // -alpha (1-p)^gamma ln p; d/dx = -alpha (1-p)^gamma ((1-p) - gamma p ln p).
                let (q, lp) = ((1.0 - p).powf(gamma), log_sigmoid(x));
                sums[0] -= alpha * q * lp;
                g[FACE] = -alpha * q * ((1.0 - p) - gamma * p * lp);
                // Distances: exp of the clamped raw value, times the stride.
                let mut predicted = [0.0f32; 4];
                let mut through = [0.0f32; 4];
                for k in 0..4 {
                    let r = raw(DISTANCE + k, i);
                    let (lo, hi) = LOG_DISTANCE_RANGE;
                    predicted[k] = r.clamp(lo, hi).exp() * points.stride[i];
                    // The clamp passes the gradient inside its range only.
                    through[k] = if (lo..=hi).contains(&r) { predicted[k] } else { 0.0 };
                }
                let (l, dl) = giou_loss(predicted, distances.map(|d| d.clamp(0.0, 1e6)));
                sums[1] += l;
                for k in 0..4 {
                    g[DISTANCE + k] = dl[k] * through[k];
                }
                if label >= 0 {
                    let s = raw(SMILE, i);
                    let t = if label == 1 { 1.0 } else { 0.0 };
                    sums[2] -= t * log_sigmoid(s) + (1.0 - t) * log_sigmoid(-s);
                    g[SMILE] = sigmoid(s) - t;
                }
            }
            Target::Background => {
                // -(1-alpha) p^gamma ln(1-p); d/dx = -(1-alpha) p^gamma (gamma (1-p) ln(1-p) - p).
                let (q, lq) = (p.powf(gamma), log_sigmoid(-x));
                sums[0] -= (1.0 - alpha) * q * lq;
                g[FACE] = -(1.0 - alpha) * q * (gamma * (1.0 - p) * lq - p);
            }
            Target::Ignored => {}
        }
    }
    sums
}

/// Scratch kept across steps: each point's target and its raw gradient.
#[derive(Debug, Default)]
pub(crate) struct LossScratch {
    targets: Vec<Target>,
    grad: Vec<f32>,
}

/// The loss of a batch whose raw outputs are `levels` (per level
/// `[OUTPUTS][batch][level points]`), writing d(total)/d(raw) into `grads` (same
/// layout).
pub(crate) fn loss(
    scratch: &mut LossScratch,
    levels: &[&[f32]],
    grads: &mut [&mut [f32]],
    batch: usize,
    points: &Points,
    labels: Labels,
    w: LossWeights,
) -> LossValues {
    let n = points.len();
    assert_eq!(labels.boxes.len(), batch * labels.slots * 4, "boxes size");
    assert_eq!(labels.labels.len(), batch * labels.slots, "labels size");
    let sizes: Vec<usize> = points.levels.iter().map(|(h, w)| h * w).collect();
    assert_eq!(sizes.iter().sum::<usize>(), n);
    // Global point index -> (level, index within the level).
    let mut owner = Vec::with_capacity(n);
    for (level, &size) in sizes.iter().enumerate() {
        owner.extend((0..size).map(|p| (level, p)));
    }

    scratch.targets.resize(batch * n, Target::Background);
    scratch.grad.resize(batch * n * OUTPUTS, 0.0);
    scratch.targets.par_chunks_mut(n).enumerate().for_each(|(b, t)| {
        for (i, target) in t.iter_mut().enumerate() {
            *target = assign(points, i, &labels, b);
        }
    });
    let positives = scratch.targets.iter().filter(|t| matches!(t, Target::Face { .. })).count();
    let known = scratch.targets.iter().filter(|t| matches!(t, Target::Face { label, .. } if *label >= 0)).count();

    let sums: Vec<[f32; 3]> = scratch
        .targets
        .par_chunks(n)
        .zip(scratch.grad.par_chunks_mut(n * OUTPUTS))
        .enumerate()
        .map(|(b, (targets, grad))| {
            let raw = |k: usize, i: usize| {
                let (level, p) = owner[i];
                levels[level][(k * batch + b) * sizes[level] + p]
            };
            image_terms(&raw, targets, points, w, grad)
        })
        .collect();
    let total = |k: usize| sums.iter().map(|s| s[k]).sum::<f32>();
    // Normalised as `loss()` does: by the positives (at least one), smiles
    // by the known ones.
    let (per_positive, per_known) = (1.0 / positives.max(1) as f32, 1.0 / known.max(1) as f32);
    let values = LossValues {
        face: total(0) * per_positive,
        boxes: total(1) * per_positive,
        smile: total(2) * per_known,
        total: 0.0,
    };
    let values =
        LossValues { total: values.face + w.box_weight * values.boxes + w.smile_weight * values.smile, ..values };

    let scale = [per_positive, w.box_weight * per_positive, w.smile_weight * per_known];
    for (level, g) in grads.iter_mut().enumerate() {
        assert_eq!(g.len(), OUTPUTS * batch * sizes[level], "raw gradient size");
    }
    for b in 0..batch {
        for (i, &(level, p)) in owner.iter().enumerate() {
            let from = &scratch.grad[(b * n + i) * OUTPUTS..][..OUTPUTS];
            for (k, &v) in from.iter().enumerate() {
                let s = scale[match k {
                    0 => 0,
                    1..=4 => 1,
                    _ => 2,
                }];
                grads[level][(k * batch + b) * sizes[level] + p] = v * s;
            }
        }
    }
    values
}
