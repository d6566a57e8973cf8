//! grin-model: the face + smile detector, generic over the Burn backend.
//!
//! Data flow: `Detector::forward` gives raw outputs at every point of three
//! levels; during training `targets::assign` + `loss::loss` turn labelled
//! boxes into a loss; at inference `decode::decode` turns one image's raw
//! outputs into detections, and `metrics::Evaluation` scores them.
//! The model runs on any [`DetectorBackend`]: Burn's backend plus the two
//! ops (depthwise conv, training BatchNorm) that grin supplies itself.

// Modules other crates name by path; the rest is re-exported below.
pub mod backend;
pub mod config;
mod decode;
mod detector;
pub mod file;
mod folded;
pub mod kernels;
pub mod layers;
mod loss;
mod metrics;
mod points;
mod targets;

pub use backend::{DetectorBackend, TrainBackend};
pub use config::ModelConfig;
pub use decode::{decode, iou, DecodeParams, Detection};
pub use detector::{Detector, DetectorOutput, DetectorSpec, OUTPUTS};
pub use file::{load_model, save_model};
pub use folded::{FoldedConv, FoldedDetector, FoldedHead};
pub use loss::{loss, LossParts, LossWeights};
pub use metrics::{Evaluation, FaceMatch, GroundTruth, PrPoint};
pub use points::Points;
pub use targets::{assign, PointTensors, Targets};

use burn::module::Module;
use burn::tensor::backend::Backend;

/// What `grin model-info` prints, computed from the real layers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub params: usize,
    /// 2 FLOPs per multiply-add, as papers count them.
    pub mflops: f64,
}

pub fn budget<B: Backend>(spec: &DetectorSpec, model: &Detector<B>) -> Budget {
    Budget { params: model.num_params(), mflops: 2.0 * model.macs(spec.height, spec.width) as f64 / 1e6 }
}

impl ModelConfig {
    pub fn decode_params(&self) -> DecodeParams {
        DecodeParams {
            score_threshold: self.score_threshold,
            nms_iou: self.nms_iou,
            max_detections: self.max_detections,
        }
    }
}

/// Runs the detector on a batch `[B, C, H, W]` (0..1) and decodes each image.
pub fn detect<B: DetectorBackend>(
    model: &Detector<B>,
    points: &Points,
    images: burn::tensor::Tensor<B, 4>,
    params: &DecodeParams,
) -> Vec<Vec<Detection>> {
    let raw = model.forward(images).raw;
    let [batch, outputs, n] = raw.dims();
    let values = raw.into_data().convert::<f32>().to_vec::<f32>().expect("f32 output");
    (0..batch).map(|b| decode(&values[b * outputs * n..(b + 1) * outputs * n], points, params)).collect()
}
