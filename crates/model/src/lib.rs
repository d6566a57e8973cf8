//! grin-model: the face + smile detector in Burn, generic over the backend,
//! built from grin-net's statement of it (the architecture, the weights
//! file, the decoding: imported from grin-net by every crate, not
//! re-exported here).
//!
//! Data flow: [`Detector::forward`] gives raw outputs at every point of
//! three levels; during training [`assign`] + [`loss()`] turn labelled boxes
//! into a loss; at inference [`decode()`] turns one image's raw outputs into
//! detections, and [`Evaluation`] scores them. [`Detector::weights`] hands
//! the trained weights to grin-net, whose file and folded engine need no Burn.
//! The model runs on any [`DetectorBackend`]: Burn's backend plus the two
//! ops (depthwise conv, training BatchNorm) that grin supplies itself.
//!
//! The two training engines build on this crate and it on neither: grin's
//! CPU step (grin-cpu-step) and the device step on CUDA and wgpu
//! (grin-device-step) take the layer list and wiring ([`graph`]), the loss's
//! rule and the running averages ([`running`]) from here. grin-detect needs
//! none of it: it reads grin-net's folded weights, without Burn.
//!
//! It may not depend on a training engine, the trainer or the feature
//! pipeline, nor on a GPU backend beyond naming its type (features `cuda`,
//! `wgpu`).

// Modules named by path (by other crates, or this one's tests and
// examples); the rest is re-exported below.
pub mod backend;
mod detector;
pub mod file;
pub mod fixtures;
pub mod graph;
mod layers;
mod loss;
mod metrics;
mod phase;
pub mod running;
mod seeded;
mod targets;

pub use backend::{values_of, DetectorBackend};
pub use detector::level_shift::{parse_level_thresholds, scales_for_box, shift_between, LevelShift};
pub use detector::{detect, Detector, DetectorOutput, HeadSpan, InitDetector, Trainable};
pub use file::{load_model, save_model};
pub use layers::{batch_norm, depthwise3x3, folded_conv};
pub use loss::{loss, LossParts, LossWeights};
pub use metrics::{Evaluation, FaceMatch, GroundTruth, PrPoint, LOOSE_MATCH_IOU};
pub use phase::Phase;
pub use seeded::seeded;
pub use targets::{assign, PointTensors, Targets};

// What were integration tests, in the lib's test binary: each test binary
// links Burn and monomorphises the detector again (CI minutes, issue 78).
#[cfg(test)]
mod tests {
    mod backend_ops;
    mod seeded;
}
