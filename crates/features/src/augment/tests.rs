//! Each augmentation keeps boxes consistent with the pixels.

use crate::augment;
use crate::augment::AugmentStage;
use crate::source::SampleRng;
use crate::{AugmentConfig, FaceBox, Sample, Smile, SyntheticParams, SyntheticSource};
use rand::SeedableRng;

/// A grey image with one bright rectangle, boxed.
fn blob(w: u32, h: u32, c: u32, b: [f32; 4]) -> Sample {
    let mut pixels = vec![40u8; (w * h * c) as usize];
    for y in b[1] as u32..b[3] as u32 {
        for x in b[0] as u32..b[2] as u32 {
            for k in 0..c {
                pixels[((y * w + x) * c + k) as usize] = 220;
            }
        }
    }
    let boxes = vec![FaceBox { x0: b[0], y0: b[1], x1: b[2], y1: b[3], smile: Smile::Yes }];
    Sample { width: w, height: h, channels: c, pixels, boxes }
}

/// Mean value inside a box (channel 0).
fn mean_in(s: &Sample, b: &FaceBox) -> f32 {
    let (mut sum, mut n) = (0f32, 0f32);
    for y in b.y0.ceil() as u32..b.y1.floor() as u32 {
        for x in b.x0.ceil() as u32..b.x1.floor() as u32 {
            sum += s.pixels[((y * s.width + x) * s.channels) as usize] as f32;
            n += 1.0;
        }
    }
    sum / n
}

fn rng() -> SampleRng {
    SampleRng::seed_from_u64(7)
}

#[test]
fn flip_mirrors_pixels_and_boxes() {
    for c in [1, 3] {
        let mut s = blob(40, 30, c, [4.0, 5.0, 14.0, 20.0]);
        let orig = s.clone();
        augment::flip(&mut s);
        let b = s.boxes[0];
        assert_eq!((b.x0, b.x1, b.y0, b.y1), (40.0 - 14.0, 40.0 - 4.0, 5.0, 20.0));
        assert!(mean_in(&s, &b) > 200.0);
        for k in 0..c as usize {
            assert_eq!(s.pixels[(3 * 40 + 39) * c as usize + k], orig.pixels[(3 * 40) * c as usize + k]);
        }
        augment::flip(&mut s);
        assert_eq!(s, orig);
    }
}

#[test]
fn crop_scales_boxes_and_drops_heavily_cut_ones() {
    let mut s = blob(100, 80, 1, [30.0, 20.0, 50.0, 40.0]);
    s.boxes.push(FaceBox { x0: 45.0, y0: 50.0, x1: 65.0, y1: 70.0, smile: Smile::No }); // 75% outside
    s.boxes.push(FaceBox { x0: 40.0, y0: 0.0, x1: 60.0, y1: 20.0, smile: Smile::No }); // 25% outside
    s.boxes.push(FaceBox { x0: 80.0, y0: 60.0, x1: 95.0, y1: 75.0, smile: Smile::No }); // fully outside
    augment::crop(&mut s, [10.0, 0.0, 60.0, 40.0], 0.5);
    assert_eq!(s.boxes.len(), 2, "{:?}", s.boxes);
    let b = s.boxes[0];
    // Window 50x40 -> 100x80: factor 2 in both axes.
    assert_eq!((b.x0, b.y0, b.x1, b.y1), (40.0, 40.0, 80.0, 80.0));
    assert!(mean_in(&s, &FaceBox { x0: 42.0, y0: 42.0, x1: 78.0, y1: 78.0, ..b }) > 210.0);
    let clipped = s.boxes[1];
    assert_eq!((clipped.x0, clipped.y0, clipped.x1, clipped.y1), (60.0, 0.0, 100.0, 40.0));
}

