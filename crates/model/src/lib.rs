//! grin-model: the face + smile detector, generic over the Burn backend.
//!
//! Data flow: [`Detector::forward`] gives raw outputs at every point of
//! three levels; during training [`assign`] + [`loss()`] turn labelled boxes
//! into a loss; at inference [`decode()`] turns one image's raw outputs into
//! detections, and [`Evaluation`] scores them. [`Detector::folded`] hands
//! the trained weights, BatchNorm folded in, to an engine without Burn.
//! The model runs on any [`DetectorBackend`]: Burn's backend plus the two
//! ops (depthwise conv, training BatchNorm) that grin supplies itself.

// Modules named by path (by other crates, or this one's tests and
// examples); the rest is re-exported below.
pub mod backend;
mod config;
pub mod cpu;
mod decode;
mod detector;
pub mod device;
pub mod file;
pub mod fixtures;
#[cfg(feature = "cli")]
mod flags;
mod folded;
mod graph;
pub mod kernels;
mod layers;
mod look;
mod loss;
mod metrics;
mod points;
mod pyramid;
mod running;
mod seeded;
mod targets;

pub use backend::{values_of, DetectorBackend};
pub use config::{BoxScale, LevelThresholds, ModelConfig};
pub use decode::{decode, nested_in, nms, DecodeParams, Detection, NESTED_AREA, NESTED_COVER};
pub use detector::level_shift::{parse_level_thresholds, scales_for_box, shift_between, LevelShift};
pub use detector::{budget, detect, Budget, Detector, DetectorOutput, DetectorSpec};
pub use device::{StepKernels, TrainBackend};
pub use file::{load_model, save_model};
#[cfg(feature = "cli")]
pub use flags::{score, DecodeFlags};
pub use folded::{add_upsampled, FoldedConv, FoldedDetector, FoldedFuse, FoldedHead};
pub use grin_terms::output::{LOG_DISTANCE_RANGE, OUTPUTS};
pub use layers::{batch_norm, depthwise3x3};
pub use look::{second_look, SecondLook, CONFIRM_IOU, MIRROR_FLOOR};
pub use loss::{loss, LossParts, LossWeights};
pub use metrics::{Evaluation, FaceMatch, GroundTruth, PrPoint, LOOSE_MATCH_IOU};
pub use points::Points;
pub use pyramid::{halve, merge as merge_passes, pass_sizes, MIN_PASS_SIDE, SEAM};
pub use seeded::seeded;
pub use targets::{assign, PointTensors, Targets};
