//! A run's config (`GrinConfig`: name, `[features]`, `[model]`, `[train]`)
//! and the `[train]` table: how a run feeds and optimises the detector.
//! Reading one from a file or text is `read`.

use anyhow::{bail, Result};
use grin_features::FeatureConfig;
use grin_model::LossWeights;
use grin_net::{DetectorSpec, ModelConfig};
use grin_terms::{MAX_SIDE, MIN_SIDE};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

mod device_augment;
mod read;
pub use device_augment::DeviceAugment;
pub use read::{load_config, parse_config, set_model_keys, LoadedConfig};

pub use grin_terms::Mode;

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
    /// Steps between validation scores during training (0 = none): face AP
    /// on `eval_samples` scenes of the validation split, written to
    /// `metrics.csv` as `val_face_ap` (what a sweep prunes on).
    pub eval_every: usize,
    /// Validation scores (`eval_every`) in a row without a better face AP
    /// after which the run stops early (0 = never): `best.grin` then holds
    /// the best step's weights, `model.grin` the last.
    pub patience: usize,
    /// Held-out real photos scored per real source at the end of a run
    /// (whole photos letterboxed to `run_size`); 0 scores none.
    pub eval_photos: usize,
    /// Validation photos scored per real source at the end of a run (0 =
    /// none): `summary.json`'s `val_photos` and `val_photo_ap`, what a sweep
    /// chooses on, so the test photos stay unseen.
    pub val_photos: usize,
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
    pub loss: LossWeights,
    /// Augmentation the in-VRAM mode applies on the device, per batch.
    pub device_augment: DeviceAugment,
    /// A model file whose weights the run starts from (fine-tuning); its
    /// architecture must match `[model]` and `features.channels`. The
    /// learning-rate schedule starts over.
    pub init: Option<PathBuf>,
    /// Decay of the weights' moving average (0 = off): when set, the run
    /// scores, keeps and writes the average, not the last step's weights
    /// (`ema.rs`). 0.999 averages about the last thousand steps. A 0 is
    /// not written, so configs from before it hash as they did.
    #[serde(skip_serializing_if = "is_off")]
    pub ema: f64,
}

