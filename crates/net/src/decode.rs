//! Raw outputs to boxes: threshold, box from distances, greedy NMS.
//! Plain slices in, so the Pi binary and the trainer share one decoder.

use crate::points::Points;
use grin_terms::boxes::{area, intersection, iou};
use grin_terms::output::{DISTANCE, FACE, LOG_DISTANCE_RANGE, OUTPUTS, SMILE};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    pub x0: f32,
    pub y0: f32,
    pub x1: f32,
    pub y1: f32,
    /// Face probability.
    pub score: f32,
    /// Smile probability.
    pub smile: f32,
}

impl Detection {
    /// Its corners `[x0, y0, x1, y1]`, as [`grin_terms::boxes`] takes a box.
    pub fn corners(&self) -> [f32; 4] {
        [self.x0, self.y0, self.x1, self.y1]
    }

    pub fn iou(&self, other: &Detection) -> f32 {
        iou(self.corners(), other.corners())
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeParams {
    pub score_threshold: f32,
    pub nms_iou: f32,
    /// Nested boxes: a box whose intersection with a better one covers at
    /// least this share of its own area is suppressed ([`nested_in`]); 0
    /// turns it off.
    pub nested_cover: f32,
    /// ... when it is at most this share of the better box's area.
    pub nested_area: f32,
    pub max_detections: usize,
    /// Longest face side (px) one pass keeps; larger faces are left to a
    /// pass on the frame at half size (see `pyramid`). 0: one pass.
    pub pyramid_above: f32,
    /// Boxes scoring at least this vote on the smile of the box that
    /// suppresses them (see [`nms`]). The deployment threshold: it stays
    /// when an evaluation lowers `score_threshold` to draw its curve, so the
    /// smiles it scores are the ones a deployed detector reports.
    pub smile_vote_floor: f32,
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The inverse of [`sigmoid`], with `p` kept off 0 and 1 so it stays finite.
fn logit(p: f32) -> f32 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    (p / (1.0 - p)).ln()
}

/// `raw`: one image's output, `[OUTPUTS, N]` row-major, as the detector
/// produces it (face logit, log-distances / stride, smile logit).
pub fn decode(raw: &[f32], points: &Points, params: &DecodeParams) -> Vec<Detection> {
    let n = points.len();
    assert_eq!(raw.len(), OUTPUTS * n, "output does not match the points");
    // Compare logits, not probabilities: one exp per survivor, not per point.
    let logit_threshold = logit(params.score_threshold);
    let (w, h) = (points.width as f32, points.height as f32);
    let found: Vec<Detection> = (0..n)
        .filter(|&i| raw[FACE * n + i] > logit_threshold)
        .map(|i| {
            let (lo, hi) = LOG_DISTANCE_RANGE;
            // Edge `k`: left, top, right, bottom.
            let d = |k: usize| raw[(DISTANCE + k) * n + i].clamp(lo, hi).exp() * points.stride[i];
            Detection {
                x0: (points.cx[i] - d(0)).clamp(0.0, w),
                y0: (points.cy[i] - d(1)).clamp(0.0, h),
                x1: (points.cx[i] + d(2)).clamp(0.0, w),
                y1: (points.cy[i] + d(3)).clamp(0.0, h),
                score: sigmoid(raw[FACE * n + i]),
                smile: sigmoid(raw[SMILE * n + i]),
            }
        })
        .collect();
    nms(found, params)
}

/// The share of its own area a box must have inside a better one to count
/// as nested in it: what `grin eval` counts, and the default of
/// `model.nested_cover`.
pub const NESTED_COVER: f32 = 0.7;
/// The default of `model.nested_area`: a nested box is suppressed only when
/// it is at most half the better box's area, so two real faces that overlap
/// (similar sizes) are never one nested in the other.
pub const NESTED_AREA: f32 = 0.5;

/// Whether `inner` lies mostly inside `outer`: their intersection covers at
/// least `cover` of `inner`'s area, and `inner` is at most `share` of
/// `outer`'s. A face's mouth or nose box (IoU 0.2-0.4 with the face, so
/// greedy NMS keeps it) is the case it is for.
pub fn nested_in(inner: &Detection, outer: &Detection, cover: f32, share: f32) -> bool {
    let (own, theirs) = (area(inner.corners()), area(outer.corners()));
    own > 0.0 && intersection(inner.corners(), outer.corners()) >= cover * own && own <= share * theirs
}

/// Greedy non-maximum suppression: best first, each kept unless it overlaps
/// a better one by more than `params.nms_iou` or is nested in one
/// ([`nested_in`], unless `params.nested_cover` is 0); at most
/// `max_detections`.
///
/// A kept box's smile is then the score-weighted mean, in logits, of its
/// own and those of the confident boxes it suppresses (score at least
/// `smile_vote_floor`): neighbouring cells see the mouth from slightly
/// different places, and their mean is a steadier reading than one cell's.
/// Measured on the validation portraits with the shipped model: smile
/// accuracy 0.906 -> 0.912 at 320x240 and 0.907 -> 0.912 at 640x480, at no
/// cost to boxes or scores.
pub fn nms(mut found: Vec<Detection>, params: &DecodeParams) -> Vec<Detection> {
    found.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection> = Vec::new();
    for d in &found {
        if kept.len() == params.max_detections {
            break;
        }
        let nested =
            |k: &Detection| params.nested_cover > 0.0 && nested_in(d, k, params.nested_cover, params.nested_area);
        if kept.iter().all(|k| k.iou(d) <= params.nms_iou && !nested(k)) {
            kept.push(*d);
        }
    }
    for k in &mut kept {
        k.smile = voted_smile(k, &found, params);
    }
    kept
}

fn voted_smile(kept: &Detection, found: &[Detection], params: &DecodeParams) -> f32 {
    let (weight, sum) = found
        .iter()
        .filter(|d| d.score >= params.smile_vote_floor && kept.iou(d) > params.nms_iou)
        .fold((0.0f32, 0.0f32), |(w, s), d| (w + d.score, s + d.score * logit(d.smile)));
    if weight > 0.0 {
        sigmoid(sum / weight)
    } else {
        kept.smile
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(floor: f32) -> DecodeParams {
        DecodeParams {
            score_threshold: 0.05,
            nms_iou: 0.4,
            nested_cover: NESTED_COVER,
            nested_area: NESTED_AREA,
            max_detections: 10,
            pyramid_above: 0.0,
            smile_vote_floor: floor,
        }
    }

    fn boxed(x0: f32, y0: f32, x1: f32, y1: f32, score: f32) -> Detection {
        Detection { x0, y0, x1, y1, score, smile: 0.5 }
    }

    #[test]
    fn a_box_nested_in_a_better_one_is_suppressed_and_overlapping_faces_are_not() {
        let face = boxed(100.0, 100.0, 160.0, 170.0, 0.9);
        // A mouth box: inside the face, a fifth of its area, IoU 0.2 (greedy NMS at 0.4 keeps it).
        let mouth = boxed(115.0, 140.0, 145.0, 168.0, 0.7);
        assert!(face.iou(&mouth) < 0.4);
        // Two real faces overlapping, as in a group photo: similar sizes, one a little behind.
        let behind = boxed(140.0, 95.0, 195.0, 160.0, 0.8);
        // A small real face beside the big one, only partly over its box.
        let beside = boxed(150.0, 80.0, 180.0, 110.0, 0.6);
        let kept = nms(vec![mouth, face, behind, beside], &params(0.5));
        let scores: Vec<f32> = kept.iter().map(|d| d.score).collect();
        assert_eq!(scores, [0.9, 0.8, 0.6], "the mouth goes, every face stays");
        // Turned off, the mouth box stays.
        let off = DecodeParams { nested_cover: 0.0, ..params(0.5) };
        assert_eq!(nms(vec![mouth, face], &off).len(), 2);
        // A nested box scoring higher than its container is not suppressed by it.
        let loud = Detection { score: 0.95, ..mouth };
        assert_eq!(nms(vec![loud, face], &params(0.5)).len(), 2);
    }

    fn face(x0: f32, score: f32, smile: f32) -> Detection {
        Detection { x0, y0: 0.0, x1: x0 + 20.0, y1: 20.0, score, smile }
    }

    #[test]
    fn suppressed_confident_boxes_vote_on_the_smile_weighted_by_score() {
        // Two boxes of one face (IoU 0.82) and a face of its own.
        let found = vec![face(2.0, 0.6, 0.7), face(0.0, 0.9, 0.4), face(50.0, 0.8, 0.9)];
        let kept = nms(found, &params(0.5));
        assert_eq!(kept.len(), 2);
        let expected = sigmoid((0.9 * logit(0.4) + 0.6 * logit(0.7)) / 1.5);
        assert!((kept[0].smile - expected).abs() < 1e-5, "{} vs {expected}", kept[0].smile);
        assert_eq!((kept[0].x0, kept[0].score), (0.0, 0.9), "the box and score stay the best one's");
        assert!((kept[1].smile - 0.9).abs() < 1e-5, "a lone face keeps its own smile");
    }

    #[test]
    fn boxes_under_the_floor_do_not_vote_and_a_kept_box_under_it_keeps_its_smile() {
        let found = vec![face(0.0, 0.9, 0.4), face(2.0, 0.3, 0.99)];
        assert!((nms(found, &params(0.5))[0].smile - 0.4).abs() < 1e-5);
        let weak = vec![face(0.0, 0.2, 0.3), face(2.0, 0.1, 0.99)];
        assert!((nms(weak, &params(0.5))[0].smile - 0.3).abs() < 1e-5);
    }
}
