//! The augmentation stages as one list the compiler checks: a stage's name
//! is its probability key in `[features.augment]`, and its probability is
//! read from the matching [`AugmentConfig`] field, so a stage cannot be
//! misspelt into a silent probability of 0.

use crate::config::AugmentConfig;
use grin_image::InputError;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum AugmentStage {
    Crop,
    Rotate,
    Flip,
    Brightness,
    Contrast,
    Gamma,
    Blur,
    Noise,
    Jpeg,
}

impl AugmentStage {
    /// Every stage, in the order [`super::augment`] applies them: geometry
    /// before tone, and the JPEG round trip last, as a camera would.
    pub(crate) const ALL: [AugmentStage; 9] = [
        AugmentStage::Crop,
        AugmentStage::Rotate,
        AugmentStage::Flip,
        AugmentStage::Brightness,
        AugmentStage::Contrast,
        AugmentStage::Gamma,
        AugmentStage::Blur,
        AugmentStage::Noise,
        AugmentStage::Jpeg,
    ];

    /// The stage's probability key in `[features.augment]`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AugmentStage::Crop => "crop",
            AugmentStage::Rotate => "rotate",
            AugmentStage::Flip => "flip",
            AugmentStage::Brightness => "brightness",
            AugmentStage::Contrast => "contrast",
            AugmentStage::Gamma => "gamma",
            AugmentStage::Blur => "blur",
            AugmentStage::Noise => "noise",
            AugmentStage::Jpeg => "jpeg",
        }
    }

    /// The configured probability of this stage.
    pub(crate) fn probability(self, cfg: &AugmentConfig) -> f32 {
        let mut cfg = cfg.clone();
        *self.probability_mut(&mut cfg)
    }

    /// The config field holding this stage's probability.
    pub(crate) fn probability_mut(self, cfg: &mut AugmentConfig) -> &mut f32 {
        match self {
            AugmentStage::Crop => &mut cfg.crop,
            AugmentStage::Rotate => &mut cfg.rotate,
            AugmentStage::Flip => &mut cfg.flip,
            AugmentStage::Brightness => &mut cfg.brightness,
            AugmentStage::Contrast => &mut cfg.contrast,
            AugmentStage::Gamma => &mut cfg.gamma,
            AugmentStage::Blur => &mut cfg.blur,
            AugmentStage::Noise => &mut cfg.noise,
            AugmentStage::Jpeg => &mut cfg.jpeg,
        }
    }
}

impl fmt::Display for AugmentStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AugmentStage {
    type Err = InputError;

    fn from_str(name: &str) -> Result<Self, InputError> {
        AugmentStage::ALL.into_iter().find(|s| s.name() == name).ok_or_else(|| {
            let known: Vec<&str> = AugmentStage::ALL.iter().map(|s| s.name()).collect();
            InputError::Config(format!("unknown augmentation stage '{name}' (known: {})", known.join(", ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::AugmentStage;
    use crate::config::AugmentConfig;

    #[test]
    fn every_stage_name_round_trips() {
        for stage in AugmentStage::ALL {
            assert_eq!(stage.name().parse::<AugmentStage>().unwrap(), stage);
            assert_eq!(stage.to_string(), stage.name());
        }
    }

    #[test]
    fn an_unknown_stage_is_an_error_naming_it() {
        let err = "flp".parse::<AugmentStage>().unwrap_err().to_string();
        assert!(err.contains("'flp'") && err.contains("flip"), "{err}");
    }

    /// The enum and the TOML keys cannot drift apart: each stage's name is a
    /// key of `[features.augment]` and reads and writes that key's value.
    #[test]
    fn each_stage_is_the_config_key_of_its_name() {
        for (k, stage) in AugmentStage::ALL.into_iter().enumerate() {
            let mut cfg = AugmentConfig::default();
            let p = 0.01 * (k + 1) as f32;
            *stage.probability_mut(&mut cfg) = p;
            assert_eq!(stage.probability(&cfg), p);
            let keys = serde_json::to_value(&cfg).unwrap();
            assert_eq!(keys[stage.name()].as_f64().map(|v| v as f32), Some(p), "{stage}");
        }
    }
}
