//! A second look at a low-scoring box: cut it from the picture with room
//! around it, scale the cut to a fixed square, run the same detector there,
//! and keep the box only if a face is found in its place. With `mirror`,
//! the cut's mirror image is searched too and the box stays when the mean
//! of the two views' scores at its place reaches the threshold: a face is
//! about as much a face in its mirror image, while a texture that happens
//! to score like one rarely does so both ways round.
//!
//! Why: at a photo's own size a small dark blob or a texture can score like
//! a small face, and no threshold separates them (issue "as few false faces
//! as YuNet"). Seen close, with its surroundings, such a box is rarely a
//! face again, while a real face is found again. Measured offline on the
//! validation photos (docs/model.md, "A second look at low-scoring boxes"):
//! every face-free box scored below 0.65, as did 14 of 354 true boxes.
//!
//! The rule lives here once; each engine (grin-detect's, `grin eval`'s)
//! cuts with `grin_image::Letterbox::cut` and runs its own network on the
//! windows [`second_look`] asks for.

use crate::decode::{DecodeParams, Detection};
use grin_terms::boxes::iou;
use serde::{Deserialize, Serialize};

/// A box is confirmed when a detection in its cut overlaps its place at
/// least this much: the IoU at which `grin eval` counts a loose match.
pub const CONFIRM_IOU: f32 = 0.3;

/// The `[model.second_look]` table. Model files written before it existed
/// read it as off, and one at its defaults is not written.
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
    /// Also search the cut mirrored left to right, and confirm on the mean
    /// of the two views' scores at the box's place.
    pub mirror: bool,
}

impl Default for SecondLook {
    /// Off, with the context and side measured best when it is on (three
    /// times the box, 144 px: 2.5x or 4x, 96 or 192 px each kept more false
    /// boxes for the same true ones).
    fn default() -> Self {
        SecondLook { below: 0.0, context: 3.0, side: 144, confirm: 0.0, mirror: false }
    }
}

/// With a mirror, each view is searched down to this score: one view may
/// score under the threshold while the mean of the two reaches it. A view
/// with no face at the box's place at this score counts 0.
pub const MIRROR_FLOOR: f32 = 0.05;

/// Smallest and largest cut side a model may ask for: below 32 px there is
/// no pass to run (`pyramid::MIN_PASS_SIDE`); above 512 the look costs
/// more than the frame.
const SIDES: std::ops::RangeInclusive<usize> = 32..=512;

impl SecondLook {
    pub fn is_off(&self) -> bool {
        self.below <= 0.0
    }

