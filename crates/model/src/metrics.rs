//! Face AP@0.5 and smile accuracy on matched faces.

use crate::decode::{iou, Detection};

/// A labelled face; `smile` is `None` when unknown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroundTruth {
    pub bbox: [f32; 4],
    pub smile: Option<bool>,
}

/// Accumulates matches image by image; read the figures at the end.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// (score, true positive) of every detection.
    scored: Vec<(f32, bool)>,
    faces: usize,
    smile_correct: usize,
    smile_total: usize,
}

pub const MATCH_IOU: f32 = 0.5;

impl Evaluation {
    /// Greedy matching, highest score first; each face matches at most once.
    pub fn add(&mut self, detections: &[Detection], faces: &[GroundTruth]) {
        let mut order: Vec<usize> = (0..detections.len()).collect();
        order.sort_by(|&a, &b| detections[b].score.total_cmp(&detections[a].score));
        let mut taken = vec![false; faces.len()];
        for i in order {
            let d = &detections[i];
            let best = faces
                .iter()
                .enumerate()
                .filter(|(j, _)| !taken[*j])
                .map(|(j, f)| (j, iou([d.x0, d.y0, d.x1, d.y1], f.bbox)))
                .filter(|(_, o)| *o >= MATCH_IOU)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            match best {
                Some((j, _)) => {
                    taken[j] = true;
                    self.scored.push((d.score, true));
                    if let Some(smiling) = faces[j].smile {
                        self.smile_total += 1;
                        self.smile_correct += usize::from((d.smile >= 0.5) == smiling);
                    }
                }
                None => self.scored.push((d.score, false)),
            }
        }
        self.faces += faces.len();
    }

    /// Area under the precision-recall curve with precision made monotone
    /// (all-point interpolation, as in PASCAL VOC 2010+).
    pub fn average_precision(&self) -> f32 {
        if self.faces == 0 {
            return if self.scored.iter().any(|s| !s.1) { 0.0 } else { 1.0 };
        }
        let mut scored = self.scored.clone();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let (mut tp, mut fp) = (0usize, 0usize);
        let mut curve = Vec::with_capacity(scored.len());
        for (_, hit) in &scored {
            if *hit {
                tp += 1
            } else {
                fp += 1
            }
            curve.push((tp as f32 / self.faces as f32, tp as f32 / (tp + fp) as f32));
        }
        let mut ap = 0.0;
        let mut best_precision = 0.0f32;
        let mut previous_recall = curve.last().map(|c| c.0).unwrap_or(0.0);
        for &(recall, precision) in curve.iter().rev() {
            ap += (previous_recall - recall) * best_precision;
            best_precision = best_precision.max(precision);
            previous_recall = recall;
        }
        ap + previous_recall * best_precision
    }

    /// Share of matched faces with a known label whose smile was right;
    /// `None` when no such face was matched.
    pub fn smile_accuracy(&self) -> Option<f32> {
        (self.smile_total > 0).then(|| self.smile_correct as f32 / self.smile_total as f32)
    }

    pub fn faces(&self) -> usize {
        self.faces
    }

    pub fn smile_matches(&self) -> usize {
        self.smile_total
    }
}
