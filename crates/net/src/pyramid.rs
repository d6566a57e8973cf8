//! Faces too large for one pass of the network are found on the same frame
//! at half size, then a quarter: a short image pyramid.
//!
//! The network learns faces up to about 110 px (the largest faces its
//! training crops hold), so at 320x240 a face closer to the camera than that,
//! a person leaning in to the robot or a portrait that fills the frame, is
//! missed outright: held-out CelebA portraits shown at twice their size are
//! found 0% of the time in one pass. A half-size pass costs a quarter of the
//! first and brings those faces back into range. Each pass keeps the faces
//! of its own size band, so a large face is not also reported as a small one
//! by the pass that cannot see it whole.

use crate::decode::{nms, DecodeParams, Detection};

/// No pass is made on a frame smaller than this on either side: below the
/// coarsest stride's cell there is nothing left to find.
pub const MIN_PASS_SIDE: usize = 32;

/// How far below its band (`above / 2`) a coarser pass still keeps faces, so
/// a face at the seam is found by both passes and NMS keeps the better box.
pub const SEAM: f32 = 0.8;

/// The passes over a `width` x `height` frame, finest first: the frame
/// itself, then halves (rounded down, as 2x2 pooling gives them) while a
/// face could be longer than the passes so far take and the half is still
/// at least [`MIN_PASS_SIDE`]. `above <= 0` means one pass.
pub fn pass_sizes(width: usize, height: usize, above: f32) -> Vec<(usize, usize)> {
    let mut sizes = vec![(width, height)];
    if above <= 0.0 {
        return sizes;
    }
    let (mut w, mut h, mut reach) = (width, height, above);
    while reach < width.min(height) as f32 && w / 2 >= MIN_PASS_SIDE && h / 2 >= MIN_PASS_SIDE {
        (w, h, reach) = (w / 2, h / 2, reach * 2.0);
        sizes.push((w, h));
    }
    sizes
}

/// One frame's detections from every pass (pass `k` in its own pixels, the
/// frame halved `k` times), as one list in the frame's pixels, best first.
///
/// Pass `k` keeps faces up to `params.pyramid_above` px (the last pass: any
/// size) and, past the first, down to a little under what pass `k - 1`
/// takes; NMS then merges a face found by two passes at the seam.
///
/// A box from a finer pass lying mostly inside a larger one from a coarser
/// pass is not dropped: measured on the validation photos, that rule cost
/// more real faces (a coarse pass's box around a whole group of small ones)
/// than the parts of close faces it removed (Caltech AP 0.795 with it, 0.828
/// without).
pub fn merge(passes: Vec<Vec<Detection>>, params: &DecodeParams) -> Vec<Detection> {
    if passes.len() <= 1 {
        return passes.into_iter().next().unwrap_or_default();
    }
    let last = passes.len() - 1;
    let above = params.pyramid_above;
    let mut banded = Vec::new();
    for (k, found) in passes.into_iter().enumerate() {
        let scale = (1u32 << k) as f32;
        for d in found {
            let side = (d.x1 - d.x0).max(d.y1 - d.y0);
            if (k < last && side > above) || (k > 0 && side < SEAM * above / 2.0) {
                continue;
            }
            banded.push(Detection { x0: d.x0 * scale, y0: d.y0 * scale, x1: d.x1 * scale, y1: d.y1 * scale, ..d });
        }
    }
    nms(banded, params)
}

/// 2x2 means of one `[channels, height, width]` image, rounding the sides
/// down: the next pass's frame, as `avg_pool2d` makes it on a device.
pub fn halve(pixels: &[f32], channels: usize, width: usize, height: usize) -> Vec<f32> {
    let (w, h) = (width / 2, height / 2);
    let mut out = Vec::with_capacity(channels * w * h);
    for plane in pixels.chunks_exact(width * height).take(channels) {
        for y in 0..h {
            let (top, bottom) = (&plane[2 * y * width..], &plane[(2 * y + 1) * width..]);
            out.extend((0..w).map(|x| (top[2 * x] + top[2 * x + 1] + bottom[2 * x] + bottom[2 * x + 1]) * 0.25));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(above: f32) -> DecodeParams {
        DecodeParams {
            score_threshold: 0.3,
            nms_iou: 0.4,
            nested_cover: crate::decode::NESTED_COVER,
            nested_area: crate::decode::NESTED_AREA,
            max_detections: 50,
            pyramid_above: above,
            smile_vote_floor: 0.3,
        }
    }

    fn face(x0: f32, y0: f32, side: f32, score: f32) -> Detection {
        Detection { x0, y0, x1: x0 + side, y1: y0 + side, score, smile: 0.5 }
    }

    #[test]
    fn passes_halve_until_the_largest_face_fits_or_the_frame_is_too_small() {
        assert_eq!(pass_sizes(320, 240, 96.0), [(320, 240), (160, 120), (80, 60)]);
        assert_eq!(pass_sizes(320, 240, 0.0), [(320, 240)]);
        assert_eq!(pass_sizes(320, 240, 240.0), [(320, 240)]);
        assert_eq!(pass_sizes(321, 241, 130.0), [(321, 241), (160, 120)]);
        assert_eq!(pass_sizes(96, 64, 10.0), [(96, 64), (48, 32)]);
    }

    #[test]
    fn each_pass_keeps_its_band_and_boxes_come_back_in_frame_pixels() {
        let small = face(10.0, 10.0, 30.0, 0.9);
        let too_big_for_pass_0 = face(100.0, 20.0, 150.0, 0.8);
        // Pass 1 (half size): a face 40 px there is 80 px in the frame, under
        // the seam of 0.8 * 96 / 2 = 38.4 px: kept; 20 px is pass 0's.
        let large = face(60.0, 10.0, 70.0, 0.7);
        let pass_0s = face(0.0, 80.0, 20.0, 0.95);
        let merged = merge(vec![vec![small, too_big_for_pass_0], vec![large, pass_0s]], &params(96.0));
        assert_eq!(merged, vec![small, face(120.0, 20.0, 140.0, 0.7)]);
    }

    #[test]
    fn a_face_at_the_seam_found_by_both_passes_is_reported_once() {
        let fine = face(40.0, 40.0, 90.0, 0.6);
        let coarse = face(21.0, 19.0, 45.0, 0.8);
        let merged = merge(vec![vec![fine], vec![coarse]], &params(96.0));
        assert_eq!(merged, vec![face(42.0, 38.0, 90.0, 0.8)]);
    }

    #[test]
    fn one_pass_is_returned_as_it_is() {
        let found = vec![face(0.0, 0.0, 200.0, 0.9), face(0.0, 0.0, 190.0, 0.8)];
        assert_eq!(merge(vec![found.clone()], &params(96.0)), found);
    }

    #[test]
    fn halving_averages_each_2x2_block_and_drops_an_odd_edge() {
        #[rustfmt::skip]
        let image = [
            0.0, 1.0, 2.0, 3.0, 9.0,
            4.0, 5.0, 6.0, 7.0, 9.0,
            9.0, 9.0, 9.0, 9.0, 9.0,
            // second channel
            1.0, 1.0, 0.0, 0.0, 5.0,
            1.0, 1.0, 0.0, 4.0, 5.0,
            5.0, 5.0, 5.0, 5.0, 5.0,
        ];
        assert_eq!(halve(&image, 2, 5, 3), [2.5, 4.5, 1.0, 1.0]);
    }
}
