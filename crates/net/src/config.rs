//! The `[model]` table: architecture knobs. The input size and channel count
//! come from `[features]`, so a model always matches the data it is fed.

use crate::decode::{DecodeParams, NESTED_AREA, NESTED_COVER};
use crate::look::SecondLook;
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
    /// A detection whose intersection with a better one covers at least this
    /// share of its own area is suppressed too (a mouth box inside a face);
    /// 0 turns it off. Model files written before it existed get the default.
    pub nested_cover: f32,
    /// ... when it is at most this share of the better one's area, so that
    /// two real faces that overlap are never suppressed as nested.
    pub nested_area: f32,
    /// Most detections kept per image.
    pub max_detections: usize,
    /// Longest face side (px) one pass of the network is trusted with:
    /// larger faces are found on the frame at half size, then a quarter
    /// (`pyramid.rs`). About the largest face the training crops hold; 0
    /// runs one pass. Model files written before it existed get the default.
    pub pyramid_above: f32,
    /// Top-down fusion: the finest level's head also reads the stride-16
    /// features (a 1x1 conv, upsampled 2x and added), so a small face is
    /// judged with the context around it. Starts as a no-op (zero weights),
    /// so a model without it can be fine-tuned into one. Off in model files
    /// written before it existed.
    pub top_down: bool,
    /// Channels of the stride-8 head's mixing layer (its pointwise conv's
    /// output); 0: the tapped trunk layer's own. Capacity where small faces
    /// and most false boxes are decided, at stride 8's many locations. A
    /// model with a narrower one fine-tunes into a wider one from where it
    /// was (the new channels start with no say in the outputs). Model files
    /// written before it existed get 0, and a 0 is not written, so files
    /// and run configs without it read as they did.
    #[serde(skip_serializing_if = "is_zero")]
    pub fine_head: usize,
    /// The face sizes each output level learns, as a multiple of
    /// `points::SIZE_RANGES` (a face's longer side; seams at 32-48 and
    /// 80-96 px): training's target assignment only. The ranges were set for
    /// square face boxes; a box drawn forehead to chin is 1.63 times as tall
    /// for the same face (docs/design.md, "The face box"), and at 1.63 each
    /// level keeps the faces it learned on the square box. A 1 is not
    /// written, so files and run configs without it read as they did.
    #[serde(skip_serializing_if = "is_one")]
    pub level_scale: f32,
    /// Boxes scoring low are looked at again on a close cut (`look.rs`).
    /// Its defaults (off) are not written, so files without it read as they
    /// did; an off look with other settings keeps them, so turning it on
    /// again restores them (issue 90, round 9: `below = 0` dropped the
    /// shipped look's context, side and mirror).
    #[serde(skip_serializing_if = "SecondLook::is_default")]
    pub second_look: SecondLook,
    /// The face-score thresholds per output level, finest first, that
    /// `grin model-set --level-thresholds` folded into the face biases:
    /// what the weights hold, so a second `--level-thresholds` replaces
    /// them rather than adding to them (applied twice, 6 faces became 18,
    /// issue 90). Set only there: a config or `--set` cannot. Absent from
    /// files without it, and not written then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level_thresholds: Option<LevelThresholds>,
    /// The box side scales `grin model-set --box-scale` folded into the
    /// distance biases, recorded for the same reason: a second
    /// `--box-scale` replaces them rather than compounding. Set only there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub box_scale: Option<BoxScale>,
}

/// One face score in (0, 1) per output level, finest first.
pub type LevelThresholds = [f32; crate::points::STRIDES.len()];

/// One scale per box side, in the order of the distance channels: left,
/// top, right, bottom.
pub type BoxScale = [f32; 4];

/// The range of a box side's scale: past it a model is being retrained,
/// not re-read.
pub const BOX_SCALES: std::ops::RangeInclusive<f32> = 0.25..=4.0;

/// Widest network a config or model file may ask for: 4x the default is
/// already ~1.2M parameters, far past what this detector is for.
pub(crate) const MAX_WIDTH_MULT: f32 = 4.0;

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            width_mult: 1.0,
            score_threshold: 0.3,
            nms_iou: 0.4,
            nested_cover: NESTED_COVER,
            nested_area: NESTED_AREA,
            max_detections: 50,
            pyramid_above: 96.0,
            top_down: false,
            fine_head: 0,
            level_scale: 1.0,
            second_look: SecondLook::default(),
            level_thresholds: None,
            box_scale: None,
        }
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

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_one(scale: &f32) -> bool {
    *scale == 1.0
}

/// Widest stride-8 head a config may ask for: far past the parameter budget.
const MAX_FINE_HEAD: usize = 1024;

/// Most detections a model may keep per image.
const MAX_DETECTIONS: usize = 1000;

/// The `[model]` keys a file leaves out at their defaults (each
/// `skip_serializing_if` above but the two only `grin model-set` writes),
/// with a config's values: a resolved config (`grin config`) names every key
/// a config may set.
#[derive(Serialize)]
pub struct Unwritten<'a> {
    pub fine_head: usize,
    pub level_scale: f32,
    pub second_look: &'a SecondLook,
}

