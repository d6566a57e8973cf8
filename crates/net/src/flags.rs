//! The decision settings a command may set over a model's own, declared
//! once for `grin eval` and `grin-detect` (clap's `Args`, behind this
//! crate's `cli` feature): the same names, help, bounds and errors in both.

use crate::config::{check_pyramid_above, ModelConfig};

/// `--threshold`, `--pyramid-above`, `--nested-cover` and the second look's
/// flags; each left out keeps the model file's own setting.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DecodeFlags {
    /// Face score a detection needs (default: the model's own, from `grin
    /// calibrate`). Lower it to see the whole precision-recall trade-off.
    #[arg(long, value_parser = score)]
    pub threshold: Option<f32>,
    /// Longest face (px at the run size) the first pass keeps; larger faces
    /// are found on the frame at half size, then a quarter. 0: one pass.
    /// Default: the model's own.
    #[arg(long, value_name = "PX", value_parser = pyramid_above)]
    pub pyramid_above: Option<f32>,
    /// Suppress a detection with at least this share of its area inside a
    /// better one (default: the model's own `nested_cover`; 0: off).
    #[arg(long, value_name = "SHARE", value_parser = share)]
    pub nested_cover: Option<f32>,
    /// Look again at each detection scoring below this, on a close cut
    /// around it, and keep it only if a face is found there (default: the
    /// model's own `second_look.below`; 0: off).
    #[arg(long, value_name = "SCORE", value_parser = score)]
    pub second_look_below: Option<f32>,
    /// The score a face found on that cut needs to keep the detection
    /// (default: the model's own `second_look.confirm`; 0: the threshold).
    #[arg(long, value_name = "SCORE", value_parser = score)]
    pub second_look_confirm: Option<f32>,
    /// Search each cut's mirror image too, and keep the box when the mean of
    /// the two views' scores at its place reaches the threshold (default:
    /// the model's own `second_look.mirror`).
    #[arg(long)]
    pub second_look_mirror: bool,
}

impl DecodeFlags {
    /// `model` with these flags set over it; an error names the flag that
    /// cannot apply (a mirror with no second look to mirror).
    pub fn apply(&self, model: &ModelConfig) -> Result<ModelConfig, String> {
        let mut model = model.clone();
        model.score_threshold = self.threshold.unwrap_or(model.score_threshold);
        model.pyramid_above = self.pyramid_above.unwrap_or(model.pyramid_above);
        model.nested_cover = self.nested_cover.unwrap_or(model.nested_cover);
        model.second_look =
            model.second_look.with_flags(self.second_look_below, self.second_look_confirm, self.second_look_mirror)?;
        Ok(model)
    }

    /// The first second-look flag given, if any: a second look cuts from a
    /// whole photo, so a command scoring none refuses it by this name.
    pub fn second_look_flag(&self) -> Option<&'static str> {
        [
            (self.second_look_below.is_some(), "--second-look-below"),
            (self.second_look_confirm.is_some(), "--second-look-confirm"),
            (self.second_look_mirror, "--second-look-mirror"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// A score: a number in 0..=1.
pub fn score(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if (0.0..=1.0).contains(&t) => Ok(t),
        _ => Err(format!("{s} must be a score in [0, 1]")),
    }
}

fn share(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(t) if (0.0..=1.0).contains(&t) => Ok(t),
        _ => Err(format!("{s} must be a share in [0, 1] (0: off)")),
    }
}

fn pyramid_above(s: &str) -> Result<f32, String> {
    let above = s.trim().parse::<f32>().map_err(|_| format!("`{s}` is not a number"))?;
    check_pyramid_above(above).map(|_| above)
}
