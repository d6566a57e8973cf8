//! A face-logit shift per output level, folded into each head's bias.
//!
//! Why per level: one threshold trades the coarse levels (large faces,
//! portraits) against the finest (small faces, and most false boxes, since
//! stride 8 has sixteen times stride 32's locations to fire on background).
//! Adding `s` to a level's face logits is the same as moving that level's
//! threshold from `logit(t)` to `logit(t) - s` in logits, so one score
//! threshold still serves the decoder, the Pi binary (it reads the folded
//! bias), the ONNX graph and every evaluation unchanged.

use super::Detector;
use crate::config::LevelThresholds;
use crate::points::STRIDES;
use burn::module::Param;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use grin_terms::output::{FACE, OUTPUTS};

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

impl<B: Backend> Detector<B> {
    /// Adds `shift[level]` to the face logit of every location on `level`.
    pub fn shift_face_logits(mut self, shift: LevelShift) -> Self {
        for (head, &s) in self.heads.iter_mut().zip(&shift) {
            let device = head.out.weight.val().device();
            let mut add = [0.0f32; OUTPUTS];
            add[FACE] = s;
            let add = Tensor::from_data(TensorData::new(add.to_vec(), [OUTPUTS]), &device);
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
    use crate::config::ModelConfig;
    use crate::detector::DetectorSpec;
    use burn::backend::NdArray;

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