fn is_off(decay: &f64) -> bool {
    *decay == 0.0
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
            eval_every: 0,
            patience: 0,
            eval_photos: 500,
            val_photos: 0,
            eval_min_face: 10.0,
            run_size: None,
            prefetch: 4,
            store: None,
            store_samples: 20_000,
            loss: LossWeights::default(),
            device_augment: DeviceAugment::default(),
            init: None,
            ema: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrinConfig {
    /// Run name: checkpoints and metrics go to `runs/<name>/`.
    pub name: String,
    pub features: FeatureConfig,
    pub model: ModelConfig,
    pub train: TrainConfig,
}

impl Default for GrinConfig {
    fn default() -> Self {
        GrinConfig {
            name: "run".into(),
            features: FeatureConfig::default(),
            model: ModelConfig::default(),
            train: TrainConfig::default(),
        }
    }
}

/// `model` at the size and channels of the samples `features` makes: the
/// one place a config becomes a [`DetectorSpec`].
pub fn detector_spec(model: &ModelConfig, features: &FeatureConfig) -> DetectorSpec {
    DetectorSpec {
        model: model.clone(),
        width: features.width as usize,
        height: features.height as usize,
        channels: features.channels as usize,
    }
}

impl GrinConfig {
    /// The precomputed dataset this config trains from: `train.store`, else `data/<name>`.
    pub fn store_dir(&self) -> PathBuf {
        self.train.store.clone().unwrap_or_else(|| PathBuf::from("data").join(&self.name))
    }

    /// The detector as it trains: at the features' size.
    pub fn detector_spec(&self) -> DetectorSpec {
        detector_spec(&self.model, &self.features)
    }

    /// Checks serde cannot express: every numeric key's range and the
    /// relations between keys. Each table checks its own keys
    /// (`FeatureConfig::validate`, `ModelConfig::validate`,
    /// `TrainConfig::validate`), so a model file's header or a library
    /// caller meets the same ranges as a config file.
    pub fn validate(&self) -> Result<()> {
        let c = self;
        let f = &c.features;
        for (key, side) in [("features.width", f.width), ("features.height", f.height)] {
            if !(MIN_SIDE as u32..=MAX_SIDE as u32).contains(&side) {
                bail!("key `{key}`: {side} must be between {MIN_SIDE} and {MAX_SIDE} pixels");
            }
        }
        f.validate()?;
        f.image_bound().map_err(|e| anyhow::anyhow!("{e}"))?;
        check_run_name(&c.name).map_err(|e| anyhow::anyhow!("key `name`: {e}"))?;
        c.model.validate().map_err(anyhow::Error::msg)?;
        for (key, set, flag) in [
            ("model.level_thresholds", c.model.level_thresholds.is_some(), "--level-thresholds"),
            ("model.box_scale", c.model.box_scale.is_some(), "--box-scale"),
        ] {
            if set {
                bail!("key `{key}`: records what `grin model-set {flag}` folded into a trained model's weights; a config cannot set it");
            }
        }
        if c.train.val_photos > 0 && !f.source.has_annotated_photos() {
            bail!(
                "key `train.val_photos`: {} needs real photos with faces in features.source (caltech, celeba_aligned, \
                 wider, celeba or jsonl); this source has none, so there would be nothing to score",
                c.train.val_photos
            );
        }
        c.train.validate()
    }
}

/// Most steps (and so warm-up, log and checkpoint intervals) a run may ask for.
pub const MAX_STEPS: usize = 100_000_000;

/// The longest run name (`name`, `--name`): a folder name, which most
/// filesystems bound at 255 bytes.
const MAX_NAME_BYTES: usize = 255;

/// Whether `name` can be a run's folder name: plain (no separator, not `.`
/// or `..`) and within a filesystem's 255 bytes (a 900 KB name failed at
/// mkdir with a 900 KB error line, issue 90). The config's `name` and
/// `grin train --name` both answer to it.
pub fn check_run_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_NAME_BYTES {
        let start: String = name.chars().take(40).collect();
        return Err(format!(
            "\"{start}…\" is {} bytes; a run's name is a folder name, at most {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    // A control character (a newline) splits every line that names the run.
    // A blank name (" ") made a folder no listing shows (round 9).
    if name.trim().is_empty()
        || name.contains(['/', '\\'])
        || name == ".."
        || name == "."
        || name.chars().any(char::is_control)
    {
        return Err(format!("{name:?} must be a plain folder name"));
    }
    Ok(())
}

/// The most held-out scenes or photos one evaluation scores
/// (`train.eval_samples`, `train.eval_photos`, and `grin eval`'s
/// `--samples` and `--photos`).
pub const MAX_EVAL: usize = 1_000_000;

impl TrainConfig {
    /// Every key's range. NaN fails every comparison, so each float check
    /// is written to accept rather than to refuse.
    pub(crate) fn validate(&self) -> Result<()> {
        let t = self;
        // Bounds keep a typo from allocating gigabytes or looping for days.
        let counts = [
            ("train.steps", t.steps, 1, MAX_STEPS),
            ("train.batch_size", t.batch_size, 1, 4096),
            ("train.warmup_steps", t.warmup_steps, 0, MAX_STEPS),
            ("train.log_every", t.log_every, 1, MAX_STEPS),
            ("train.checkpoint_every", t.checkpoint_every, 0, MAX_STEPS),
            ("train.eval_samples", t.eval_samples, 0, MAX_EVAL),
            ("train.eval_every", t.eval_every, 0, 100_000_000),
            ("train.patience", t.patience, 0, 1_000_000),
            ("train.eval_photos", t.eval_photos, 0, MAX_EVAL),
            ("train.val_photos", t.val_photos, 0, 1_000_000),
            ("train.prefetch", t.prefetch, 0, 1024),
            ("train.store_samples", t.store_samples, 0, grin_store::MAX_SAMPLES as usize),
        ];
        for (key, v, lo, hi) in counts {
            if !(lo..=hi).contains(&v) {
                bail!("key `{key}`: {v} must be within {lo}..={hi}");
            }
        }
        // AdamW moves each weight by about lr a step: past 1 nothing trains.
        if !(t.lr > 0.0 && t.lr <= 1.0) {
            bail!("key `train.lr`: {} must be positive, at most 1", t.lr);
        }
        // Decoupled decay shrinks each weight by lr * weight_decay a step.
        if !(0.0..=1.0).contains(&t.weight_decay) {
            bail!("key `train.weight_decay`: {} must be within 0..=1", t.weight_decay);
        }
        // 1 would never move the average; a decay is a share, so below 0 is meaningless.
        if !(0.0..1.0).contains(&t.ema) {
            bail!("key `train.ema`: {} must be 0 (off) or a decay below 1, such as 0.999", t.ema);
        }
        if t.eval_every > 0 && t.eval_samples == 0 {
            bail!("key `train.eval_every`: {} needs train.eval_samples > 0 (the scenes it scores)", t.eval_every);
        }
        if t.patience > 0 && t.eval_every == 0 {
            bail!("key `train.patience`: {} counts validation scores, so it needs train.eval_every > 0", t.patience);
        }
        if let Some([w, h]) = t.run_size {
            let sides = MIN_SIDE as u32..=MAX_SIDE as u32;
            if !sides.contains(&w) || !sides.contains(&h) {
                bail!("key `train.run_size`: [{w}, {h}] must be between {MIN_SIDE} and {MAX_SIDE} pixels a side");
            }
        }
        let d = &t.device_augment;
        for (key, v, hi) in [
            ("flip", d.flip, 1.0),
            ("contrast", d.contrast, 1.0),
            ("brightness", d.brightness, 1.0),
            ("translate", d.translate as f32, 64.0),
        ] {
            if !(v.is_finite() && (0.0..=hi).contains(&v)) {
                bail!("key `train.device_augment.{key}`: {v} must be within 0..={hi}");
            }
        }
        if !(t.eval_min_face.is_finite() && (0.0..=4096.0).contains(&t.eval_min_face)) {
            bail!("key `train.eval_min_face`: {} must be within 0..=4096", t.eval_min_face);
        }
        validate_loss(&t.loss)
    }
}

/// Each weight finite and in a range where the loss stays finite: a NaN
/// or infinite weight would otherwise surface steps later as "loss
/// became NaN", blaming the learning rate, or as a panic inside Burn.
fn validate_loss(loss: &LossWeights) -> Result<()> {
    let keys = [
        ("focal_alpha", loss.focal_alpha, 1.0),
        ("focal_gamma", loss.focal_gamma, 10.0),
        ("box_weight", loss.box_weight, 1000.0),
        ("smile_weight", loss.smile_weight, 1000.0),
    ];
    for (key, v, hi) in keys {
        if !(0.0..=hi).contains(&v) {
            bail!("key `train.loss.{key}`: {v} must be within 0..={hi}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
