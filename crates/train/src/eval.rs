//! Held-out scoring: face AP@0.5 and smile accuracy on matched faces.

use crate::device_batch::upload;
use anyhow::Result;
use grin_features::{FaceBox, FeatureConfig, HostBatch, Pipeline, Split};
use grin_model::{detect, Detector, DetectorBackend, Evaluation, GroundTruth};
use grin_net::{DecodeParams, DetectorSpec};
use serde::Serialize;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct EvalReport {
    pub images: usize,
    pub faces: usize,
    /// `None` when the held-out scenes hold no face (AP is undefined there).
    pub face_ap: Option<f32>,
    /// `None` when no face with a known smile label was matched.
    pub smile_accuracy: Option<f32>,
}

/// AP needs the whole precision-recall curve, so detections are kept down
/// to a low score rather than the deployment threshold.
pub(crate) const AP_SCORE_FLOOR: f32 = 0.05;

/// A sample's boxes split for scoring: the faces (at least `min_face` px on
/// their longer side) with their ground truth, and the ignore regions
/// (`Smile::Ignore` boxes and smaller faces).
pub(crate) fn truth(boxes: &[FaceBox], min_face: f32) -> (Vec<&FaceBox>, Vec<GroundTruth>, Vec<[f32; 4]>) {
    let (faces, ignore): (Vec<&FaceBox>, Vec<&FaceBox>) =
        boxes.iter().partition(|b| b.smile.is_face() && (b.x1 - b.x0).max(b.y1 - b.y0) >= min_face);
    let truth = faces.iter().map(|b| GroundTruth { bbox: b.corners(), smile: b.smile.smiling() }).collect();
    let regions = ignore.iter().map(|b| b.corners()).collect();
    (faces, truth, regions)
}

/// Scores `model` on the first `samples` scenes of the test split.
pub fn evaluate<B: DetectorBackend>(
    model: &Detector<B>,
    spec: &DetectorSpec,
    features: &FeatureConfig,
    samples: usize,
    device: &B::Device,
) -> Result<EvalReport> {
    evaluate_split(model, spec, features, Split::Test, samples, device)
}

/// As [`evaluate`], on any split's scenes.
pub fn evaluate_split<B: DetectorBackend>(
    model: &Detector<B>,
    spec: &DetectorSpec,
    features: &FeatureConfig,
    split: Split,
    samples: usize,
    device: &B::Device,
) -> Result<EvalReport> {
    let report = evaluate_split_until(model, spec, features, split, samples, device, &|| false)?;
    Ok(report.expect("never stopped"))
}

/// [`evaluate_split`], given up (None) between two batches once `stop`
/// says so: a run's validation is answered to an interrupt within a batch,
/// not at its end (round 13 of issue 90: 58 s after a SIGTERM).
pub(crate) fn evaluate_split_until<B: DetectorBackend>(
    model: &Detector<B>,
    spec: &DetectorSpec,
    features: &FeatureConfig,
    split: Split,
    samples: usize,
    device: &B::Device,
    stop: &dyn Fn() -> bool,
) -> Result<Option<EvalReport>> {
    let pipeline = Pipeline::new(features, split)?;
    let params = DecodeParams { score_threshold: AP_SCORE_FLOOR, ..spec.model.decode_params() };
    let mut evaluation = Evaluation::default();
    let mut batch = HostBatch::with_capacity(16, features.width, features.height, features.channels);
    let indices: Vec<u64> = (0..samples as u64).collect();
    let mut progress = crate::progress::Progress::new(samples, format!("scoring {} scenes", split.name()));
    for chunk in indices.chunks(16) {
        if stop() {
            progress.finish();
            return Ok(None);
        }
        batch.clear();
        pipeline.fill_batch(chunk, &mut batch)?;
        progress.inc(chunk.len());
        let on_device = upload::<B>(&batch, device);
        let detections = detect(model, on_device.images, &params);
        for (i, found) in detections.iter().enumerate() {
            let sample = batch.sample(i);
            let (_, faces, regions) = truth(&sample.boxes, 0.0);
            evaluation.add_ignoring(found, &faces, &regions);
        }
    }
    progress.finish();
    Ok(Some(EvalReport {
        images: samples,
        faces: evaluation.faces(),
        face_ap: evaluation.average_precision(),
        smile_accuracy: evaluation.smile_accuracy(),
    }))
}
