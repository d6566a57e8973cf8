//! Scoring on whole held-out real photos, the way `grin-detect` sees them:
//! each photo letterboxed to the run size (a camera's frame), or at its own
//! size as `grin-detect` searches an image file; faces matched at IoU 0.5.
//!
//! Per source: face AP@0.5 with its precision-recall curve, recall by face
//! size at the deployment threshold, detections per image, and for
//! portrait sets the share of portraits whose face was found and the smile
//! accuracy. Faces below `min_face` px in the frame are ignore regions
//! (neither counted nor a false positive when detected), as WIDER FACE's
//! evaluation does for faces too small to label reliably.

use crate::device_batch::upload;
use crate::eval::{truth, AP_SCORE_FLOOR};
use crate::look::look_again;
use anyhow::{Context, Result};
use grin_features::{photos_of_split, FaceBox, FeatureConfig, HeldOutPhoto, HeldOutPhotos, HostBatch, Split};
use grin_image::OnBadSample;
use grin_model::{detect, Detector, DetectorBackend, Evaluation};
use grin_model::{PrPoint, LOOSE_MATCH_IOU};
use grin_net::NESTED_COVER;
use grin_net::{nested_in, DecodeParams, Detection, DetectorSpec};
use serde::{Deserialize, Serialize};

mod calibrate;
pub(crate) use calibrate::at_threshold;
pub use calibrate::{best_threshold, calibration_table, CALIBRATION_BETA};

/// Face-size buckets (longer box side at the run size, px), small to large.
pub(crate) const SIZE_BUCKETS: [(&str, f32, f32); 3] =
    [("small", 0.0, 24.0), ("medium", 24.0, 64.0), ("large", 64.0, f32::INFINITY)];

const BATCH: usize = 16;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizeRecall {
    pub bucket: String,
    pub faces: usize,
    /// Share found at the deployment threshold; `None` without faces.
    pub recall: Option<f32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhotoReport {
    pub source: String,
    pub images: usize,
    /// Photos left out under `on_bad_sample = "skip"`.
    pub skipped: usize,
    pub faces: usize,
    pub ignored_faces: usize,
    /// `None` when the split holds no face (AP is undefined there).
    pub face_ap: Option<f32>,
    /// AP with faces matched at IoU 0.3 ([`grin_model::LOOSE_MATCH_IOU`]),
    /// as YuNet's benchmark figures are compared.
    pub face_ap_loose: Option<f32>,
    pub recall_by_size: Vec<SizeRecall>,
    /// Recall of all faces at the deployment threshold.
    pub recall: Option<f32>,
    /// Detections at the deployment threshold per image.
    pub detections_per_image: f32,
    /// Detections at the deployment threshold per image that match no face
    /// at IoU 0.3 ([`LOOSE_MATCH_IOU`]: a box offset from a loosely drawn
    /// annotation is not false) and lie in no ignore region. Caltech leaves
    /// some faces unannotated, so some of these are real faces.
    #[serde(default)]
    pub false_per_image: f32,
    /// As `false_per_image`, less the detections on a face the source's
    /// second detector found (`crops.unannotated`, YuNet's): the false
    /// detections that are no unannotated face either. `None` without it.
    #[serde(default)]
    pub unconfirmed_false_per_image: Option<f32>,
    /// Detections at the deployment threshold per image with at least
    /// [`NESTED_COVER`] of their area inside a better-scoring detection
    /// (after decoding's own nested suppression, when the model has it on).
    #[serde(default)]
    pub nested_per_image: f32,
    /// Portrait sets: share of portraits whose face was found.
    pub found: Option<f32>,
    pub smile_accuracy: Option<f32>,
    pub smile_faces: usize,
    /// Matched faces with a smile label, `[truth][predicted]` (0 = not
    /// smiling, 1 = smiling).
    #[serde(default)]
    pub smile_confusion: [[usize; 2]; 2],
    #[serde(skip)]
    pub curve: Vec<PrPoint>,
    /// Each face's size bucket (an index into [`SIZE_BUCKETS`]) and the score
    /// of the detection that matched it: recall by size at any threshold.
    #[serde(skip)]
    pub face_hits: Vec<(usize, Option<f32>)>,
}

impl PhotoReport {
    /// Share of each size bucket's faces found by detections scoring at
    /// least `threshold`; `None` for a bucket without faces.
    pub(crate) fn recall_by_size_at(&self, threshold: f32) -> Vec<SizeRecall> {
        SIZE_BUCKETS
            .iter()
            .enumerate()
            .map(|(k, (bucket, _, _))| {
                let faces = self.face_hits.iter().filter(|(b, _)| *b == k);
                let n = faces.clone().count();
                let hit = faces.filter(|(_, s)| s.is_some_and(|s| s >= threshold)).count();
                SizeRecall { bucket: bucket.to_string(), faces: n, recall: (n > 0).then(|| hit as f32 / n as f32) }
            })
            .collect()
    }
}

/// Which held-out photos are scored, and in what frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhotoScoring {
    pub split: Split,
    /// At most this many photos per source (0: all of them).
    pub limit: usize,
    /// Faces under this many pixels in the frame are ignore regions.
    pub min_face: f32,
    /// `None`: each photo letterboxed to the run size, in batches. `Some`:
    /// each at `grin-detect`'s photo default for its own size
    /// ([`HeldOutPhotos::frame`], at most this many pixels), one a pass.
    pub own_size: Option<u64>,
}

