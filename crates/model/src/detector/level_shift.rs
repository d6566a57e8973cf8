//! Changes folded into the heads' output biases, so that one score
//! threshold and one decoder still serve every tool (the Pi binary reads the
//! folded bias, as do the ONNX graph and every evaluation):
//!
//! - a face-logit shift per output level ([`shift_for_thresholds`]);
//! - a scale per box side ([`scales_for_box`]): each distance from a point
//!   to the box's left, top, right and bottom edge is `exp` of its channel
//!   times the stride, so adding `ln(s)` to a side's channel scales that side
//!   by `s`. A model trained on one box definition so draws another: exact
//!   for the point at the box's centre, and nearly so for the points near it
//!   that win NMS (stage 5 is stage 4 with its boxes moved this way from
//!   eyebrows-to-chin to forehead-to-chin, docs/design.md, "The face box").
//!
//! The face-logit shift per output level:
//!
//! Why per level: one threshold trades the coarse levels (large faces,
//! portraits) against the finest (small faces, and most false boxes, since
//! stride 8 has sixteen times stride 32's locations to fire on background).
//! Adding `s` to a level's face logits is the same as moving that level's
//! threshold from `logit(t)` to `logit(t) - s` in logits, so one score
//! threshold still serves the decoder, the Pi binary (it reads the folded
//! bias), the ONNX graph and every evaluation unchanged.

use super::Detector;
use burn::module::Param;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use grin_net::STRIDES;
use grin_net::{BoxScale, LevelThresholds, BOX_SCALES};
use grin_terms::output::{DISTANCE, FACE, OUTPUTS};

/// One shift per level, finest first (the order of [`STRIDES`]).
pub type LevelShift = [f32; STRIDES.len()];

/// `"0.5,0.45,0.4"`: one face score in (0, 1) per level, finest first.
pub fn parse_level_thresholds(text: &str) -> Result<LevelThresholds, String> {
    let scores = text
        .split(',')
        .map(|t| match t.trim().parse::<f32>() {
            Ok(t) if t > 0.0 && t < 1.0 => Ok(t),
            _ => Err(format!("`{t}` in `{text}` is not a face score in (0, 1)")),
        })
        .collect::<Result<Vec<f32>, String>>()?;
    scores.try_into().map_err(|_| format!("`{text}`: give one threshold per level (strides {STRIDES:?})"))
}

/// The shift that makes a detector whose score threshold is 0.5 (logit 0)
/// keep a face on level `l` at score `to[l]`, from weights that already
/// hold the shift for `from` (a file's `level_thresholds`; None: none):
/// the same thresholds given twice shift nothing the second time.
pub fn shift_between(from: Option<LevelThresholds>, to: LevelThresholds) -> LevelShift {
    let logit_shift = |t: f32| (1.0 - t).ln() - t.ln();
    let mut shift = to.map(logit_shift);
    if let Some(from) = from {
        for (s, f) in shift.iter_mut().zip(from) {
            *s -= logit_shift(f);
        }
    }
    shift
}

/// `"1.1,2.05,1.1,1.24"`: one scale per side (left, top, right, bottom),
/// each in 0.25..=4 (past that a model is being retrained, not re-read).
pub fn scales_for_box(text: &str) -> Result<BoxScale, String> {
    let scales = text
        .split(',')
        .map(|t| match t.trim().parse::<f32>() {
            Ok(s) if BOX_SCALES.contains(&s) => Ok(s),
            _ => Err(format!("`{t}` in `{text}` is not a scale in 0.25..=4")),
        })
        .collect::<Result<Vec<f32>, String>>()?;
    scales.try_into().map_err(|_| format!("`{text}`: give four scales, left, top, right and bottom"))
}

impl<B: Backend> Detector<B> {
    /// Adds `shift[level]` to the face logit of every location on `level`.
    pub fn shift_face_logits(self, shift: LevelShift) -> Self {
        self.add_to_output_biases(|level| {
            let mut add = [0.0f32; OUTPUTS];
            add[FACE] = shift[level];
            add
        })
    }

    /// Scales every predicted box side to `to` (left, top, right, bottom)
    /// times what it was before `from` was folded in (a file's `box_scale`;
    /// None: none): the same scales given twice move nothing the second time.
    pub fn scale_box_sides(self, from: Option<BoxScale>, to: BoxScale) -> Self {
        let from = from.unwrap_or([1.0; 4]);
        self.add_to_output_biases(|_| {
            let mut add = [0.0f32; OUTPUTS];
            for k in 0..4 {
                add[DISTANCE + k] = to[k].ln() - from[k].ln();
            }
            add
        })
    }

