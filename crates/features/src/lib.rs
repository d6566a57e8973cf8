//! grin-features: the CPU feature pipeline. No Burn here.
//!
//! Data flow: a [`FeatureConfig`] names a [`Source`] (procedural scenes,
//! face crops composited into scenes, annotated detection sets, random crops
//! of real photos, or a weighted mix of these). [`Pipeline`] asks the source
//! for the scene of each index with an rng seeded from (seed, split, index),
//! augments it on the train split (the stages of `augment`), optionally
//! rejection-resamples it towards target scene classes ([`ClassBalancer`]), and
//! packs samples into a fixed-layout [`HostBatch`] on a private thread pool.
//! Files are listed and decoded once, by grin-image, and assigned to a split by a
//! hash of their name, so any worker count yields the same bytes.
//!
//! It depends on grin-terms and grin-image only: never on Burn, the model or
//! the trainer, so the feature workers compile none of them.

#![forbid(unsafe_code)]

/// Bumped whenever a source or an augmentation makes other bytes from the
/// same config, so precomputed datasets written before are reported stale
/// (2: crops without a backgrounds folder draw their noise from the one
/// value-noise generator the synthetic scenes use; 3: images are turned by
/// their EXIF orientation, as `grin-detect` turns them; 4: a store holds
/// the samples before class balance, which its reader applies).
pub const GENERATOR_VERSION: u32 = 4;

mod annotations;
mod class_balance;
mod config;
mod crops;
mod mix;
mod negatives;
mod noise;
mod photos;
mod sample;
mod source;
mod split;
mod synthetic;
mod validate;

mod augment;
mod pipeline;
mod preview;
#[cfg(test)]
mod shared_data;

// The module that is the API as a whole: `grin features bench` and the
// balance check time the stages through it.
pub mod bench;

pub use class_balance::ClassBalancer;
pub use config::{
    AugmentConfig, ClassBalanceConfig, FeatureConfig, PhotoCrops, SourceConfig, Split, SplitConfig, MAX_WORKERS,
};
pub use negatives::MINING_MARK;
pub use pipeline::Pipeline;
pub use preview::{colour, contact_sheet, sheet_size};
pub use sample::{FaceBox, HostBatch, Sample, SceneClass, Smile, LABEL_IGNORE, LABEL_PADDING, MAX_BOXES};
pub use source::Source;

// The procedural scenes (which `grin features` draws on their own), and the
// held-out photos that reports score whole images on. The other sources are
// built from a config by the pipeline.
pub use photos::{
    has_held_out_photos, held_out_photos, photos_named_outside, photos_of_split, HeldOutPhoto, HeldOutPhotos,
};
pub use synthetic::{SyntheticParams, SyntheticSource};

// The annotation parsers, which the fuzz targets drive on their own.
pub use annotations::{parse_celeba, parse_jsonl, parse_wider, AnnotationText, BadLines, Entry};
pub use photos::parse_caltech;
