use super::*;
use grin_image::OnBadSample;
use rand::SeedableRng;

fn config(source: SourceConfig) -> FeatureConfig {
    FeatureConfig { width: 96, height: 72, source, ..FeatureConfig::default() }
}

#[test]
fn graphics_alone_draw_face_free_scenes_with_ink_on_them() {
    let cfg = config(SourceConfig::Negatives { images: None, mined: None, graphics: 1.0, zoom_in: 0.0 });
    let source = NegativesSource::new(&cfg, Split::Train).unwrap();
    let mut rng = SampleRng::seed_from_u64(3);
    let mut changed = 0;
    for i in 0..20 {
        let scene = source.scene(i, &mut rng).unwrap();
        assert!(scene.boxes.is_empty());
        assert_eq!(scene.pixels.len(), 96 * 72);
        changed += usize::from(scene.pixels.iter().any(|&p| !(40..=200).contains(&p)));
    }
    assert!(changed >= 10, "shapes drawn in dark or light ink: {changed}/20");
}

#[test]
fn nothing_to_draw_from_is_refused_naming_the_keys() {
    let cfg = config(SourceConfig::Negatives { images: None, mined: None, graphics: 0.0, zoom_in: 0.0 });
    let e = NegativesSource::new(&cfg, Split::Train).unwrap_err().to_string();
    assert!(e.contains("give `images`, `mined` or a `graphics` share above 0"), "{e}");
    let cfg = config(SourceConfig::Negatives { images: None, mined: None, graphics: 1.5, zoom_in: 0.0 });
    let e = NegativesSource::new(&cfg, Split::Train).unwrap_err().to_string();
    assert!(e.contains("key `features.source.graphics`: 1.5 must be a share in [0, 1]"), "{e}");
    for bad in [-0.1, 1.5, f32::NAN] {
        let cfg = config(SourceConfig::Negatives { images: None, mined: None, graphics: 1.0, zoom_in: bad });
        let e = NegativesSource::new(&cfg, Split::Train).unwrap_err().to_string();
        assert!(e.contains(&format!("key `features.source.zoom_in`: {bad} must be a share in [0, 1]")), "{e}");
    }
}

#[test]
fn close_scenes_show_an_image_near_its_own_pixels() {
    // A ramp across the image: a scene's range of values is the share of
    // the image's width its region spans (half or more as usual; when
    // close, from half the scene's width to half the image, each scale
    // as likely, so most under a quarter).
    let dir = tempfile::tempdir().unwrap();
    let ramp = image::GrayImage::from_fn(640, 480, |x, _| image::Luma([(x * 255 / 639) as u8]));
    ramp.save(dir.path().join("ramp.png")).unwrap();
    let ranges = |zoom_in: f32| {
        let cfg =
            config(SourceConfig::Negatives { images: Some(dir.path().into()), mined: None, graphics: 0.0, zoom_in });
        let cfg = FeatureConfig { split: crate::config::SplitConfig { train: 1.0, val: 0.0, test: 0.0 }, ..cfg };
        let source = NegativesSource::new(&cfg, Split::Train).unwrap();
        let mut rng = SampleRng::seed_from_u64(5);
        (0..20)
            .map(|i| {
                let row = &source.scene(i, &mut rng).unwrap().pixels[..96];
                row.iter().max().unwrap() - row.iter().min().unwrap()
            })
            .collect::<Vec<u8>>()
    };
    let (usual, mut close) = (ranges(0.0), ranges(1.0));
    assert!(usual.iter().all(|&r| r >= 120), "usual regions span half the image or more: {usual:?}");
    assert!(close.iter().all(|&r| (15..=130).contains(&r)), "close regions span 48..320 of 640 px: {close:?}");
    close.sort();
    assert!(close[10] <= 66, "most close regions span under a quarter of the image: {close:?}");
}

#[test]
fn mined_crops_train_and_are_never_held_out() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..6 {
        image::GrayImage::from_pixel(40, 30, image::Luma([(i * 30) as u8]))
            .save(dir.path().join(format!("m{i}.png")))
            .unwrap();
    }
    let cfg =
        config(SourceConfig::Negatives { images: None, mined: Some(dir.path().into()), graphics: 0.0, zoom_in: 0.0 });
    assert_eq!(NegativesSource::new(&cfg, Split::Train).unwrap().mined.len(), 6);
    assert_eq!(NegativesSource::new(&cfg, Split::Val).unwrap().mined.len(), 0);
    // A mining that did not finish (round 14 of issue 90: read as whole).
    std::fs::write(dir.path().join(crate::MINING_MARK), "").unwrap();
    let e = NegativesSource::new(&cfg, Split::Train).err().unwrap().to_string();
    assert!(e.contains(crate::MINING_MARK) && e.contains("did not finish"), "{e}");
    std::fs::remove_file(dir.path().join(crate::MINING_MARK)).unwrap();
    // Images split by name: every one lands in exactly one split.
    let cfg =
        config(SourceConfig::Negatives { images: Some(dir.path().into()), mined: None, graphics: 0.5, zoom_in: 0.0 });
    let per_split: usize = [Split::Train, Split::Val, Split::Test]
        .iter()
        .map(|&s| NegativesSource::new(&cfg, s).unwrap().images.len())
        .sum();
    assert_eq!(per_split, 6);
    // Round 27 of issue 90: the same folder as `images` and `mined` (or a
    // link to it) trained its held-out images as mined crops.
    let alias = dir.path().with_extension("alias");
    std::os::unix::fs::symlink(dir.path(), &alias).unwrap();
    for mined in [dir.path().to_path_buf(), alias.clone()] {
        let both = |on_bad_sample| FeatureConfig {
            on_bad_sample,
            ..config(SourceConfig::Negatives {
                images: Some(dir.path().into()),
                mined: Some(mined.clone()),
                graphics: 0.0,
                zoom_in: 0.0,
            })
        };
        let e = NegativesSource::new(&both(OnBadSample::Error), Split::Train).unwrap_err().to_string();
        assert!(e.contains("is also the image") && e.contains("m0.png"), "{e}");
        let source = NegativesSource::new(&both(OnBadSample::Skip), Split::Train).unwrap();
        assert_eq!(source.mined.len(), 0, "every file is left out of the mined crops");
    }
    std::fs::remove_file(&alias).unwrap();
}

#[test]
fn a_mined_crop_is_a_whole_scene_at_the_scale_it_was_mined() {
    // A crop at the training size with a distinct left and right half:
    // every scene drawn from it is the crop itself, never a zoomed region.
    let dir = tempfile::tempdir().unwrap();
    let crop = image::GrayImage::from_fn(96, 72, |x, _| image::Luma([if x < 48 { 10 } else { 240 }]));
    crop.save(dir.path().join("m.png")).unwrap();
    let cfg =
        config(SourceConfig::Negatives { images: None, mined: Some(dir.path().into()), graphics: 0.0, zoom_in: 0.0 });
    let source = NegativesSource::new(&cfg, Split::Train).unwrap();
    for i in 0..20 {
        let scene = source.scene(i, &mut SampleRng::seed_from_u64(i)).unwrap();
        assert_eq!(scene.pixels, crop.as_raw().as_slice(), "scene {i} is the crop, whole");
    }
}
