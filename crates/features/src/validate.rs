//! Every config key's range, checked when a config is loaded. It lives
//! apart from `config` because it calls into the modules that own each
//! part (augmentation, split, balance, photo crops, mix), which themselves
//! read `config`'s types: kept here, the imports run one way.

use crate::config::{check_faces, check_size, check_workers, FeatureConfig, SourceConfig};
use grin_image::InputError;

impl FeatureConfig {
    /// Every key's range, checked when a config is loaded, before any file
    /// is read, so a bad value is named before minutes of loading. Sources,
    /// stages and the balancer run their part of these checks again when
    /// built (the same functions), so a library caller cannot skip them.
    pub fn validate(&self) -> Result<(), InputError> {
        check_size(self.width, self.height, self.channels)?;
        check_workers(self.workers)?;
        crate::augment::validate(&self.augment)?;
        crate::split::check_split(&self.split)?;
        if let Some(balance) = &self.balance {
            crate::class_balance::check_balance(balance)?;
        }
        self.source.validate()
    }
}

impl SourceConfig {
    /// This source's own keys; a mix's weights and every part's keys.
    pub(crate) fn validate(&self) -> Result<(), InputError> {
        match self {
            SourceConfig::Synthetic { max_faces, min_face, max_face, hard_negatives } => {
                check_faces(*max_faces, *min_face, *max_face)?;
                if !(0.0..=64.0).contains(hard_negatives) {
                    return Err(InputError::Config(format!(
                        "key `features.source.hard_negatives`: {hard_negatives} must be within 0..=64"
                    )));
                }
                Ok(())
            }
            SourceConfig::Crops { max_faces, min_face, max_face, rotation_deg, .. } => {
                check_faces(*max_faces, *min_face, *max_face)?;
                if !(0.0..=90.0).contains(rotation_deg) {
                    return Err(InputError::Config(format!(
                        "key `features.source.rotation_deg`: {rotation_deg} must be within 0..=90"
                    )));
                }
                Ok(())
            }
            SourceConfig::Caltech { crops, .. }
            | SourceConfig::Fddb { crops, .. }
            | SourceConfig::CelebaAligned { crops, .. } => crate::photos::check_crops(crops),
            SourceConfig::Mix { weights, parts } => {
                crate::mix::check_weights(weights, parts.len())?;
                parts.iter().try_for_each(SourceConfig::validate)
            }
            SourceConfig::Wider { .. } | SourceConfig::Celeba { .. } | SourceConfig::Jsonl { .. } => Ok(()),
            SourceConfig::Negatives { images, mined, graphics, zoom_in } => {
                for (key, share) in [("graphics", graphics), ("zoom_in", zoom_in)] {
                    if !(0.0..=1.0).contains(share) {
                        return Err(InputError::Config(format!(
                            "key `features.source.{key}`: {share} must be a share in [0, 1]"
                        )));
                    }
                }
                if images.is_none() && mined.is_none() && *graphics == 0.0 {
                    return Err(InputError::Config(
                        "kind `negatives`: give `images`, `mined` or a `graphics` share above 0".into(),
                    ));
                }
                Ok(())
            }
        }
    }
}