    pub fn is_default(&self) -> bool {
        *self == SecondLook::default()
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

    /// The look a command runs with: the model's own, changed by the flags
    /// given (`--second-look-below`, `--second-look-confirm`,
    /// `--second-look-mirror`), as grin-detect and `grin eval` both take
    /// them.
    ///
    /// The one rule of which flag needs which: `--second-look-confirm` and
    /// `--second-look-mirror` act only on a look that runs, so either one
    /// where none runs (the model's `below` is 0 and no
    /// `--second-look-below` turns it on, or `--second-look-below 0` turns
    /// it off) is refused by name: each changed nothing, silently (issues
    /// 80 and 90).
    #[cfg(feature = "cli")]
    pub(crate) fn with_flags(
        mut self,
        below: Option<f32>,
        confirm: Option<f32>,
        mirror: bool,
    ) -> Result<SecondLook, String> {
        self.below = below.unwrap_or(self.below);
        self.confirm = confirm.unwrap_or(self.confirm);
        self.mirror |= mirror;
        let needs_a_look = [("--second-look-confirm", confirm.is_some()), ("--second-look-mirror", mirror)];
        if let Some((flag, _)) = needs_a_look.iter().find(|(_, given)| *given).filter(|_| self.is_off()) {
            let why = match below {
                Some(_) => "--second-look-below 0 turns it off".to_string(),
                None => format!("the model's second_look.below is {}", self.below),
            };
            return Err(format!(
                "{flag}: no second look runs ({why}), so the flag would change nothing; give --second-look-below \
                 above 0 too, or leave the flag out"
            ));
        }
        self.validate().map_err(|e| format!("--second-look-below / --second-look-confirm: {e}"))?;
        Ok(self)
    }

    /// The score a box's views must reach on average: `confirm`, or the
    /// threshold of `params` (the box's own) when it is 0.
    pub(crate) fn confirm_at(&self, params: &DecodeParams) -> f32 {
        match self.confirm {
            0.0 => params.score_threshold,
            confirm => confirm,
        }
    }

    /// `params` for searching a cut: down to `SecondLook::confirm_at`, or
    /// to [`MIRROR_FLOOR`] with a mirror; in one pass when one pass holds
    /// the box, which sits at `side / context` px in its cut (48 by
    /// default). A halved pass then finds only faces about twice the box,
    /// which never overlap its place at [`CONFIRM_IOU`], and it cost a third
    /// of the look's time (docs/benchmarks.md, "The second look's cost").
    pub fn cut_params(&self, params: &DecodeParams) -> DecodeParams {
        let floor = if self.mirror { MIRROR_FLOOR } else { self.confirm_at(params) };
        let one_pass = self.side as f32 / self.context <= params.pyramid_above;
        let pyramid_above = if one_pass { 0.0 } else { params.pyramid_above };
        DecodeParams { score_threshold: floor, pyramid_above, ..*params }
    }

    /// The views of each cut, in the order [`second_look`] asks for them:
    /// `false` the cut as it is, `true` its mirror image.
    fn views(&self) -> &'static [bool] {
        if self.mirror {
            &[false, true]
        } else {
            &[false]
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

    /// The best score among the detections found in one view of a cut
    /// (its pixels, `side` square) that overlap the box's place, the centre
    /// square of `side / context`, at [`CONFIRM_IOU`]; 0 when none does.
    /// The place is its own mirror image, so a mirrored view scores the same way.
    pub(crate) fn score_at_place(&self, found: &[Detection]) -> f32 {
        let (mid, half) = (0.5 * self.side as f32, 0.5 * self.side as f32 / self.context);
        let place = [mid - half, mid - half, mid + half, mid + half];
        let at_place = found.iter().filter(|d| iou(d.corners(), place) >= CONFIRM_IOU);
        at_place.map(|d| d.score).fold(0.0, f32::max)
    }

    /// Whether a cut's views (each searched with [`SecondLook::cut_params`])
    /// confirm the box reported with `params`: the mean of their
    /// `SecondLook::score_at_place` reaches `SecondLook::confirm_at`.
    pub fn confirms(&self, views: &[&[Detection]], params: &DecodeParams) -> bool {
        let sum: f32 = views.iter().map(|v| self.score_at_place(v)).sum();
        sum / views.len() as f32 >= self.confirm_at(params)
    }
}

/// `found` (best first, reported with `params`) without the boxes a second
/// look does not confirm. `detect(windows, mirrored)` gets the windows of
/// the boxes `look` wants, in order, and returns what the detector finds in
/// each cut (searched with [`SecondLook::cut_params`]), or in each cut's
/// mirror image when `mirrored`: it is called once a view, and not at all
/// when no box is wanted.
pub fn second_look(
    found: Vec<Detection>,
    look: &SecondLook,
    params: &DecodeParams,
    mut detect: impl FnMut(&[[f32; 4]], bool) -> Vec<Vec<Detection>>,
) -> Vec<Detection> {
    let wanted: Vec<usize> = (0..found.len()).filter(|&i| look.wants(&found[i])).collect();
    if wanted.is_empty() {
        return found;
    }
    let windows: Vec<[f32; 4]> = wanted.iter().map(|&i| look.window(&found[i])).collect();
    let seen: Vec<Vec<Vec<Detection>>> = look.views().iter().map(|&mirrored| detect(&windows, mirrored)).collect();
    assert!(seen.iter().all(|view| view.len() == windows.len()), "one result per window");
    let mut dropped = vec![false; found.len()];
    for (k, &i) in wanted.iter().enumerate() {
        let views: Vec<&[Detection]> = seen.iter().map(|view| view[k].as_slice()).collect();
        dropped[i] = !look.confirms(&views, params);
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

    /// Issue 80, cause 6: `--second-look-mirror` on a look-off model
    /// changed nothing and said nothing.
    #[test]
    #[cfg(feature = "cli")]
    fn a_mirror_flag_where_no_look_runs_is_refused_by_name() {
        let off = SecondLook::default();
        let e = off.with_flags(None, None, true).unwrap_err();
        assert!(e.starts_with("--second-look-mirror: no second look runs"), "{e}");
        assert!(on().with_flags(Some(0.0), None, true).is_err(), "turned off by --second-look-below 0");
        assert_eq!(off.with_flags(Some(0.65), None, true).unwrap(), SecondLook { mirror: true, ..on() });
        assert_eq!(on().with_flags(None, Some(0.7), false).unwrap().confirm, 0.7);
        // Issue 90: `--second-look-confirm` too, on a look-off model or after `--second-look-below 0`.
        let e = off.with_flags(None, Some(0.99), false).unwrap_err();
        assert!(e.starts_with("--second-look-confirm: no second look runs (the model's"), "{e}");
        let e = on().with_flags(Some(0.0), Some(0.99), false).unwrap_err();
        assert!(e.starts_with("--second-look-confirm: no second look runs (--second-look-below 0"), "{e}");
        assert_eq!(off.with_flags(Some(0.65), Some(0.99), false).unwrap().confirm, 0.99);
        let e = off.with_flags(Some(1.5), None, false).unwrap_err();
        assert!(e.contains("--second-look-below") && e.contains("model.second_look.below"), "{e}");
    }

    #[test]
    fn the_window_is_context_times_the_longer_side_around_the_box() {
        let d = Detection { x0: 10.0, y0: 20.0, x1: 30.0, y1: 30.0, score: 0.5, smile: 0.5 };
        assert_eq!(on().window(&d), [-10.0, -5.0, 50.0, 55.0]);
    }

    fn params() -> DecodeParams {
        crate::ModelConfig::default().decode_params()
    }

    #[test]
    fn a_cut_confirms_only_with_a_face_in_the_box_place() {
        let (look, p) = (on(), params());
        // The place is 48 px square in the middle of the 144 px cut.
        assert!(look.confirms(&[&[boxed(50.0, 48.0, 46.0, 0.9)]], &p));
        assert!(!look.confirms(&[&[boxed(0.0, 0.0, 48.0, 0.9)]], &p), "a face elsewhere in the cut is another face");
        assert!(!look.confirms(&[&[boxed(66.0, 66.0, 12.0, 0.9)]], &p), "a small box in the middle is not the face");
        assert!(!look.confirms(&[&[]], &p));
        assert_eq!(look.score_at_place(&[boxed(50.0, 48.0, 46.0, 0.7), boxed(49.0, 49.0, 46.0, 0.8)]), 0.8);
    }

    #[test]
    fn with_a_mirror_the_mean_of_both_views_decides() {
        let look = SecondLook { mirror: true, ..on() };
        let p = DecodeParams { score_threshold: 0.5, ..params() };
        assert_eq!(look.cut_params(&p).score_threshold, MIRROR_FLOOR, "a low view still counts");
        assert_eq!(on().cut_params(&p).score_threshold, 0.5, "one view: searched at the threshold");
        assert_eq!(look.cut_params(&p).pyramid_above, 0.0, "a cut is searched in one pass");
        // A box larger than one pass holds (512 / 2 = 256 px) keeps the pyramid.
        let wide = SecondLook { side: 512, context: 2.0, ..look };
        assert_eq!(wide.cut_params(&p).pyramid_above, p.pyramid_above);
        let at = |score| vec![boxed(49.0, 49.0, 46.0, score)];
        let found = vec![boxed(0.0, 0.0, 20.0, 0.55), boxed(100.0, 0.0, 20.0, 0.55), boxed(200.0, 0.0, 20.0, 0.55)];
        let mut asked = Vec::new();
        let kept = second_look(found.clone(), &look, &p, |windows, mirrored| {
            asked.push(mirrored);
            assert_eq!(windows.len(), 3);
            // Plain views 0.45 / 0.6 / 0.9, mirrored 0.6 / 0.3 / nothing:
            // means 0.525, 0.45, 0.45.
            if mirrored {
                vec![at(0.6), at(0.3), vec![]]
            } else {
                vec![at(0.45), at(0.6), at(0.9)]
            }
        });
        assert_eq!(asked, [false, true], "the cut, then its mirror");
        assert_eq!(kept, found[..1], "only the box whose views average 0.5 or more stays");
    }

    #[test]
    fn only_unconfirmed_low_boxes_go_and_high_ones_are_never_looked_at() {
        let found = vec![boxed(0.0, 0.0, 40.0, 0.9), boxed(100.0, 0.0, 20.0, 0.6), boxed(200.0, 0.0, 20.0, 0.5)];
        let mut asked = Vec::new();
        let kept = second_look(found.clone(), &on(), &params(), |windows, mirrored| {
            assert!(!mirrored, "no mirror asked");
            asked = windows.to_vec();
            // The first cut finds the face again, the second nothing.
            vec![vec![boxed(49.0, 49.0, 46.0, 0.7)], vec![]]
        });
        assert_eq!(asked, [on().window(&found[1]), on().window(&found[2])]);
        assert_eq!(kept, found[..2]);
        let off = SecondLook::default();
        assert_eq!(second_look(found.clone(), &off, &params(), |_, _| unreachable!("off: no look")), found);
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
