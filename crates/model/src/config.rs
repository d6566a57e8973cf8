//! The `[model]` table: architecture knobs. The input size and channel count
//! come from `[features]`, so a model always matches the data it is fed.

use crate::decode::DecodeParams;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Multiplies every layer's channel count (rounded to a multiple of 4).
    pub width_mult: f32,
    /// Face score above which a location becomes a detection.
    pub score_threshold: f32,
    /// IoU above which the lower-scored of two detections is suppressed.
    pub nms_iou: f32,
    /// Most detections kept per image.
    pub max_detections: usize,
    /// Longest face side (px) one pass of the network is trusted with:
    /// larger faces are found on the frame at half size, then a quarter
    /// (`pyramid.rs`). About the largest face the training crops hold; 0
    /// runs one pass. Model files written before it existed get the default.
    pub pyramid_above: f32,
}

/// Widest network a config or model file may ask for: 4x the default is
/// already ~1.2M parameters, far past what this detector is for.
pub const MAX_WIDTH_MULT: f32 = 4.0;

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig { width_mult: 1.0, score_threshold: 0.3, nms_iou: 0.4, max_detections: 50, pyramid_above: 96.0 }
    }
}

/// `pyramid_above` is 0 (one pass) or a face side a pass can hold; the
/// message says which, for callers to prefix with the key or flag.
pub fn check_pyramid_above(above: f32) -> Result<(), String> {
    if above == 0.0 || (8.0..=4096.0).contains(&above) {
        Ok(())
    } else {
        Err(format!("{above} must be 0 (one pass) or a face side in 8..=4096 px"))
    }
}

impl ModelConfig {
    pub fn decode_params(&self) -> DecodeParams {
        DecodeParams {
            score_threshold: self.score_threshold,
            nms_iou: self.nms_iou,
            max_detections: self.max_detections,
            pyramid_above: self.pyramid_above,
            smile_vote_floor: self.score_threshold,
        }
    }
}
