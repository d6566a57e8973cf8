//! Face AP (at IoU 0.5, or another match IoU) and smile accuracy on matched faces.

use grin_net::Detection;
use grin_terms::boxes::iou;

/// A labelled face; `smile` is `None` when unknown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroundTruth {
    pub bbox: [f32; 4],
    pub smile: Option<bool>,
}

/// Accumulates matches image by image; read the figures at the end.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// (score, true positive) of every detection.
    scored: Vec<(f32, bool)>,
    faces: usize,
    /// Matched faces with a known smile label, `[truth][predicted]`, 0 = not
    /// smiling, 1 = smiling (predicted: smile probability >= 0.5).
    smile: [[usize; 2]; 2],
    /// IoU a detection needs with a face to match it.
    match_iou: f32,
}

/// The match IoU of AP@0.5, what grin reports unless it says otherwise.
pub(crate) const MATCH_IOU: f32 = 0.5;

/// The looser match of AP@0.3: boxes drawn by another convention (YuNet's
/// around the whole head, the landmark rule's around the features) still
/// count as finding the face.
pub const LOOSE_MATCH_IOU: f32 = 0.3;

impl Default for Evaluation {
    fn default() -> Self {
        Evaluation::at_iou(MATCH_IOU)
    }
}

/// What happened to one labelled face in [`Evaluation::add`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceMatch {
    /// Score and smile probability of the detection that matched it.
    pub detection: Option<(f32, f32)>,
}

impl Evaluation {
    /// Matches faces at `match_iou` instead of `MATCH_IOU` (0.5).
    pub fn at_iou(match_iou: f32) -> Evaluation {
        Evaluation { scored: Vec::new(), faces: 0, smile: [[0; 2]; 2], match_iou }
    }

    /// Greedy matching, highest score first; each face matches at most once.
    pub fn add(&mut self, detections: &[Detection], faces: &[GroundTruth]) -> Vec<FaceMatch> {
        self.add_ignoring(detections, faces, &[])
    }

    /// As [`Evaluation::add`], with ignore regions: a detection that matches
    /// no face but overlaps an ignore box (IoU >= 0.5, or centre inside it)
    /// is neither a true nor a false positive, and the boxes are not faces.
    pub fn add_ignoring(
        &mut self,
        detections: &[Detection],
        faces: &[GroundTruth],
        ignore: &[[f32; 4]],
    ) -> Vec<FaceMatch> {
        let mut order: Vec<usize> = (0..detections.len()).collect();
        order.sort_by(|&a, &b| detections[b].score.total_cmp(&detections[a].score));
        let mut matches = vec![FaceMatch { detection: None }; faces.len()];
        for i in order {
            let d = &detections[i];
            let best = faces
                .iter()
                .enumerate()
                .filter(|(j, _)| matches[*j].detection.is_none())
                .map(|(j, f)| (j, iou(d.corners(), f.bbox)))
                .filter(|(_, o)| *o >= self.match_iou)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            match best {
                Some((j, _)) => {
                    matches[j].detection = Some((d.score, d.smile));
                    self.scored.push((d.score, true));
                    if let Some(smiling) = faces[j].smile {
                        self.smile[usize::from(smiling)][usize::from(d.smile >= 0.5)] += 1;
                    }
                }
                None if ignore.iter().any(|b| covers(b, d)) => {}
                None => self.scored.push((d.score, false)),
            }
        }
        self.faces += faces.len();
        matches
    }

    /// Area under the precision-recall curve with precision made monotone
    /// (all-point interpolation, as in PASCAL VOC 2010+); `None` when there
    /// was no face to find, where AP is undefined.
    pub fn average_precision(&self) -> Option<f32> {
        if self.faces == 0 {
            return None;
        }
        let curve = self.precision_recall();
        let mut ap = 0.0;
        let mut best_precision = 0.0f32;
        let mut previous_recall = curve.last().map(|c| c.recall).unwrap_or(0.0);
        for point in curve.iter().rev() {
            ap += (previous_recall - point.recall) * best_precision;
            best_precision = best_precision.max(point.precision);
            previous_recall = point.recall;
        }
        Some(ap + previous_recall * best_precision)
    }

