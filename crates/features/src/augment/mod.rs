//! Train-time augmentations, each with its own probability from
//! [`AugmentConfig`]. Geometric stages keep the boxes consistent with the
//! pixels; photometric stages go through 256-entry lookup tables.
//!
//! Every stage is a small function over a [`Sample`] so that a bench can time
//! stages one by one through [`apply_stage`].

mod geometry;
mod photometric;
mod stage;

pub(crate) use geometry::{crop, flip, rotate};
pub(crate) use photometric::{blur, brightness, contrast, gamma, jpeg, noise};
pub(crate) use stage::AugmentStage;

use crate::config::AugmentConfig;
use crate::sample::Sample;
use crate::source::{uniform, SampleRng};
use grin_image::InputError;
use rand::Rng;

/// Checks ranges, naming the offending key.
pub(crate) fn validate(cfg: &AugmentConfig) -> Result<(), InputError> {
    for stage in AugmentStage::ALL {
        let p = stage.probability(cfg);
        if !(0.0..=1.0).contains(&p) {
            return Err(bad_key(stage.name(), format!("must be a probability in 0..=1, got {p}")));
        }
    }
    let ranges = [
        ("crop_scale", cfg.crop_scale, 0.1, 4.0),
        ("contrast_range", cfg.contrast_range, 0.0, 10.0),
        ("gamma_range", cfg.gamma_range, 0.05, 10.0),
        ("blur_sigma", cfg.blur_sigma, 0.0, 20.0),
    ];
    for (key, (lo, hi), min, max) in ranges {
        if !(lo.is_finite() && hi.is_finite() && min <= lo && lo <= hi && hi <= max) {
            return Err(bad_key(key, format!("must be [lo, hi] with {min} <= lo <= hi <= {max}, got [{lo}, {hi}]")));
        }
    }
    let scalars = [
        ("crop_drop_fraction", cfg.crop_drop_fraction, 0.0, 1.0),
        ("rotate_deg", cfg.rotate_deg, 0.0, 90.0),
        ("brightness_delta", cfg.brightness_delta, 0.0, 1.0),
        ("noise_sigma", cfg.noise_sigma, 0.0, 128.0),
    ];
    for (key, v, min, max) in scalars {
        if !(v.is_finite() && (min..=max).contains(&v)) {
            return Err(bad_key(key, format!("must be in {min}..={max}, got {v}")));
        }
    }
    let (qlo, qhi) = cfg.jpeg_quality;
    if !(1 <= qlo && qlo <= qhi && qhi <= 100) {
        return Err(bad_key("jpeg_quality", format!("must be [lo, hi] with 1 <= lo <= hi <= 100, got [{qlo}, {qhi}]")));
    }
    Ok(())
}

fn bad_key(key: &str, message: String) -> InputError {
    InputError::Config(format!("key `features.augment.{key}`: {message}"))
}

/// Applies every stage with its probability, in [`AugmentStage::ALL`] order.
///
/// One coin is drawn per stage whether or not it fires, so that changing one
/// probability does not reshuffle the other stages' randomness.
pub(crate) fn augment(sample: &mut Sample, cfg: &AugmentConfig, rng: &mut SampleRng) -> Result<(), InputError> {
    for stage in AugmentStage::ALL {
        let coin: f32 = rng.random();
        if coin < stage.probability(cfg) {
            apply_stage(stage, sample, cfg, rng)?;
        }
    }
    Ok(())
}

/// Runs one stage unconditionally (its probability is not consulted), so a
/// bench can time each stage's real cost.
pub(crate) fn apply_stage(
    stage: AugmentStage,
    sample: &mut Sample,
    cfg: &AugmentConfig,
    rng: &mut SampleRng,
) -> Result<(), InputError> {
    match stage {
        AugmentStage::Crop => {
            let s = uniform(rng, cfg.crop_scale.0, cfg.crop_scale.1);
            let (w, h) = (sample.width as f32, sample.height as f32);
            let (cw, ch) = (s * w, s * h);
            // When zooming out (s > 1) the window starts left of / above the image.
            let ox = uniform(rng, 0.0f32.min(w - cw), 0.0f32.max(w - cw));
            let oy = uniform(rng, 0.0f32.min(h - ch), 0.0f32.max(h - ch));
            crop(sample, [ox, oy, ox + cw, oy + ch], cfg.crop_drop_fraction);
        }
        AugmentStage::Rotate => {
            let deg = uniform(rng, -cfg.rotate_deg, cfg.rotate_deg);
            rotate(sample, deg, cfg.crop_drop_fraction);
        }
        AugmentStage::Flip => flip(sample),
        AugmentStage::Brightness => {
            let delta = uniform(rng, -cfg.brightness_delta, cfg.brightness_delta) * 255.0;
            brightness(sample, delta);
        }
        AugmentStage::Contrast => contrast(sample, uniform(rng, cfg.contrast_range.0, cfg.contrast_range.1)),
        AugmentStage::Gamma => gamma(sample, uniform(rng, cfg.gamma_range.0, cfg.gamma_range.1)),
        AugmentStage::Blur => blur(sample, uniform(rng, cfg.blur_sigma.0, cfg.blur_sigma.1)),
        AugmentStage::Noise => {
            // Sensor noise level varies between shots, up to the configured sigma.
            let sigma = uniform(rng, 0.3, 1.0) * cfg.noise_sigma;
            noise(sample, sigma, rng);
        }
        AugmentStage::Jpeg => {
            let q = rng.random_range(cfg.jpeg_quality.0..=cfg.jpeg_quality.1);
            jpeg(sample, q)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