#[test]
fn zooming_out_shrinks_boxes_and_drops_tiny_ones() {
    let mut s = blob(100, 80, 3, [40.0, 30.0, 60.0, 50.0]);
    s.boxes.push(FaceBox { x0: 10.0, y0: 10.0, x1: 13.0, y1: 13.0, smile: Smile::No });
    augment::crop(&mut s, [-100.0, -80.0, 200.0, 160.0], 0.5);
    assert_eq!(s.boxes.len(), 1, "a 1 px box must be dropped: {:?}", s.boxes);
    let b = s.boxes[0];
    assert!((b.x1 - b.x0 - 20.0 / 3.0).abs() < 1e-3);
    assert!(mean_in(&s, &b) > 150.0);
}

#[test]
fn rotation_moves_boxes_with_the_content() {
    let mut s = blob(80, 80, 1, [50.0, 10.0, 70.0, 30.0]);
    let orig = s.clone();
    augment::rotate(&mut s, 0.0, 0.5);
    assert_eq!(s, orig);
    // A quarter turn counter-clockwise takes the top-right corner to the top-left.
    augment::rotate(&mut s, 90.0, 0.5);
    let b = s.boxes[0];
    assert!((b.x0 - 10.0).abs() < 0.01 && (b.x1 - 30.0).abs() < 0.01, "{b:?}");
    assert!((b.y0 - 10.0).abs() < 0.01 && (b.y1 - 30.0).abs() < 0.01, "{b:?}");
    assert!(mean_in(&s, &b) > 200.0);
    // At a small angle the box stays on the blob's centre.
    let mut s = blob(80, 80, 3, [50.0, 10.0, 70.0, 30.0]);
    augment::rotate(&mut s, 10.0, 0.5);
    let b = s.boxes[0];
    let inner = FaceBox { x0: b.x0 + 4.0, y0: b.y0 + 4.0, x1: b.x1 - 4.0, y1: b.y1 - 4.0, ..b };
    assert!(mean_in(&s, &inner) > 200.0, "{b:?}");
}

#[test]
fn photometric_stages_do_what_they_say() {
    let flat = |v: u8| Sample { width: 32, height: 32, channels: 1, pixels: vec![v; 1024], boxes: vec![] };
    let mut s = flat(100);
    augment::brightness(&mut s, 30.0);
    assert!(s.pixels.iter().all(|&p| p == 130));
    augment::brightness(&mut s, 500.0);
    assert!(s.pixels.iter().all(|&p| p == 255));

    let mut s = blob(32, 32, 1, [0.0, 0.0, 16.0, 32.0]); // half 220, half 40: mean 130
    augment::contrast(&mut s, 0.5);
    assert!(s.pixels.iter().all(|&p| p == 175 || p == 85), "{:?}", &s.pixels[..4]);

    let mut s = flat(64);
    augment::gamma(&mut s, 2.0);
    assert!(s.pixels.iter().all(|&p| p == 16));
    let mut s = flat(64);
    augment::gamma(&mut s, 1.0);
    assert!(s.pixels.iter().all(|&p| p == 64));

    let mut s = blob(32, 32, 1, [0.0, 0.0, 16.0, 32.0]);
    let before: u32 = s.pixels.iter().map(|&p| p as u32).sum();
    augment::blur(&mut s, 1.5);
    let after: u32 = s.pixels.iter().map(|&p| p as u32).sum();
    assert!((before as f32 - after as f32).abs() / (before as f32) < 0.01);
    assert!(s.pixels[16 * 32 + 15] < 220 && s.pixels[16 * 32 + 15] > 40, "edge must soften");
    assert_eq!(s.pixels[16 * 32], 220, "far from the edge stays");

    let mut s = Sample { width: 100, height: 100, channels: 1, pixels: vec![128; 10000], boxes: vec![] };
    augment::noise(&mut s, 8.0, &mut rng());
    let mean = s.pixels.iter().map(|&p| p as f64).sum::<f64>() / 10000.0;
    let var = s.pixels.iter().map(|&p| (p as f64 - mean).powi(2)).sum::<f64>() / 10000.0;
    assert!((mean - 128.0).abs() < 0.5, "noise mean {mean}");
    assert!((var.sqrt() - 8.0).abs() < 0.5, "noise sigma {}", var.sqrt());
}