    /// The precision-recall curve, one point per detection in score order.
    pub fn precision_recall(&self) -> Vec<PrPoint> {
        let mut scored = self.scored.clone();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let (mut tp, mut fp) = (0usize, 0usize);
        scored
            .iter()
            .map(|&(score, hit)| {
                if hit {
                    tp += 1
                } else {
                    fp += 1
                }
                PrPoint { score, recall: tp as f32 / self.faces.max(1) as f32, precision: tp as f32 / (tp + fp) as f32 }
            })
            .collect()
    }

    /// Share of matched faces with a known label whose smile was right;
    /// `None` when no such face was matched.
    pub fn smile_accuracy(&self) -> Option<f32> {
        let [[tn, _], [_, tp]] = self.smile;
        let total = self.smile_matches();
        (total > 0).then(|| (tn + tp) as f32 / total as f32)
    }

    /// The smile confusion matrix, `[truth][predicted]` (0 = not smiling,
    /// 1 = smiling), over matched faces with a known label.
    pub fn smile_confusion(&self) -> [[usize; 2]; 2] {
        self.smile
    }

    /// Detections scoring at least `threshold` that matched no face and lay
    /// in no ignore region: the false detections at that threshold.
    pub fn false_at(&self, threshold: f32) -> usize {
        self.scored.iter().filter(|(score, hit)| !hit && *score >= threshold).count()
    }

    pub fn faces(&self) -> usize {
        self.faces
    }

    pub fn smile_matches(&self) -> usize {
        self.smile.iter().flatten().sum()
    }
}

/// One point of a precision-recall curve: the figures at score >= `score`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PrPoint {
    pub score: f32,
    pub recall: f32,
    pub precision: f32,
}

