//! One point's part of the loss, as the CPU step states it
//! (grin-cpu-step's `loss`): its target by the assignment rule, its terms
//! (focal, GIoU, BCE) and their gradients with respect to its raw outputs.

use super::LossShape;
use cubecl::prelude::*;
use grin_net::CENTER_RADIUS;
use grin_terms::label::{LABEL_IGNORE, LABEL_PADDING};
use grin_terms::output::{DISTANCE, FACE, LOG_DISTANCE_RANGE, OUTPUTS, SMILE};

#[derive(CubeType)]
struct PointTarget {
    /// 1 for a face's point, else 0.
    positive: f32,
    /// 1 inside an ignore region and no face's point.
    ignored: f32,
    /// The face's slot label (valid when positive).
    label: i32,
    distances: Array<f32>,
}

/// The CPU step's `assign`: the smallest face whose box holds the point,
/// whose centre is within `CENTER_RADIUS` strides, whose size the level
/// owns and whose slot is filled; on a tie, the first slot.
#[cube]
fn assign(
    boxes: &Array<f32>,
    labels: &Array<i32>,
    table: &PointTableArgs,
    b: usize,
    n: usize,
    slots: usize,
) -> PointTarget {
    let (cx, cy, stride) = (table.cx[n], table.cy[n], table.stride[n]);
    let (lo, hi) = (table.size_lo[n], f32::min(table.size_hi[n], 1e9));
    let radius = stride * CENTER_RADIUS;
    let mut best_area = f32::new(0.0);
    let mut found = false;
    let mut ignored = false;
    let mut label = 0i32;
    let mut distances = Array::<f32>::new(4usize);
    #[unroll]
    for k in 0..4usize {
        distances[k] = 0.0;
    }
    for slot in 0..slots {
        let l = labels[b * slots + slot];
        let at = (b * slots + slot) * 4;
        let (x0, y0, x1, y1) = (boxes[at], boxes[at + 1], boxes[at + 2], boxes[at + 3]);
        let (dl, dt, dr, db) = (cx - x0, cy - y0, x1 - cx, y1 - cy);
        let inside = f32::min(f32::min(dl, dt), f32::min(dr, db)) > 0.0;
        if l == comptime!(LABEL_IGNORE as i32) {
            ignored = ignored || inside;
        } else {
            let (w, h) = (x1 - x0, y1 - y0);
            let size = f32::max(w, h);
            let near = f32::abs(cx - (x0 + x1) * 0.5) < radius && f32::abs(cy - (y0 + y1) * 0.5) < radius;
            let candidate = l > comptime!(LABEL_PADDING as i32) && inside && near && size >= lo && size <= hi;
            if candidate && (!found || w * h < best_area) {
                found = true;
                best_area = w * h;
                label = l;
                distances[0] = dl;
                distances[1] = dt;
                distances[2] = dr;
                distances[3] = db;
            }
        }
    }
    PointTarget { positive: select(found, 1.0, 0.0), ignored: select(!found && ignored, 1.0, 0.0), label, distances }
}

/// The point table as kernel arguments.
#[derive(CubeLaunch, CubeType)]
pub(super) struct PointTableArgs {
    pub cx: Array<f32>,
    pub cy: Array<f32>,
    pub stride: Array<f32>,
    pub size_lo: Array<f32>,
    pub size_hi: Array<f32>,
}

#[cube]
fn log_sigmoid(x: f32) -> f32 {
    -(f32::max(-x, 0.0) + f32::ln(1.0 + f32::exp(-f32::abs(x))))
}

#[cube]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + f32::exp(-x))
}

/// One point's raw outputs at (image b, point n) of `[batch, OUTPUTS, points]`.
#[cube]
fn raw_at(raw: &Array<f32>, b: usize, k: usize, n: usize, points: usize) -> f32 {
    raw[(b * comptime!(OUTPUTS) + k) * points + n]
}

