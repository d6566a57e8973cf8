//! `[train.device_augment]`, beside the config that names it: the feed's
//! in-VRAM mode reads it from there.

use serde::{Deserialize, Serialize};

/// `[train.device_augment]`: the stages the in-VRAM mode runs on the
/// device, per batch. These four are the only ones that run there; the
/// records themselves were augmented on the host by `[features.augment]`
/// once, when the store was precomputed, and keep that augmentation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceAugment {
    /// Probability of a horizontal flip, per sample.
    pub flip: f32,
    /// Contrast factor drawn from `1 ± contrast`.
    pub contrast: f32,
    /// Brightness offset drawn from `± brightness` (0..1 scale).
    pub brightness: f32,
    /// Whole-batch translation of up to this many pixels each way.
    pub translate: usize,
}

impl Default for DeviceAugment {
    fn default() -> Self {
        DeviceAugment { flip: 0.5, contrast: 0.2, brightness: 0.1, translate: 8 }
    }
}
