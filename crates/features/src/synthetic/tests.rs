//! The procedural scene generator: determinism, valid boxes, class mix.

use crate::source::SampleRng;
use crate::{FeatureConfig, Pipeline, SceneClass, Smile, Source, Split, SyntheticParams, SyntheticSource};
use grin_terms::boxes::iou;
use rand::SeedableRng;

fn source(w: u32, h: u32, c: u32) -> SyntheticSource {
    SyntheticSource::with_params(w, h, c, SyntheticParams::default()).unwrap()
}

#[test]
fn same_rng_state_gives_the_same_scene() {
    let src = source(160, 120, 1);
    for seed in 0..20 {
        let a = src.scene(seed, &mut SampleRng::seed_from_u64(seed)).unwrap();
        let b = src.scene(seed, &mut SampleRng::seed_from_u64(seed)).unwrap();
        assert_eq!(a, b, "seed {seed}");
    }
    let a = src.generate(&mut SampleRng::seed_from_u64(1));
    let b = src.generate(&mut SampleRng::seed_from_u64(2));
    assert_ne!(a.pixels, b.pixels);
}

#[test]
fn boxes_are_inside_the_image_large_enough_and_barely_overlapping() {
    for (w, h, c) in [(320, 240, 1), (160, 120, 3), (97, 61, 1), (64, 200, 3)] {
        let src = source(w, h, c);
        let mut faces = 0;
        for seed in 0..300 {
            let s = src.generate(&mut SampleRng::seed_from_u64(seed));
            assert_eq!((s.width, s.height, s.channels), (w, h, c));
            assert_eq!(s.pixels.len(), (w * h * c) as usize);
            assert!(s.boxes.len() <= 4);
            for b in &s.boxes {
                assert!(b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= w as f32 && b.y1 <= h as f32, "{b:?} in {w}x{h}");
                // The smallest face is 16 px tall with aspect >= 0.7.
                assert!(b.x1 - b.x0 >= 10.0 && b.y1 - b.y0 >= 10.0, "{b:?}");
                assert!(b.smile != Smile::Unknown);
            }
            for (i, a) in s.boxes.iter().enumerate() {
                for b in &s.boxes[i + 1..] {
                    assert!(iou(a.corners(), b.corners()) <= 0.3 + 1e-4, "faces overlap: {a:?} {b:?}");
                }
            }
            faces += s.boxes.len();
        }
        assert!(faces > 300, "{w}x{h}: only {faces} faces in 300 scenes");
    }
}

#[test]
fn scenes_mix_smiling_non_smiling_and_face_free() {
    let src = source(320, 240, 1);
    let (mut classes, mut smiles, mut frowns) = ([0usize; 3], 0, 0);
    for seed in 0..500 {
        let s = src.generate(&mut SampleRng::seed_from_u64(seed));
        classes[s.class().index()] += 1;
        smiles += s.boxes.iter().filter(|b| b.smile == Smile::Yes).count();
        frowns += s.boxes.iter().filter(|b| b.smile == Smile::No).count();
    }
    let frac = |n: usize| n as f64 / 500.0;
    let face_free = frac(classes[SceneClass::FaceFree.index()]);
    assert!((0.08..=0.25).contains(&face_free), "face-free fraction {face_free}");
    assert!(frac(classes[SceneClass::Smiling.index()]) > 0.4, "{classes:?}");
    assert!(frac(classes[SceneClass::NonSmiling.index()]) > 0.1, "{classes:?}");
    let smile_share = smiles as f64 / (smiles + frowns) as f64;
    assert!((0.4..=0.6).contains(&smile_share), "smiling faces {smile_share}");
}

#[test]
fn faces_stand_out_from_their_surroundings() {
    // A face has dark eyes and mouth on skin: its box must hold real
    // structure (a wide spread of grey levels), never a flat patch.
    let src = source(160, 120, 1);
    for seed in 0..100 {
        let s = src.generate(&mut SampleRng::seed_from_u64(seed));
        for b in &s.boxes {
            let (x0, y0, x1, y1) = (b.x0 as usize, b.y0 as usize, b.x1 as usize, b.y1 as usize);
            let mut v: Vec<u8> = Vec::new();
            for y in y0..y1 {
                v.extend_from_slice(&s.pixels[y * 160 + x0..y * 160 + x1]);
            }
            v.sort_unstable();
            let spread = v[v.len() * 95 / 100] as i32 - v[v.len() * 5 / 100] as i32;
            assert!(spread >= 25, "seed {seed}: face {b:?} has a grey spread of only {spread}");
        }
    }
}

#[test]
fn config_errors_name_the_key() {
    let err = SyntheticSource::with_params(160, 120, 2, SyntheticParams::default()).unwrap_err().to_string();
    assert!(err.contains("features.channels"), "{err}");
    let p = SyntheticParams { min_face: 40.0, max_face: 20.0, ..SyntheticParams::default() };
    let err = SyntheticSource::with_params(160, 120, 1, p).unwrap_err().to_string();
    assert!(err.contains("key `features.source.min_face`/`max_face`") && err.contains("40..20"), "{err}");
    let err = SyntheticSource::with_params(0, 120, 1, SyntheticParams::default()).unwrap_err().to_string();
    assert!(err.contains("features.width"), "{err}");
}

#[test]
fn no_faces_when_max_faces_is_zero() {
    let p = SyntheticParams { max_faces: 0, ..SyntheticParams::default() };
    let src = SyntheticSource::with_params(96, 72, 3, p).unwrap();
    for seed in 0..50 {
        assert!(src.generate(&mut SampleRng::seed_from_u64(seed)).boxes.is_empty());
    }
}

#[test]
fn splits_see_different_scenes() {
    let cfg = FeatureConfig { width: 96, height: 72, ..FeatureConfig::default() };
    let train = Pipeline::new(&cfg, Split::Train).unwrap();
    let val = Pipeline::new(&cfg, Split::Val).unwrap();
    let test = Pipeline::new(&cfg, Split::Test).unwrap();
    for i in 0..10 {
        let (v, _) = val.scene(i).unwrap();
        let (t, _) = test.scene(i).unwrap();
        let (tr, _) = train.scene(i).unwrap();
        assert_ne!(v.pixels, t.pixels);
        assert_ne!(v.pixels, tr.pixels);
    }
}