/// A detection lies on an ignore box: IoU >= 0.5, or its centre inside.
fn covers(region: &[f32; 4], d: &Detection) -> bool {
    let (cx, cy) = ((d.x0 + d.x1) / 2.0, (d.y0 + d.y1) / 2.0);
    let inside = (region[0]..=region[2]).contains(&cx) && (region[1]..=region[3]).contains(&cy);
    inside || iou(d.corners(), *region) >= MATCH_IOU
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(b: [f32; 4], score: f32, smile: f32) -> Detection {
        Detection { x0: b[0], y0: b[1], x1: b[2], y1: b[3], score, smile }
    }

    fn face(b: [f32; 4], smile: Option<bool>) -> GroundTruth {
        GroundTruth { bbox: b, smile }
    }

    #[test]
    fn perfect_detections_score_ap_one_and_misses_lower_it() {
        let mut e = Evaluation::default();
        let m = e.add(&[det([0.0, 0.0, 10.0, 10.0], 0.9, 0.8)], &[face([0.0, 0.0, 10.0, 10.0], Some(true))]);
        assert_eq!(m[0].detection, Some((0.9, 0.8)));
        assert_eq!(e.average_precision(), Some(1.0));
        assert_eq!(e.smile_accuracy(), Some(1.0));
        // A second image: one face missed, one false positive above it.
        e.add(&[det([50.0, 50.0, 60.0, 60.0], 0.95, 0.1)], &[face([0.0, 0.0, 10.0, 10.0], None)]);
        let ap = e.average_precision().unwrap();
        // Ranked: FP (0.95), TP (0.9): precision 0.5 at recall 0.5 -> AP 0.25.
        assert!((ap - 0.25).abs() < 1e-6, "{ap}");
        let curve = e.precision_recall();
        assert_eq!(curve.len(), 2);
        assert_eq!((curve[1].recall, curve[1].precision), (0.5, 0.5));
    }

    #[test]
    fn ap_is_undefined_without_faces() {
        let mut e = Evaluation::default();
        e.add(&[], &[]);
        assert_eq!(e.average_precision(), None, "no faces: no AP, not a perfect one");
        e.add(&[det([0.0, 0.0, 5.0, 5.0], 0.9, 0.5)], &[]);
        assert_eq!(e.average_precision(), None);
    }

    #[test]
    fn each_face_matches_once_and_wrong_smiles_count() {
        let mut e = Evaluation::default();
        let dets = [det([0.0, 0.0, 10.0, 10.0], 0.9, 0.2), det([1.0, 0.0, 11.0, 10.0], 0.8, 0.9)];
        let m = e.add(&dets, &[face([0.0, 0.0, 10.0, 10.0], Some(true))]);
        assert_eq!(m[0].detection, Some((0.9, 0.2)), "the highest score matches");
        assert_eq!(e.smile_accuracy(), Some(0.0));
        assert_eq!(e.smile_matches(), 1);
        assert_eq!(e.smile_confusion(), [[0, 0], [1, 0]], "a smiling face called not smiling");
        // A not-smiling face called right, another called smiling.
        e.add(&[det([0.0, 0.0, 10.0, 10.0], 0.9, 0.1)], &[face([0.0, 0.0, 10.0, 10.0], Some(false))]);
        e.add(&[det([0.0, 0.0, 10.0, 10.0], 0.9, 0.7)], &[face([0.0, 0.0, 10.0, 10.0], Some(false))]);
        assert_eq!(e.smile_confusion(), [[1, 1], [1, 0]]);
        assert_eq!(e.smile_accuracy(), Some(1.0 / 3.0));
        let mut e = Evaluation::default();
        let m = e.add(&dets, &[face([0.0, 0.0, 10.0, 10.0], Some(true))]);
        assert_eq!(m[0].detection, Some((0.9, 0.2)));
        // The duplicate is a false positive: AP stays 1 (it ranks below the hit).
        assert_eq!(e.average_precision(), Some(1.0));
        assert_eq!(e.precision_recall().last().unwrap().precision, 0.5);
    }

    #[test]
    fn detections_on_ignore_regions_are_neither_hits_nor_false_positives() {
        let mut e = Evaluation::default();
        let dets = [det([100.0, 100.0, 108.0, 108.0], 0.99, 0.5), det([0.0, 0.0, 10.0, 10.0], 0.5, 0.5)];
        e.add_ignoring(&dets, &[face([0.0, 0.0, 10.0, 10.0], None)], &[[98.0, 98.0, 110.0, 110.0]]);
        assert_eq!(e.average_precision(), Some(1.0), "the ignore-region detection does not count");
        assert_eq!(e.faces(), 1, "ignore regions are not faces");
        assert_eq!(e.precision_recall().len(), 1);
    }

    #[test]
    fn ap_interpolates_precision_over_a_hand_worked_ranking() {
        // Three faces; ranked detections: hit, false positive, hit; the
        // third face is missed. PR points: (1/3, 1), (1/3, 1/2), (2/3, 2/3).
        // Monotone precision is 1 up to recall 1/3 and 2/3 up to 2/3:
        // AP = 1/3 * 1 + 1/3 * 2/3 = 5/9.
        let faces = [0.0, 20.0, 40.0].map(|x| face([x, 0.0, x + 10.0, 10.0], None));
        let dets = [
            det([0.0, 0.0, 10.0, 10.0], 0.9, 0.5),
            det([100.0, 100.0, 110.0, 110.0], 0.8, 0.5),
            det([21.0, 0.0, 31.0, 10.0], 0.7, 0.5),
        ];
        let mut e = Evaluation::default();
        let m = e.add(&dets, &faces);
        assert_eq!(m.iter().map(|f| f.detection.is_some()).collect::<Vec<_>>(), [true, true, false]);
        let curve: Vec<(f32, f32)> = e.precision_recall().iter().map(|p| (p.recall, p.precision)).collect();
        assert_eq!(curve, [(1.0 / 3.0, 1.0), (1.0 / 3.0, 0.5), (2.0 / 3.0, 2.0 / 3.0)]);
        let ap = e.average_precision().unwrap();
        assert!((ap - 5.0 / 9.0).abs() < 1e-6, "{ap}");
    }
}
