//! A second look at a low-scoring box: cut it from the picture with room
//! around it, scale the cut to a fixed square, run the same detector there,
//! and keep the box only if a face is found in its place.
//!
//! Why: at a photo's own size a small dark blob or a texture can score like
//! a small face, and no threshold separates them (issue "as few false faces
//! as YuNet"). Seen close, with its surroundings, such a box is rarely a
//! face again, while a real face is found again. Measured offline on the
//! validation photos (docs/model.md, "A second look at low-scoring boxes"):
//! every face-free box scored below 0.65, as did 14 of 354 true boxes.
//!
//! The rule lives here once; each engine (grin-detect's, `grin eval`'s)
//! cuts with `grin_features::Letterbox::cut` and runs its own network on the
//! windows [`second_look`] asks for.

use crate::decode::{iou, DecodeParams, Detection};
use serde::{Deserialize, Serialize};

/// A box is confirmed when a detection in its cut overlaps its place at
/// least this much: the IoU at which `grin eval` counts a loose match.
pub const CONFIRM_IOU: f32 = 0.3;

/// The `[model.second_look]` table. Model files written before it existed
/// read it as off, and an off one is not written.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecondLook {
    /// Boxes scoring below this are looked at again; 0: no second look.
    pub below: f32,
    /// The cut's side as a multiple of the box's longer side: the context
    /// the detector sees around it.
    pub context: f32,
    /// The cut is scaled to a square of this side (px) and searched there.
    pub side: usize,
    /// The face score a detection in the cut needs to confirm the box; 0:
    /// the threshold the box itself was reported at.
    pub confirm: f32,
}

impl Default for SecondLook {
    /// Off, with the context and side measured best when it is on (three
    /// times the box, 144 px: 2.5x or 4x, 96 or 192 px each kept more false
    /// boxes for the same true ones).
    fn default() -> Self {
        SecondLook { below: 0.0, context: 3.0, side: 144, confirm: 0.0 }
    }
}

/// Smallest and largest cut side a model may ask for: below 32 px there is
/// no pass to run (`pyramid::MIN_PASS_SIDE`); above 512 the look costs
/// more than the frame.
const SIDES: std::ops::RangeInclusive<usize> = 32..=512;

impl SecondLook {
    pub fn is_off(&self) -> bool {
        self.below <= 0.0
    }

    /// Every key's range; the message names the dotted key.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.below) {
            return Err(format!("key `model.second_look.below`: {} must be a score in [0, 1] (0: off)", self.below));
        }
        if !(0.0..=1.0).contains(&self.confirm) {
            return Err(format!(
                "key `model.second_look.confirm`: {} must be a score in [0, 1] (0: the threshold)",
                self.confirm
            ));
        }
        if !(1.0..=8.0).contains(&self.context) {
            return Err(format!("key `model.second_look.context`: {} must be within 1..=8", self.context));
        }
        if !SIDES.contains(&self.side) {
            return Err(format!(
                "key `model.second_look.side`: {} must be within {}..={} px",
                self.side,
                SIDES.start(),
                SIDES.end()
            ));
        }
        Ok(())
    }

    /// `params` for searching a cut: a face there needs [`SecondLook::confirm`].
    pub fn cut_params(&self, params: &DecodeParams) -> DecodeParams {
        match self.confirm {
            0.0 => *params,
            confirm => DecodeParams { score_threshold: confirm, ..*params },
        }
    }

    /// Whether `d` gets a second look.
    pub fn wants(&self, d: &Detection) -> bool {
        d.score < self.below
    }

    /// The square cut for `d`, `[x0, y0, x1, y1]` in `d`'s pixels: centred
    /// on it, `context` times its longer side. It may reach past the
    /// picture; the cut fills what lies outside.
    pub fn window(&self, d: &Detection) -> [f32; 4] {
        let half = 0.5 * self.context * (d.x1 - d.x0).max(d.y1 - d.y0);
        let (cx, cy) = (0.5 * (d.x0 + d.x1), 0.5 * (d.y0 + d.y1));
        [cx - half, cy - half, cx + half, cy + half]
    }

    /// Whether the detections found in a cut (its pixels, `side` square)
    /// confirm the box it was cut for: one overlaps the box's place, the
    /// centre square of `side / context`, at [`CONFIRM_IOU`].
    pub fn confirms(&self, found: &[Detection]) -> bool {
        let (mid, half) = (0.5 * self.side as f32, 0.5 * self.side as f32 / self.context);
        let place = [mid - half, mid - half, mid + half, mid + half];
        found.iter().any(|d| iou([d.x0, d.y0, d.x1, d.y1], place) >= CONFIRM_IOU)
    }
}

