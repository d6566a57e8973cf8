//! The pyramid on the shipped model: a face closer to the camera than one
//! pass can take is found by the half-size pass, where one pass misses it;
//! and `grin-detect`'s path (fast kernels, frames halved on the CPU) gives
//! the detections training's evaluation gets from `grin_model::detect`
//! (Burn, frames halved by `avg_pool2d`), on 16:9 images that both
//! letterbox by the one photo path and map back through its placement.

use crate::reference::{BurnModel, Cpu};
use burn::tensor::{Tensor, TensorData};
use grin_infer::{Mapping, ModelSource, Runner, DEFAULT_MODEL};
use grin_net::{Detection, ModelConfig};
use image::imageops::FilterType;
use image::DynamicImage;
use std::path::Path;

fn scene() -> DynamicImage {
    image::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/test-scene.png")).unwrap()
}

/// The test scene's largest face (about 74 px at 320x240, at (87, 28)),
/// shown three times as large, as a person leaning in to the camera: a
/// 107x80 window around it scaled to 320x240, and where that face is then
/// (about 223 px).
fn close_up() -> (DynamicImage, [f32; 4]) {
    let image = scene().crop_imm(71, 25, 107, 80).resize_exact(320, 240, FilterType::Triangle);
    let s = 320.0 / 107.0;
    (image, [(87.5 - 71.0) * s, (28.0 - 25.0) * 3.0, (162.0 - 71.0) * s, (101.4 - 25.0) * 3.0])
}

/// `image` (320x240) widened to 16:9 with a gradient on its right, so the
/// frame has letterbox bars and boxes must be mapped back.
fn widened(image: &DynamicImage) -> DynamicImage {
    let grey = image.to_luma8();
    DynamicImage::ImageLuma8(image::GrayImage::from_fn(427, 240, |x, y| {
        if x < 320 {
            *grey.get_pixel(x, y)
        } else {
            image::Luma([(x / 2 + y / 3) as u8])
        }
    }))
}

fn iou(d: &Detection, b: [f32; 4]) -> f32 {
    grin_terms::boxes::iou(d.corners(), b)
}

#[test]
fn a_face_too_close_for_one_pass_is_found_by_the_half_size_pass() {
    let (image, face) = close_up();
    let mut runner = Runner::load(ModelSource::Embedded).unwrap();
    // The shipped model keeps faces up to 161 px a pass: at half size, 160x120 holds any face.
    assert_eq!(runner.pass_sizes(), [(320, 240), (160, 120)]);
    let found = runner.detect(runner.frame(&image).unwrap());
    assert_eq!(found.len(), 1, "one face, one detection: {found:?}");
    assert!(iou(&found[0], face) >= 0.5, "the pyramid misses the close face: {found:?}");

    runner.set_model(ModelConfig { pyramid_above: 0.0, ..runner.spec().model.clone() }).unwrap();
    assert_eq!(runner.pass_sizes(), [(320, 240)]);
    let one_pass = runner.detect(runner.frame(&image).unwrap());
    assert!(!one_pass.iter().any(|d| iou(d, face) >= 0.5), "one pass finds it after all: {one_pass:?}");
}

#[test]
fn grin_detect_and_training_evaluation_make_the_same_pyramid() {
    let device = Default::default();
    let (spec, model) = grin_model::file::from_bytes::<Cpu>(DEFAULT_MODEL, &device).unwrap();
    let mut runner = Runner::load(ModelSource::Embedded).unwrap();
    // The pyramid alone, look off (tests/look.rs covers the look), at a low
    // threshold, which the smile votes follow as they follow the file's own.
    let decisions =
        ModelConfig { second_look: grin_net::SecondLook::default(), score_threshold: 0.05, ..spec.model.clone() };
    runner.set_model(decisions.clone()).unwrap();
    let params = decisions.decode_params();
    assert_eq!(params.smile_vote_floor, 0.05);
    let burn = BurnModel::new(model.clone());
    let mut compared = 0;
    for image in [scene(), close_up().0].map(|i| widened(&i)) {
        // Evaluation's input: the photo path's u8 frame, divided by 255 as
        // training's batch upload divides it.
        let grin_image::LetterboxedPhoto { frame, placement, .. } =
            grin_image::letterbox_image(&image, 1, 320, 240).unwrap();
        let pixels: Vec<f32> = frame.pixels.iter().map(|&v| v as f32 / 255.0).collect();
        let input = Tensor::<Cpu, 4>::from_data(TensorData::new(pixels, [1, 1, 240, 320]), &device);
        let evaluated: Vec<Detection> = grin_model::detect(&model, input, &params)
            .remove(0)
            .into_iter()
            .filter_map(|d| Mapping(placement).to_source(d))
            .collect();
        // The close-up has its face and one box around it; the scene, several.
        assert!(evaluated.len() >= 2, "too few detections to compare: {evaluated:?}");
        compared += evaluated.len();
        for (engine, reference) in [("fast", None), ("burn", Some(burn.reference()))] {
            runner.set_reference(reference);
            let detected = runner.detect(runner.frame(&image).unwrap());
            assert_eq!(detected.len(), evaluated.len(), "{engine}");
            for (a, b) in detected.iter().zip(&evaluated) {
                let close =
                    [(a.x0, b.x0), (a.y0, b.y0), (a.x1, b.x1), (a.y1, b.y1), (a.score, b.score), (a.smile, b.smile)]
                        .iter()
                        .all(|&(x, y)| (x - y).abs() <= 1e-3 * x.abs().max(1.0));
                assert!(close, "{engine}: {a:?} vs {b:?}");
            }
        }
    }
    assert!(compared >= 5, "boxes compared: {compared}");
}