    /// Adds `add(level)` to each output channel's bias of that level's head.
    fn add_to_output_biases(mut self, add: impl Fn(usize) -> [f32; OUTPUTS]) -> Self {
        for (level, head) in self.heads.iter_mut().enumerate() {
            let device = head.out.weight.val().device();
            let add = Tensor::from_data(TensorData::new(add(level).to_vec(), [OUTPUTS]), &device);
            // Every head's output conv has a bias (`Head::new`); one without
            // would start from zero, so the shift is never lost.
            head.out.bias = Some(match head.out.bias.take() {
                Some(bias) => bias.map(|b| b + add),
                None => Param::from_tensor(add),
            });
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InitDetector;
    use burn::backend::NdArray;
    use grin_net::DetectorSpec;
    use grin_net::ModelConfig;

    #[test]
    fn thresholds_become_shifts_and_bad_ones_are_named() {
        let thresholds = parse_level_thresholds("0.5, 0.25,0.75").unwrap();
        let shift = shift_between(None, thresholds);
        let want = [0.0, 3f32.ln(), -(3f32.ln())];
        assert!(shift.iter().zip(want).all(|(s, w)| (s - w).abs() < 1e-6), "{shift:?}");
        for (bad, named) in [("0.5,0.5", "one threshold per level"), ("0.5,1,0.5", "`1`"), ("0.5,x,0.5", "`x`")] {
            let why = parse_level_thresholds(bad).unwrap_err();
            assert!(why.contains(named), "{bad}: {why}");
        }
        // Over weights that hold them already, the same thresholds shift nothing (issue 90).
        assert_eq!(shift_between(Some(thresholds), thresholds), [0.0; 3]);
        let moved = shift_between(Some([0.5, 0.5, 0.5]), thresholds);
        assert!(moved.iter().zip(want).all(|(s, w)| (s - w).abs() < 1e-6), "{moved:?}");
    }

    #[test]
    fn box_scales_are_parsed_and_bad_ones_named() {
        assert_eq!(scales_for_box("1.1, 2,1.1,0.5").unwrap(), [1.1, 2.0, 1.1, 0.5]);
        for (bad, named) in [("1,1,1", "four scales"), ("1,1,1,5", "`5`"), ("1,0,1,1", "`0`"), ("1,x,1,1", "`x`")] {
            let why = scales_for_box(bad).unwrap_err();
            assert!(why.contains(named), "{bad}: {why}");
        }
    }

    #[test]
    fn a_box_scale_moves_each_sides_distance_logit_by_its_log_and_nothing_else() {
        let spec = DetectorSpec { model: ModelConfig::default(), width: 64, height: 48, channels: 1 };
        let device = Default::default();
        let model = spec.init::<NdArray<f32>>(&device);
        let image = Tensor::<NdArray<f32>, 4>::ones([1, 1, 48, 64], &device) * 0.5;
        let before = model.forward(image.clone()).raw.into_data().to_vec::<f32>().unwrap();
        let scale = [1.1, 2.0, 1.1, 1.25];
        let after = model
            .scale_box_sides(Some([1.0, 1.5, 1.0, 1.0]), scale)
            .forward(image)
            .raw
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let n = spec.points().len();
        for channel in 0..OUTPUTS {
            // From the 1.5 already folded into the top side, to `scale`.
            let from = [1.0f32, 1.5, 1.0, 1.0];
            let want = if (DISTANCE..DISTANCE + 4).contains(&channel) {
                scale[channel - DISTANCE].ln() - from[channel - DISTANCE].ln()
            } else {
                0.0
            };
            for i in 0..n {
                let moved = after[channel * n + i] - before[channel * n + i];
                assert!((moved - want).abs() < 1e-5, "channel {channel} point {i}: moved {moved}, want {want}");
            }
        }
    }

    #[test]
    fn a_shift_moves_its_levels_face_logits_and_nothing_else() {
        let spec = DetectorSpec { model: ModelConfig::default(), width: 64, height: 48, channels: 1 };
        let device = Default::default();
        let model = spec.init::<NdArray<f32>>(&device);
        let image = Tensor::<NdArray<f32>, 4>::ones([1, 1, 48, 64], &device) * 0.5;
        let before = model.forward(image.clone()).raw.into_data().to_vec::<f32>().unwrap();
        let shift = [0.25, -0.5, 1.0];
        let after = model.shift_face_logits(shift).forward(image).raw.into_data().to_vec::<f32>().unwrap();
        let points = spec.points();
        let n = points.len();
        let level_of = |i: usize| STRIDES.iter().position(|&s| s as f32 == points.stride[i]).unwrap();
        for channel in 0..OUTPUTS {
            for i in 0..n {
                let want = if channel == FACE { shift[level_of(i)] } else { 0.0 };
                let moved = after[channel * n + i] - before[channel * n + i];
                assert!((moved - want).abs() < 1e-5, "channel {channel} point {i}: moved {moved}, want {want}");
            }
        }
    }
}
