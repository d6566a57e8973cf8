//! grin-model: the face + smile detector in Burn, generic over the backend,
//! built from grin-net's statement of it (the architecture, the weights
//! file, the decoding, re-exported here).
//!
//! Data flow: [`Detector::forward`] gives raw outputs at every point of
//! three levels; during training [`assign`] + [`loss()`] turn labelled boxes
//! into a loss; at inference [`decode()`] turns one image's raw outputs into
//! detections, and [`Evaluation`] scores them. [`Detector::weights`] hands
//! the trained weights to grin-net, whose file and folded engine need no Burn.
//! The model runs on any [`DetectorBackend`]: Burn's backend plus the two
//! ops (depthwise conv, training BatchNorm) that grin supplies itself.

// Modules named by path (by other crates, or this one's tests and
// examples); the rest is re-exported below.
pub mod backend;
pub mod cpu;
mod detector;
pub mod device;
pub mod file;
pub mod fixtures;
mod graph;
mod layers;
mod loss;
mod metrics;
mod running;
mod seeded;
mod targets;

pub use backend::{values_of, DetectorBackend};
pub use detector::level_shift::{parse_level_thresholds, scales_for_box, shift_between, LevelShift};
pub use detector::{detect, Detector, DetectorOutput, InitDetector};
pub use device::{StepKernels, TrainBackend};
pub use file::{load_model, save_model};
pub use grin_net::{
    add_upsampled, decode, halve, merge_passes, nested_in, nms, pass_sizes, second_look, BoxScale, Budget,
    DecodeParams, Detection, DetectorSpec, FoldedConv, FoldedDetector, FoldedFuse, FoldedHead, LevelThresholds,
    ModelConfig, Points, SecondLook, CONFIRM_IOU, LOG_DISTANCE_RANGE, MIN_PASS_SIDE, MIRROR_FLOOR, NESTED_AREA,
    NESTED_COVER, OUTPUTS, SEAM,
};
#[cfg(feature = "cli")]
pub use grin_net::{score, DecodeFlags};
pub use layers::{batch_norm, depthwise3x3};
pub use loss::{loss, LossParts, LossWeights};
pub use metrics::{Evaluation, FaceMatch, GroundTruth, PrPoint, LOOSE_MATCH_IOU};
pub use seeded::seeded;
pub use targets::{assign, PointTensors, Targets};