impl PhotoScoring {
    /// The frame the photos are scored in, in words: `own size` or `WxH`.
    pub fn frame(&self, spec: &DetectorSpec) -> String {
        self.own_size.map_or_else(|| format!("{}x{}", spec.width, spec.height), |_| "own size".into())
    }
}

/// Scores `model` (run at `run_spec`'s size, or each photo at its own) on
/// the held-out photos of every real source in `features` that `scoring`
/// picks.
pub fn evaluate_split<B: DetectorBackend>(
    model: &Detector<B>,
    run_spec: &DetectorSpec,
    features: &FeatureConfig,
    scoring: PhotoScoring,
    device: &B::Device,
) -> Result<Vec<PhotoReport>> {
    let sets = photo_sets(features, scoring.split, scoring.limit)?;
    sets.iter().map(|set| score_set(model, run_spec, features, set, scoring, device)).collect()
}

/// [`photos_of_split`], each set's skipped annotation lines said: the
/// figures of fewer photos than the annotations list must say so.
pub(crate) fn photo_sets(features: &FeatureConfig, split: Split, limit: usize) -> Result<Vec<HeldOutPhotos>> {
    let sets = photos_of_split(features, split, limit)?;
    for set in &sets {
        if let Some(skipped) = &set.skipped {
            eprintln!("{}: {skipped} while its annotations were read (on_bad_sample = \"skip\")", set.name);
        }
    }
    Ok(sets)
}

/// Photos `chunk` of `set` letterboxed into one frame: the run size, or the
/// first photo's own (a chunk of one); photos that cannot be read are
/// skipped and counted under `on_bad_sample = "skip"`, else an error.
fn load_chunk(
    set: &HeldOutPhotos,
    chunk: &[usize],
    spec: &DetectorSpec,
    features: &FeatureConfig,
    own_size: Option<u64>,
) -> Result<(Vec<HeldOutPhoto>, usize)> {
    let (w, h, c) = (spec.width as u32, spec.height as u32, spec.channels as u32);
    let (mut samples, mut skipped) = (Vec::with_capacity(chunk.len()), 0);
    for &i in chunk {
        match set.frame(i, (w, h), own_size).and_then(|(w, h)| set.letterboxed_with_found(i, w, h, c)) {
            Ok(sample) => samples.push(sample),
            Err(e) if features.on_bad_sample == OnBadSample::Skip => {
                eprintln!("eval: skipped {e}");
                skipped += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("scoring {} held-out photos", set.name)),
        }
    }
    Ok((samples, skipped))
}

