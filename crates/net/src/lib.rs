//! grin-net: the grin detector as data, without Burn. What a model *is*
//! (its architecture and settings, [`DetectorSpec`]), how its weights file
//! is read and written ([`file`]), the weights folded for an engine that
//! runs them ([`FoldedDetector`]), and how the network's outputs become
//! faces ([`decode()`], the [`pyramid`](pass_sizes) of passes, the
//! [`second_look`]).
//!
//! It is the product's vocabulary: grin-detect runs on it alone, and
//! grin-model builds Burn's `Detector` for training from the same reading.
//! It may not depend on Burn, on a training engine, or on any grin crate
//! but grin-terms and grin-output.

mod config;
mod decode;
pub mod file;
#[cfg(feature = "cli")]
mod flags;
mod folded;
mod look;
mod points;
mod pyramid;
mod record;
mod spec;
mod weights;

pub use config::{check_pyramid_above, BoxScale, LevelThresholds, ModelConfig, BOX_SCALES};
pub use decode::{decode, nested_in, nms, DecodeParams, Detection, NESTED_AREA, NESTED_COVER};
#[cfg(feature = "cli")]
pub use flags::{score, DecodeFlags};
pub use folded::{add_upsampled, FoldedConv, FoldedDetector, FoldedFuse, FoldedHead};
pub use grin_terms::output::{LOG_DISTANCE_RANGE, OUTPUTS};
pub use look::{second_look, SecondLook, CONFIRM_IOU, MIRROR_FLOOR};
pub use points::{conv_out, Points, CENTER_RADIUS, SIZE_RANGES, STRIDES};
pub use pyramid::{halve, merge as merge_passes, pass_sizes, MIN_PASS_SIDE, SEAM};
pub use spec::{is_tapped, Architecture, Budget, Conv, DetectorSpec};
pub use weights::{Tensor, Weights, BATCH_NORM_EPSILON};
