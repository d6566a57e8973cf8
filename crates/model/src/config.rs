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
}

/// Widest network a config or model file may ask for: 4x the default is
/// already ~1.2M parameters, far past what this detector is for.
pub const MAX_WIDTH_MULT: f32 = 4.0;

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig { width_mult: 1.0, score_threshold: 0.3, nms_iou: 0.4, max_detections: 50 }
    }
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