/// Asks for the working memory of one pass over `batch` before it runs, so
/// that frames the process cannot have maps for (`--run-size 4096x4096`
/// under a memory limit) are an error naming the size, not an abort (issue
/// 90, round 9). Burn's forward holds more maps at once than grin-detect's
/// banded pass, whose bound `Budget::activations` is: twice that a frame.
pub(crate) fn ask_for_pass(spec: &DetectorSpec, batch: &HostBatch) -> Result<()> {
    ask_for_frames(spec, (batch.width as usize, batch.height as usize), batch.len)
}

/// [`ask_for_pass`] for `frames` frames of `width`x`height`: a command
/// asks before it makes its outputs (round 10: a refused `grin mine` left
/// its empty `--out` folder).
pub(crate) fn ask_for_frames(spec: &DetectorSpec, (width, height): (usize, usize), frames: usize) -> Result<()> {
    let frame = grin_net::Budget::of(&DetectorSpec { width, height, ..spec.clone() }).activations;
    let floats = frame.saturating_mul(2).saturating_mul(frames.max(1));
    grin_image::reserved::<f32>(floats)
        .map(drop)
        .map_err(|e| anyhow::anyhow!("{frames} frame(s) of {width}x{height}: the pass {e}; give a smaller --run-size"))
}

fn score_set<B: DetectorBackend>(
    model: &Detector<B>,
    spec: &DetectorSpec,
    features: &FeatureConfig,
    set: &HeldOutPhotos,
    scoring: PhotoScoring,
    device: &B::Device,
) -> Result<PhotoReport> {
    let deploy = spec.model.decode_params();
    let params = DecodeParams { score_threshold: AP_SCORE_FLOOR.min(deploy.score_threshold), ..deploy };
    let mut evaluation = Evaluation::default();
    let mut loose = Evaluation::at_iou(LOOSE_MATCH_IOU);
    // The same, with the second detector's faces as ignore regions.
    let mut unconfirmed = Evaluation::at_iou(LOOSE_MATCH_IOU);
    let (mut images, mut skipped, mut ignored, mut shown, mut nested) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut face_hits = Vec::new();
    let (mut portraits_found, mut portraits) = (0usize, 0usize);
    let indices: Vec<usize> = (0..set.len()).collect();
    let per_pass = if scoring.own_size.is_some() { 1 } else { BATCH };
    let label = format!("scoring {} photos at {}", set.name, scoring.frame(spec));
    let mut progress = crate::progress::Progress::new(set.len(), label);
    // Kept across chunks; made again only when a chunk's frame differs (own size).
    let mut batch = HostBatch::with_capacity(per_pass, spec.width as u32, spec.height as u32, spec.channels as u32);
    for chunk in indices.chunks(per_pass) {
        progress.inc(chunk.len());
        let (samples, bad) = load_chunk(set, chunk, spec, features, scoring.own_size)?;
        skipped += bad;
        let Some(HeldOutPhoto { sample: first, .. }) = samples.first() else { continue };
        if (first.width, first.height) != (batch.width, batch.height) {
            batch = HostBatch::with_capacity(per_pass, first.width, first.height, first.channels);
        }
        batch.clear();
        for photo in &samples {
            batch.push(&photo.sample);
        }
        ask_for_pass(spec, &batch)?;
        let on_device = upload::<B>(&batch, device);
        let detections = detect(model, on_device.images, &params);
        for (photo, found) in samples.iter().zip(detections) {
            let found = &look_again(model, photo, found, &spec.model.second_look, &deploy, device);
            let (sample, second) = (&photo.sample, &photo.found);
            images += 1;
            let (faces, ground, regions) = truth(&sample.boxes, scoring.min_face);
            ignored += regions.len();
            let matches = evaluation.add_ignoring(found, &ground, &regions);
            loose.add_ignoring(found, &ground, &regions);
            let all_regions: Vec<[f32; 4]> =
                regions.iter().copied().chain(second.iter().map(FaceBox::corners)).collect();
            unconfirmed.add_ignoring(found, &ground, &all_regions);
            let deployed: Vec<&Detection> = found.iter().filter(|d| d.score >= deploy.score_threshold).collect();
            shown += deployed.len();
            nested += deployed
                .iter()
                .filter(|d| deployed.iter().any(|k| k.score > d.score && nested_in(d, k, NESTED_COVER, 1.0)))
                .count();
            let hit = |m: &grin_model::FaceMatch| m.detection.is_some_and(|(s, _)| s >= deploy.score_threshold);
            for (face, m) in faces.iter().zip(&matches) {
                let k = SIZE_BUCKETS.iter().position(|(_, lo, hi)| (*lo..*hi).contains(&side(face))).unwrap_or(2);
                face_hits.push((k, m.detection.map(|(score, _)| score)));
            }
            if set.portraits && !faces.is_empty() {
                portraits += 1;
                portraits_found += usize::from(matches.iter().all(hit));
            }
        }
    }
    progress.finish();
    let share = |hit: usize, of: usize| (of > 0).then(|| hit as f32 / of as f32);
    let total_hit = face_hits.iter().filter(|(_, s)| s.is_some_and(|s| s >= deploy.score_threshold)).count();
    let mut report = PhotoReport {
        source: set.name.to_string(),
        images,
        skipped,
        faces: evaluation.faces(),
        ignored_faces: ignored,
        face_ap: evaluation.average_precision(),
        face_ap_loose: loose.average_precision(),
        recall_by_size: Vec::new(),
        recall: share(total_hit, evaluation.faces()),
        detections_per_image: shown as f32 / images.max(1) as f32,
        false_per_image: loose.false_at(deploy.score_threshold) as f32 / images.max(1) as f32,
        unconfirmed_false_per_image: set
            .has_found()
            .then(|| unconfirmed.false_at(deploy.score_threshold) as f32 / images.max(1) as f32),
        nested_per_image: nested as f32 / images.max(1) as f32,
        found: if set.portraits { share(portraits_found, portraits) } else { None },
        smile_accuracy: evaluation.smile_accuracy(),
        smile_faces: evaluation.smile_matches(),
        smile_confusion: evaluation.smile_confusion(),
        curve: evaluation.precision_recall(),
        face_hits,
    };
    report.recall_by_size = report.recall_by_size_at(deploy.score_threshold);
    Ok(report)
}

