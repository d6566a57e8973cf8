//! The second look in grin-detect's path: each wanted box is cut from the
//! picture (not the frame), searched at the cut's size, and kept only when
//! confirmed; the same composition through the public parts gives the same
//! boxes.

use grin_image::{crop_square, Letterbox, Raster};
use grin_infer::{ModelSource, Runner};
use grin_net::{Detection, ModelConfig, SecondLook};
use image::DynamicImage;
use std::path::Path;

/// The test scene (several faces) on a wider flat canvas, so the frame is
/// letterboxed and windows must be mapped back to the picture. The canvas
/// reaches past the scene's top, so that no box is clipped by the picture's
/// edge: the look cuts around the box as decoded, which a clipped box would
/// not give back.
fn picture() -> DynamicImage {
    let scene = image::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/test-scene.png")).unwrap();
    let mut canvas = image::GrayImage::from_pixel(570, 300, image::Luma([90]));
    image::imageops::overlay(&mut canvas, &scene.to_luma8(), 0, 40);
    DynamicImage::ImageLuma8(canvas)
}

/// `runner` with the second look `look` over the model's own settings.
fn set_look(runner: &mut Runner, look: SecondLook) -> anyhow::Result<()> {
    runner.set_model(ModelConfig { second_look: look, ..runner.spec().model.clone() })
}

/// What the look keeps of `found` (in picture pixels), composed from the
/// public parts: the window around each box, cut from the picture (and
/// mirrored, with a mirror), each view searched by a runner at the cut's size.
fn expected(found: &[Detection], look: &SecondLook, picture: &DynamicImage) -> Vec<Detection> {
    let mut at_cut = Runner::load(ModelSource::Embedded).unwrap();
    at_cut.set_run_size(look.side, look.side).unwrap();
    let model = at_cut.spec().model.clone();
    let params = model.decode_params();
    let cut_params = look.cut_params(&params);
    let at_cut_model = ModelConfig {
        // A cut is searched once: the look does not look again inside it.
        second_look: SecondLook::default(),
        score_threshold: cut_params.score_threshold,
        pyramid_above: cut_params.pyramid_above,
        ..model
    };
    at_cut.set_model(at_cut_model).unwrap();
    let source = Raster::from_image(picture, 1).unwrap();
    let frame = Letterbox::fit(source.width, source.height, 320, 240);
    found
        .iter()
        .filter(|d| {
            if !look.wants(d) {
                return true;
            }
            let in_frame = frame.to_frame(d.corners());
            let [x0, y0, x1, y1] = frame.window_to_source(look.window(&Detection {
                x0: in_frame[0],
                y0: in_frame[1],
                x1: in_frame[2],
                y1: in_frame[3],
                ..**d
            }));
            let cut = crop_square(&source, [x0, y0, x1, y1], look.side as u32);
            let views = if look.mirror { vec![cut.clone().mirrored(), cut] } else { vec![cut] };
            let seen: Vec<Vec<Detection>> = views
                .into_iter()
                .map(|v| {
                    let v = DynamicImage::ImageLuma8(image::GrayImage::from_raw(v.width, v.height, v.pixels).unwrap());
                    at_cut.detect(at_cut.frame(&v).unwrap())
                })
                .collect();
            look.confirms(&seen.iter().map(Vec::as_slice).collect::<Vec<_>>(), &params)
        })
        .copied()
        .collect()
}

#[test]
fn a_box_stays_only_if_its_close_cut_finds_a_face_in_its_place() {
    let picture = picture();
    let mut runner = Runner::load(ModelSource::Embedded).unwrap();
    // The boxes as the network and decoding give them, before any look.
    set_look(&mut runner, SecondLook::default()).unwrap();
    let before = runner.detect(runner.frame(&picture).unwrap());
    assert!(before.len() >= 3, "the scene's faces: {before:?}");
    // Every box is looked at.
    // At the shipped model's context: its boxes run forehead to chin, so the
    // default three times a box's longer side would cut a face far smaller.
    let context = runner.spec().model.second_look.context;
    let look = SecondLook { below: 1.0, context, ..SecondLook::default() };
    set_look(&mut runner, look).unwrap();
    let after = runner.detect(runner.frame(&picture).unwrap());
    assert!(!after.is_empty(), "the scene's faces are found again close up: {before:?}");
    let close = |a: &[Detection], b: &[Detection]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| (x.x0 - y.x0).abs() < 0.5 && (x.score - y.score).abs() < 1e-4)
    };
    let want = expected(&before, &look, &picture);
    assert!(close(&after, &want), "runner {after:?}\nparts  {want:?}");
    // With a mirror: the mean of the cut's and its mirror's scores decides.
    let mirror = SecondLook { mirror: true, ..look };
    set_look(&mut runner, mirror).unwrap();
    let mirrored = runner.detect(runner.frame(&picture).unwrap());
    let want = expected(&before, &mirror, &picture);
    assert!(close(&mirrored, &want), "runner {mirrored:?}\nparts  {want:?}");
    assert!(mirrored.contains(&before[0]), "the scene's best face holds both ways round: {mirrored:?}");
    set_look(&mut runner, look).unwrap();
    // A face in the cut must score what the box would be reported at: asking
    // a near-certain score drops the doubtful ones.
    set_look(&mut runner, SecondLook { confirm: 0.999, ..look }).unwrap();
    let strict = runner.detect(runner.frame(&picture).unwrap());
    assert!(strict.len() < after.len() && strict.iter().all(|d| after.contains(d)), "{strict:?} of {after:?}");
}

#[test]
fn a_setting_out_of_range_or_shaping_the_weights_is_refused_naming_the_key() {
    let mut runner = Runner::load(ModelSource::Embedded).unwrap();
    let e = set_look(&mut runner, SecondLook { below: 0.5, side: 8, ..SecondLook::default() }).unwrap_err();
    assert!(e.to_string().contains("model.second_look.side"), "{e}");
    // Decision settings only: a key that shapes the weights is not the runner's to change.
    let wider = ModelConfig { width_mult: runner.spec().model.width_mult * 2.0, ..runner.spec().model.clone() };
    let e = runner.set_model(wider).unwrap_err();
    assert!(e.to_string().contains("model.width_mult"), "{e}");
}
