//! `grin eval`'s and `grin calibrate`'s second look at low-scoring boxes:
//! the rule is `grin_net::second_look`, the cuts `grin_image::LookCuts`
//! (as in grin-detect); here the cuts of one photo run as one batch through
//! the model being scored.

use crate::device_batch::upload;
use grin_features::{HeldOutPhoto, HostBatch, Sample};
use grin_image::LookCuts;
use grin_model::{detect, Detector, DetectorBackend};
use grin_net::{second_look, DecodeParams, Detection, SecondLook};

/// `found` (one photo's detections in its frame's pixels, best first)
/// without the boxes a second look does not confirm. Only boxes at or above
/// the deployed threshold (`deploy.score_threshold`) are looked at: the
/// ones below are never reported, so the curve under it stays the
/// network's own (and the look costs what it costs deployed, not a look at
/// every box down to the curve's floor).
pub(crate) fn look_again<B: DetectorBackend>(
    model: &Detector<B>,
    photo: &HeldOutPhoto,
    found: Vec<Detection>,
    look: &SecondLook,
    deploy: &DecodeParams,
    device: &B::Device,
) -> Vec<Detection> {
    if look.is_off() {
        return found;
    }
    let (shown, under): (Vec<Detection>, Vec<Detection>) =
        found.into_iter().partition(|d| d.score >= deploy.score_threshold);
    let side = look.side as u32;
    let mut cuts = LookCuts::new(photo.placement, &photo.source, side);
    let mut kept = second_look(shown, look, deploy, |windows, mirrored| {
        let mut batch = HostBatch::with_capacity(windows.len(), side, side, photo.source.channels);
        for cut in cuts.view(windows, mirrored) {
            batch.push(&Sample {
                width: side,
                height: side,
                channels: cut.channels,
                pixels: cut.pixels.clone(),
                boxes: Vec::new(),
            });
        }
        detect(model, upload::<B>(&batch, device).images, &look.cut_params(deploy))
    });
    kept.extend(under);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_image::{letterbox, Raster};
    use grin_net::nms;

    type B = burn_ndarray::NdArray<f32>;

    static SHIPPED: &[u8] = include_bytes!("../../../assets/default.grin");

    fn boxed(x0: f32, y0: f32, side: f32, score: f32) -> Detection {
        Detection { x0, y0, x1: x0 + side, y1: y0 + side, score, smile: 0.5 }
    }

    #[test]
    fn a_face_is_confirmed_a_box_on_a_flat_wall_is_not_and_unreported_boxes_are_left() {
        let device = Default::default();
        let (spec, model) = grin_model::file::from_bytes::<B>(SHIPPED, &device).unwrap();
        // The test scene (faces) beside a flat wall, letterboxed into 320x240.
        let scene = image::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets/test-scene.png")).unwrap();
        let mut canvas = image::GrayImage::from_pixel(570, 240, image::Luma([90]));
        image::imageops::overlay(&mut canvas, &scene.to_luma8(), 0, 0);
        let source = Raster::from_image(&image::DynamicImage::ImageLuma8(canvas), 1).unwrap();
        let (frame, placement) = letterbox(&source, 320, 240);
        let sample = Sample { width: 320, height: 240, channels: 1, pixels: frame.pixels, boxes: Vec::new() };
        let mut batch = HostBatch::with_capacity(1, 320, 240, 1);
        batch.push(&sample);
        let deploy = spec.model.decode_params();
        let found = detect(&model, upload::<B>(&batch, &device).images, &deploy).remove(0);
        let face = *found.first().expect("the scene's faces are found");
        // On the wall, in frame pixels (the wall is x >= 180 there): one box
        // reported, one under the threshold.
        let wall = boxed(240.0, 100.0, 30.0, deploy.score_threshold + 0.05);
        let unreported = boxed(200.0, 20.0, 30.0, deploy.score_threshold - 0.05);
        let all = nms([found.clone(), vec![wall, unreported]].concat(), &deploy);
        let photo = HeldOutPhoto { sample, found: Vec::new(), source, placement };
        // The shipped model's context: its boxes are taller than the square
        // the default three times was measured with.
        let look = SecondLook { below: 1.0, context: spec.model.second_look.context, ..SecondLook::default() };
        let kept = look_again(&model, &photo, all.clone(), &look, &deploy, &device);
        assert!(kept.contains(&face), "the best face is found again close up: {kept:?}");
        assert!(!kept.contains(&wall), "a flat wall has no face: {kept:?}");
        assert!(kept.contains(&unreported), "a box under the threshold is never reported, so never looked at");
        assert!(kept.iter().all(|d| all.contains(d)));
        assert_eq!(look_again(&model, &photo, all.clone(), &SecondLook::default(), &deploy, &device), all, "off");
    }
}