fn side(b: &FaceBox) -> f32 {
    (b.x1 - b.x0).max(b.y1 - b.y0)
}

/// One line per source: `caltech  200 photos, 310 faces: AP 0.912 | recall ...`.
pub fn describe(r: &PhotoReport) -> String {
    let f = |v: Option<f32>| v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "n/a".into());
    let sizes: Vec<String> =
        r.recall_by_size.iter().map(|s| format!("{} {} ({})", s.bucket, f(s.recall), s.faces)).collect();
    let mut line = format!(
        "{:<15} {} photos, {} faces ({} ignored): AP@0.5 {} AP@0.3 {} | recall {} [{}] | {:.2} detections/image \
         ({:.2} false,{} {:.2} nested)",
        r.source,
        r.images,
        r.faces,
        r.ignored_faces,
        f(r.face_ap),
        f(r.face_ap_loose),
        f(r.recall),
        sizes.join(", "),
        r.detections_per_image,
        r.false_per_image,
        r.unconfirmed_false_per_image.map(|v| format!(" {v:.2} on no face YuNet found,")).unwrap_or_default(),
        r.nested_per_image
    );
    if let Some(found) = r.found {
        line += &format!(" | found {found:.3}");
    }
    if let Some(acc) = r.smile_accuracy {
        line += &format!(" | smile accuracy {acc:.3} ({} faces)", r.smile_faces);
    }
    if r.skipped > 0 {
        line += &format!(" | {} unreadable photos skipped", r.skipped);
    }
    line
}

#[cfg(test)]
pub(crate) mod tests;
