//! Raw outputs to boxes: threshold, box from distances, greedy NMS.
//! Plain slices in, so the Pi binary and the trainer share one decoder.

use crate::detector::OUTPUTS;
use crate::points::Points;
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
    pub fn iou(&self, other: &Detection) -> f32 {
        iou([self.x0, self.y0, self.x1, self.y1], [other.x0, other.y0, other.x1, other.y1])
    }
}

pub fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = iw * ih;
    let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeParams {
    pub score_threshold: f32,
    pub nms_iou: f32,
    pub max_detections: usize,
    /// Longest face side (px) one pass keeps; larger faces are left to a
    /// pass on the frame at half size (see `pyramid`). 0: one pass.
    pub pyramid_above: f32,
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `raw`: one image's output, `[OUTPUTS, N]` row-major, as the detector
/// produces it (face logit, log-distances / stride, smile logit).
pub fn decode(raw: &[f32], points: &Points, params: &DecodeParams) -> Vec<Detection> {
    let n = points.len();
    assert_eq!(raw.len(), OUTPUTS * n, "output does not match the points");
    // Compare logits, not probabilities: one exp per survivor, not per point.
    let p = params.score_threshold.clamp(1e-6, 1.0 - 1e-6);
    let logit_threshold = (p / (1.0 - p)).ln();
    let (w, h) = (points.width as f32, points.height as f32);
    let found: Vec<Detection> = (0..n)
        .filter(|&i| raw[i] > logit_threshold)
        .map(|i| {
            let d = |k: usize| raw[k * n + i].clamp(-4.0, 5.0).exp() * points.stride[i];
            Detection {
                x0: (points.cx[i] - d(1)).clamp(0.0, w),
                y0: (points.cy[i] - d(2)).clamp(0.0, h),
                x1: (points.cx[i] + d(3)).clamp(0.0, w),
                y1: (points.cy[i] + d(4)).clamp(0.0, h),
                score: sigmoid(raw[i]),
                smile: sigmoid(raw[5 * n + i]),
            }
        })
        .collect();
    nms(found, params)
}

/// Greedy non-maximum suppression: best first, each kept unless it overlaps
/// a better one by more than `params.nms_iou`; at most `max_detections`.
pub(crate) fn nms(mut found: Vec<Detection>, params: &DecodeParams) -> Vec<Detection> {
    found.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection> = Vec::new();
    for d in found {
        if kept.len() == params.max_detections {
            break;
        }
        if kept.iter().all(|k| k.iou(&d) <= params.nms_iou) {
            kept.push(d);
        }
    }
    kept
}