#[test]
fn jpeg_round_trip_keeps_the_image_close() {
    for c in [1, 3] {
        let src = SyntheticSource::with_params(96, 72, c, SyntheticParams::default()).unwrap();
        let orig = src.generate(&mut rng());
        let mut s = orig.clone();
        augment::jpeg(&mut s, 90).unwrap();
        assert_eq!(s.pixels.len(), orig.pixels.len());
        assert_eq!(s.boxes, orig.boxes);
        let mad = s.pixels.iter().zip(&orig.pixels).map(|(a, b)| (*a as i32 - *b as i32).abs()).sum::<i32>() as f64
            / s.pixels.len() as f64;
        assert!(mad > 0.0 && mad < 8.0, "mean abs diff {mad}");
    }
}

#[test]
fn every_stage_keeps_boxes_valid_for_1_and_3_channels() {
    let cfg = AugmentConfig { rotate_deg: 15.0, ..AugmentConfig::default() };
    for c in [1, 3] {
        let src = SyntheticSource::with_params(120, 90, c, SyntheticParams::default()).unwrap();
        for stage in AugmentStage::ALL {
            for seed in 0..30 {
                let mut r = SampleRng::seed_from_u64(seed);
                let mut s = src.generate(&mut r);
                let n = s.boxes.len();
                augment::apply_stage(stage, &mut s, &cfg, &mut r).unwrap();
                assert_eq!(s.pixels.len(), (120 * 90 * c) as usize, "{stage}");
                assert!(s.boxes.len() <= n, "{stage}");
                for b in &s.boxes {
                    assert!(b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= 120.0 && b.y1 <= 90.0, "{stage}: {b:?}");
                    assert!(b.x1 - b.x0 >= 2.0 && b.y1 - b.y0 >= 2.0, "{stage}: {b:?}");
                }
            }
        }
    }
}

#[test]
fn augment_is_deterministic_and_respects_zero_probabilities() {
    let src = SyntheticSource::with_params(96, 72, 1, SyntheticParams::default()).unwrap();
    let all = AugmentConfig {
        flip: 1.0,
        crop: 1.0,
        rotate: 1.0,
        brightness: 1.0,
        contrast: 1.0,
        gamma: 1.0,
        blur: 1.0,
        noise: 1.0,
        jpeg: 1.0,
        ..AugmentConfig::default()
    };
    let run = |cfg: &AugmentConfig| {
        let mut r = rng();
        let mut s = src.generate(&mut r);
        augment::augment(&mut s, cfg, &mut r).unwrap();
        s
    };
    assert_eq!(run(&all), run(&all));
    let none = AugmentConfig::off();
    assert_eq!(run(&none), src.generate(&mut rng()));
    assert_ne!(run(&all).pixels, run(&none).pixels);
}

#[test]
fn bad_names_and_values_are_errors() {
    let err = "sharpen".parse::<AugmentStage>().unwrap_err();
    assert!(err.to_string().contains("sharpen"), "{err}");
    let err = augment::validate(&AugmentConfig { flip: 1.5, ..AugmentConfig::default() }).unwrap_err();
    assert!(err.to_string().contains("features.augment.flip"), "{err}");
    let err = augment::validate(&AugmentConfig { crop_scale: (0.9, 0.5), ..AugmentConfig::default() }).unwrap_err();
    assert!(err.to_string().contains("features.augment.crop_scale"), "{err}");
    let err = augment::validate(&AugmentConfig { jpeg_quality: (0, 50), ..AugmentConfig::default() }).unwrap_err();
    assert!(err.to_string().contains("features.augment.jpeg_quality"), "{err}");
    augment::validate(&AugmentConfig::default()).unwrap();
}