impl ModelConfig {
    /// This config's values of the keys a file leaves out at their defaults.
    pub fn unwritten(&self) -> Unwritten<'_> {
        Unwritten { fine_head: self.fine_head, level_scale: self.level_scale, second_look: &self.second_look }
    }

    /// Every key's range, checked wherever a `[model]` table comes from: a
    /// config file, `--set`, a sweep (through `--set`) or a model file's
    /// header. NaN fails every comparison, so each check is written to
    /// accept rather than to refuse. The message names the dotted key, for
    /// callers to prefix with the file.
    pub fn validate(&self) -> Result<(), String> {
        let m = self.width_mult;
        if !(m.is_finite() && m > 0.0 && m <= MAX_WIDTH_MULT) {
            return Err(format!("key `model.width_mult`: {m} must be in (0, {MAX_WIDTH_MULT}]"));
        }
        let t = self.score_threshold;
        if !(0.0..=1.0).contains(&t) {
            return Err(format!("key `model.score_threshold`: {t} must be a score in [0, 1]"));
        }
        // 0 would suppress every box that touches a better one; above 1 nothing.
        let iou = self.nms_iou;
        if !(iou > 0.0 && iou <= 1.0) {
            return Err(format!("key `model.nms_iou`: {iou} must be an IoU in (0, 1]"));
        }
        if !(0.0..=1.0).contains(&self.nested_cover) {
            return Err(format!("key `model.nested_cover`: {} must be a share in [0, 1] (0: off)", self.nested_cover));
        }
        if !(self.nested_area > 0.0 && self.nested_area <= 1.0) {
            return Err(format!("key `model.nested_area`: {} must be a share in (0, 1]", self.nested_area));
        }
        if !(1..=MAX_DETECTIONS).contains(&self.max_detections) {
            return Err(format!(
                "key `model.max_detections`: {} must be within 1..={MAX_DETECTIONS}",
                self.max_detections
            ));
        }
        let f = self.fine_head;
        if !f.is_multiple_of(4) || f > MAX_FINE_HEAD {
            return Err(format!(
                "key `model.fine_head`: {f} must be 0 (the tap's width) or a multiple of 4 up to {MAX_FINE_HEAD}"
            ));
        }
        if !(0.25..=4.0).contains(&self.level_scale) {
            return Err(format!("key `model.level_scale`: {} must be within 0.25..=4", self.level_scale));
        }
        self.second_look.validate()?;
        if let Some(t) = self.level_thresholds.filter(|t| t.iter().any(|t| !(*t > 0.0 && *t < 1.0))) {
            return Err(format!("key `model.level_thresholds`: {t:?} must be face scores in (0, 1)"));
        }
        if let Some(s) = self.box_scale.filter(|s| s.iter().any(|s| !BOX_SCALES.contains(s))) {
            return Err(format!("key `model.box_scale`: {s:?} must be scales within 0.25..=4"));
        }
        check_pyramid_above(self.pyramid_above).map_err(|e| format!("key `model.pyramid_above`: {e}"))
    }

    /// The first key on which `other` shapes different weights than `self`
    /// (width, fusion, the stride-8 head, the thresholds folded into the
    /// biases), or None when the same weights serve both: what a model
    /// file's settings may change without training.
    pub fn architecture_change(&self, other: &ModelConfig) -> Option<&'static str> {
        let keys = [
            ("model.width_mult", self.width_mult != other.width_mult),
            ("model.top_down", self.top_down != other.top_down),
            ("model.fine_head", self.fine_head != other.fine_head),
            ("model.level_thresholds", self.level_thresholds != other.level_thresholds),
            ("model.box_scale", self.box_scale != other.box_scale),
        ];
        keys.into_iter().find_map(|(key, differs)| differs.then_some(key))
    }

    pub fn decode_params(&self) -> DecodeParams {
        DecodeParams {
            score_threshold: self.score_threshold,
            nms_iou: self.nms_iou,
            nested_cover: self.nested_cover,
            nested_area: self.nested_area,
            max_detections: self.max_detections,
            pyramid_above: self.pyramid_above,
            smile_vote_floor: self.score_threshold,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(value: impl Serialize) -> Vec<String> {
        let serde_json::Value::Object(map) = serde_json::to_value(value).unwrap() else { panic!("a table") };
        map.into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn the_defaults_and_the_unwritten_keys_name_every_key_a_config_may_set() {
        let mut every = keys(ModelConfig::default());
        every.extend(keys(ModelConfig::default().unwritten()));
        every.sort();
        // A config with no key at its default writes every key but the two
        // only `grin model-set` sets.
        let none_default = ModelConfig {
            fine_head: 8,
            level_scale: 2.0,
            second_look: SecondLook { below: 0.5, ..SecondLook::default() },
            ..ModelConfig::default()
        };
        assert_eq!(every, keys(none_default));
    }
}
