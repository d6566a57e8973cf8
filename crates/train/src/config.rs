//! The `[train]` table: how a run feeds and optimises the detector.

use crate::device_batch::DeviceAugment;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    OnTheFly,
    Precomputed,
    InVram,
    Auto,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    pub mode: Mode,
    pub steps: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub weight_decay: f32,
    pub warmup_steps: usize,
    /// Steps between metric lines (and the only device syncs of the loop).
    pub log_every: usize,
    /// Steps between checkpoints; 0 writes one only at the end.
    pub checkpoint_every: usize,
    /// Held-out samples scored at the end of a run.
    pub eval_samples: usize,
    /// Held-out real photos scored per real source at the end of a run
    /// (whole photos letterboxed to `run_size`); 0 scores none.
    pub eval_photos: usize,
    /// Faces smaller than this (px at the run size) are ignore regions when
    /// photos are scored.
    pub eval_min_face: f32,
    /// `[width, height]` the trained model runs at: written into `model.grin`
    /// (what `grin-detect` uses) and used to score photos. The detector is
    /// fully convolutional, so it can train on small crops and run larger.
    /// Default: the features' size.
    pub run_size: Option<[u32; 2]>,
    /// Batches the loader may run ahead of the trainer.
    pub prefetch: usize,
    /// Precomputed dataset directory (`grin precompute --out`).
    pub store: Option<PathBuf>,
    /// Samples written by `grin precompute` when `--samples` is not given.
    pub store_samples: usize,
    pub loss: LossConfig,
    /// Augmentation the in-VRAM mode applies on the device, per batch.
    pub device_augment: DeviceAugment,
    /// A model file whose weights the run starts from (fine-tuning); its
    /// architecture must match `[model]` and `features.channels`. The
    /// learning-rate schedule starts over.
    pub init: Option<PathBuf>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            mode: Mode::OnTheFly,
            steps: 2000,
            batch_size: 32,
            lr: 3e-3,
            weight_decay: 1e-4,
            warmup_steps: 100,
            log_every: 50,
            checkpoint_every: 500,
            eval_samples: 500,
            eval_photos: 500,
            eval_min_face: 10.0,
            run_size: None,
            prefetch: 4,
            store: None,
            store_samples: 20_000,
            loss: LossConfig::default(),
            device_augment: DeviceAugment::default(),
            init: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LossConfig {
    pub focal_alpha: f32,
    pub focal_gamma: f32,
    pub box_weight: f32,
    pub smile_weight: f32,
}

impl Default for LossConfig {
    fn default() -> Self {
        LossConfig { focal_alpha: 0.25, focal_gamma: 2.0, box_weight: 2.0, smile_weight: 1.0 }
    }
}

impl LossConfig {
    pub fn weights(&self) -> grin_model::LossWeights {
        grin_model::LossWeights {
            focal_alpha: self.focal_alpha,
            focal_gamma: self.focal_gamma,
            box_weight: self.box_weight,
            smile_weight: self.smile_weight,
        }
    }
}