/// `found` (best first) without the boxes a second look does not confirm.
/// `detect` gets the windows of the boxes `look` wants, in order, and
/// returns what the detector finds in each cut: it is not called when no
/// box is wanted.
pub fn second_look(
    found: Vec<Detection>,
    look: &SecondLook,
    detect: impl FnOnce(&[[f32; 4]]) -> Vec<Vec<Detection>>,
) -> Vec<Detection> {
    let wanted: Vec<usize> = (0..found.len()).filter(|&i| look.wants(&found[i])).collect();
    if wanted.is_empty() {
        return found;
    }
    let windows: Vec<[f32; 4]> = wanted.iter().map(|&i| look.window(&found[i])).collect();
    let seen = detect(&windows);
    assert_eq!(seen.len(), windows.len(), "one result per window");
    let mut dropped = vec![false; found.len()];
    for (&i, cut) in wanted.iter().zip(&seen) {
        dropped[i] = !look.confirms(cut);
    }
    found.into_iter().zip(dropped).filter(|(_, gone)| !gone).map(|(d, _)| d).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed(x0: f32, y0: f32, side: f32, score: f32) -> Detection {
        Detection { x0, y0, x1: x0 + side, y1: y0 + side, score, smile: 0.5 }
    }

    fn on() -> SecondLook {
        SecondLook { below: 0.65, ..SecondLook::default() }
    }

    #[test]
    fn the_window_is_context_times_the_longer_side_around_the_box() {
        let d = Detection { x0: 10.0, y0: 20.0, x1: 30.0, y1: 30.0, score: 0.5, smile: 0.5 };
        assert_eq!(on().window(&d), [-10.0, -5.0, 50.0, 55.0]);
    }

    #[test]
    fn a_cut_confirms_only_with_a_face_in_the_box_place() {
        let look = on();
        // The place is 48 px square in the middle of the 144 px cut.
        assert!(look.confirms(&[boxed(50.0, 48.0, 46.0, 0.5)]));
        assert!(!look.confirms(&[boxed(0.0, 0.0, 48.0, 0.9)]), "a face elsewhere in the cut is another face");
        assert!(!look.confirms(&[boxed(66.0, 66.0, 12.0, 0.9)]), "a small box in the middle is not the face");
        assert!(!look.confirms(&[]));
    }

    #[test]
    fn only_unconfirmed_low_boxes_go_and_high_ones_are_never_looked_at() {
        let found = vec![boxed(0.0, 0.0, 40.0, 0.9), boxed(100.0, 0.0, 20.0, 0.6), boxed(200.0, 0.0, 20.0, 0.5)];
        let mut asked = Vec::new();
        let kept = second_look(found.clone(), &on(), |windows| {
            asked = windows.to_vec();
            // The first cut finds the face again, the second nothing.
            vec![vec![boxed(49.0, 49.0, 46.0, 0.7)], vec![]]
        });
        assert_eq!(asked, [on().window(&found[1]), on().window(&found[2])]);
        assert_eq!(kept, found[..2]);
        let off = SecondLook::default();
        assert_eq!(second_look(found.clone(), &off, |_| unreachable!("off: no look")), found);
    }

    #[test]
    fn out_of_range_keys_are_named() {
        for (bad, key) in [
            (SecondLook { below: 1.5, ..on() }, "below"),
            (SecondLook { below: f32::NAN, ..on() }, "below"),
            (SecondLook { context: 0.5, ..on() }, "context"),
            (SecondLook { side: 16, ..on() }, "side"),
            (SecondLook { confirm: -0.1, ..on() }, "confirm"),
        ] {
            let e = bad.validate().unwrap_err();
            assert!(e.contains(&format!("model.second_look.{key}")), "{e}");
        }
        on().validate().unwrap();
    }
}