/// GIoU's value (as `1 - GIoU`) and, with `gradient`, d(1 - GIoU)/d(p) in
/// `grad`, for distances `p` and `t` (l, t, r, b) from one point.
#[cube]
fn giou_loss(p: &Array<f32>, t: &Array<f32>, grad: &mut Array<f32>) -> f32 {
    let (pl, pt, pr, pb) = (p[0], p[1], p[2], p[3]);
    let (tl, tt, tr, tb) = (t[0], t[1], t[2], t[3]);
    let iw = f32::min(pl, tl) + f32::min(pr, tr);
    let ih = f32::min(pt, tt) + f32::min(pb, tb);
    let inter = iw * ih;
    let union = (pl + pr) * (pt + pb) + (tl + tr) * (tt + tb) - inter + 1e-6;
    let ew = f32::max(pl, tl) + f32::max(pr, tr);
    let eh = f32::max(pt, tt) + f32::max(pb, tb);
    let enclosing = ew * eh + 1e-6;
    let giou = inter / union - (enclosing - union) / enclosing;
    #[unroll]
    for k in 0..4usize {
        // Horizontal sides (l, r) scale the heights; vertical ones the widths.
        let horizontal = k % 2 == 0;
        let across = select(horizontal, pt + pb, pl + pr);
        let inter_across = select(horizontal, ih, iw);
        let enclose_across = select(horizontal, eh, ew);
        let d_inter = select(p[k] < t[k], inter_across, 0.0);
        let d_union = across - d_inter;
        let d_enclosing = select(p[k] > t[k], enclose_across, 0.0);
        let d_giou = (d_inter * union - inter * d_union) / (union * union)
            + (d_union * enclosing - union * d_enclosing) / (enclosing * enclosing);
        grad[k] = -d_giou;
    }
    1.0 - giou
}

/// A point's loss terms (`SUMS` of them: positive, known, focal, box,
/// smile, unnormalised) and, with `draw`, its unscaled gradient per output
/// channel written into `g`.
#[cube]
pub(super) fn point_terms(
    raw: &Array<f32>,
    boxes: &Array<f32>,
    labels: &Array<i32>,
    table: &PointTableArgs,
    s: LossShape,
    b: usize,
    n: usize,
    terms: &mut Array<f32>,
    g: &mut Array<f32>,
) {
    let target = assign(boxes, labels, table, b, n, s.slots);
    #[unroll]
    for k in 0..5usize {
        terms[k] = 0.0;
    }
    #[unroll]
    for k in 0..6usize {
        g[k] = 0.0;
    }
    let x = raw_at(raw, b, comptime!(FACE), n, s.points);
    let p = sigmoid(x);
    if target.positive > 0.0 {
        terms[0] = 1.0;
        let q = f32::powf(1.0 - p, s.gamma);
        let lp = log_sigmoid(x);
        terms[2] = -s.alpha * q * lp;
        g[comptime!(FACE)] = -s.alpha * q * ((1.0 - p) - s.gamma * p * lp);
        let mut predicted = Array::<f32>::new(4usize);
        let mut through = Array::<f32>::new(4usize);
        let mut clamped = Array::<f32>::new(4usize);
        let mut dl = Array::<f32>::new(4usize);
        let (lo, hi) = comptime!(LOG_DISTANCE_RANGE);
        #[unroll]
        for k in 0..4usize {
            let r = raw_at(raw, b, comptime!(DISTANCE) + k, n, s.points);
            predicted[k] = f32::exp(f32::clamp(r, lo, hi)) * table.stride[n];
            // The clamp passes the gradient inside its range only.
            through[k] = select(r >= lo && r <= hi, predicted[k], 0.0);
            clamped[k] = f32::clamp(target.distances[k], 0.0, 1e6);
        }
        terms[3] = giou_loss(&predicted, &clamped, &mut dl);
        #[unroll]
        for k in 0..4usize {
            g[comptime!(DISTANCE) + k] = dl[k] * through[k];
        }
        if target.label >= 0 {
            terms[1] = 1.0;
            let sm = raw_at(raw, b, comptime!(SMILE), n, s.points);
            let t = select(target.label == 1, 1.0f32, 0.0);
            terms[4] = -(t * log_sigmoid(sm) + (1.0 - t) * log_sigmoid(-sm));
            g[comptime!(SMILE)] = sigmoid(sm) - t;
        }
    } else if target.ignored == 0.0 {
        let q = f32::powf(p, s.gamma);
        let lq = log_sigmoid(-x);
        terms[2] = -(1.0 - s.alpha) * q * lq;
        g[comptime!(FACE)] = -(1.0 - s.alpha) * q * (s.gamma * (1.0 - p) * lq - p);
    }
}
