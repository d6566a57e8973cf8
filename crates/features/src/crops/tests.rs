//! Compositing face crops into scenes, on crop folders the tests write.

use crate::crops::paste_face;
use crate::crops::CropsSource;
use crate::crops::Placement;
use crate::source::SampleRng;
use crate::split::split_of_name;
use crate::{FeatureConfig, Smile, Source, SourceConfig, Split, SplitConfig};
use grin_image::Raster;
use rand::SeedableRng;
use std::path::{Path, PathBuf};

/// `smile/` crops are white, `no_smile/` crops black, so a box's label can be
/// checked against the pixels under its centre.
fn write_crops(root: &Path, per_class: usize) {
    for (folder, value) in [("smile", 255u8), ("no_smile", 0u8)] {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..per_class {
            let img = image::GrayImage::from_pixel(64, 64, image::Luma([value]));
            img.save(dir.join(format!("{folder}_{i}.png"))).unwrap();
        }
    }
}

fn config(root: PathBuf, max_faces: usize, split: SplitConfig) -> FeatureConfig {
    FeatureConfig {
        width: 160,
        height: 128,
        source: SourceConfig::Crops {
            root,
            max_faces,
            min_face: 16.0,
            max_face: 80.0,
            rotation_deg: 15.0,
            backgrounds: None,
        },
        split,
        ..FeatureConfig::default()
    }
}

fn all_train() -> SplitConfig {
    SplitConfig { train: 1.0, val: 0.0, test: 0.0 }
}

#[test]
fn scenes_have_boxes_inside_the_image_labelled_by_folder() {
    let dir = tempfile::tempdir().unwrap();
    write_crops(dir.path(), 6);
    let source = CropsSource::new(&config(dir.path().into(), 1, all_train()), Split::Train).unwrap();
    assert_eq!(source.counts(), (6, 6));
    assert_eq!(source.name(), "crops");
    let mut labels = [0usize; 2];
    for index in 0..200u64 {
        let mut rng = SampleRng::seed_from_u64(index);
        let s = source.scene(index, &mut rng).unwrap();
        assert_eq!((s.width, s.height, s.channels, s.pixels.len()), (160, 128, 1, 160 * 128));
        assert!(s.boxes.len() <= 1);
        for b in &s.boxes {
            assert!(b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= 160.0 && b.y1 <= 128.0, "{b:?}");
            let side = (b.x1 - b.x0).min(b.y1 - b.y0);
            assert!((16.0..=80.0 * 1.2).contains(&side), "face side {side} out of range: {b:?}");
            // The centre of a lone face is fully opaque crop.
            let (cx, cy) = (((b.x0 + b.x1) / 2.0) as usize, ((b.y0 + b.y1) / 2.0) as usize);
            let centre = s.pixels[cy * 160 + cx];
            match b.smile {
                Smile::Yes => {
                    assert_eq!(centre, 255, "smiling crops are white");
                    labels[1] += 1;
                }
                Smile::No => {
                    assert_eq!(centre, 0, "non-smiling crops are black");
                    labels[0] += 1;
                }
                Smile::Unknown | Smile::Ignore => panic!("crop folders always label the smile"),
            }
        }
    }
    assert!(labels[0] > 40 && labels[1] > 40, "both folders are drawn from: {labels:?}");
}

#[test]
fn scenes_are_deterministic_per_rng_and_faces_do_not_pile_up() {
    let dir = tempfile::tempdir().unwrap();
    write_crops(dir.path(), 4);
    let source = CropsSource::new(&config(dir.path().into(), 6, all_train()), Split::Train).unwrap();
    let mut most = 0;
    for index in 0..100u64 {
        let a = source.scene(index, &mut SampleRng::seed_from_u64(7 + index)).unwrap();
        let b = source.scene(index, &mut SampleRng::seed_from_u64(7 + index)).unwrap();
        assert_eq!(a, b);
        most = most.max(a.boxes.len());
        for (i, p) in a.boxes.iter().enumerate() {
            for q in &a.boxes[i + 1..] {
                let iw = (p.x1.min(q.x1) - p.x0.max(q.x0)).max(0.0);
                let ih = (p.y1.min(q.y1) - p.y0.max(q.y0)).max(0.0);
                let smaller = ((p.x1 - p.x0) * (p.y1 - p.y0)).min((q.x1 - q.x0) * (q.y1 - q.y0));
                assert!(iw * ih <= 0.25 * smaller + 1e-3, "heavy overlap {p:?} {q:?}");
            }
        }
    }
    assert!(most >= 3, "several faces per scene happen: at most {most}");
}

#[test]
fn split_is_deterministic_and_disjoint() {
    let dir = tempfile::tempdir().unwrap();
    write_crops(dir.path(), 50);
    let ratios = SplitConfig { train: 0.6, val: 0.2, test: 0.2 };
    let mut total = 0;
    for split in [Split::Train, Split::Val, Split::Test] {
        let a = CropsSource::new(&config(dir.path().into(), 2, ratios.clone()), split).unwrap();
        let b = CropsSource::new(&config(dir.path().into(), 2, ratios.clone()), split).unwrap();
        assert_eq!(a.counts(), b.counts());
        let (s, n) = a.counts();
        assert!(s + n > 0, "{split:?} is not empty");
        total += s + n;
    }
    // Every file lands in exactly one split.
    assert_eq!(total, 100);
    let names: Vec<String> = (0..1000).map(|i| format!("{i}.jpg")).collect();
    let train = names.iter().filter(|n| split_of_name(n, &ratios) == Split::Train).count();
    assert!((540..660).contains(&train), "about 60% train: {train}");
    assert!(names.iter().all(|n| split_of_name(n, &ratios) == split_of_name(n, &ratios)));
}

#[test]
fn feathered_ellipse_leaves_no_square_border() {
    let crop = Raster { width: 64, height: 64, channels: 1, pixels: vec![200; 64 * 64] };
    let mut canvas = vec![0u8; 100 * 100];
    let p = Placement::new(&crop, 60.0, 0.0);
    paste_face(&mut canvas, 100, 100, 1, &crop, &p, 50.0, 50.0);
    let at = |x: usize, y: usize| canvas[y * 100 + x];
    assert_eq!(at(50, 50), 200, "opaque centre");
    for (x, y) in [(21, 21), (78, 21), (21, 78), (78, 78)] {
        assert_eq!(at(x, y), 0, "the crop's corners stay background at ({x},{y})");
    }
    // Along the horizontal axis the face fades in, never steps up at once.
    let row: Vec<u8> = (20..50).map(|x| at(x, 50)).collect();
    assert!(row.windows(2).all(|w| w[0] <= w[1]), "{row:?}");
    assert!(row.iter().any(|v| *v > 20 && *v < 180), "a soft edge exists: {row:?}");
    let face = p.face_box(50.0, 50.0, Smile::Yes);
    assert_eq!((face.x0, face.x1), (20.0, 80.0));
}

#[test]
fn real_smilesmiled_crops_composite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/smilesmiled");
    if !root.join("smile").is_dir() {
        eprintln!("skipping: SMILEsmileD not found at {}", root.display());
        return;
    }
    let mut cfg = config(root, 4, SplitConfig::default());
    cfg.width = 320;
    cfg.height = 240;
    let source = CropsSource::new(&cfg, Split::Val).unwrap();
    let (smiling, non_smiling) = source.counts();
    // 3690 smiling and 9475 non-smiling crops; val is about a tenth.
    assert!((250..500).contains(&smiling), "{smiling}");
    assert!((750..1200).contains(&non_smiling), "{non_smiling}");
    let mut faces = 0;
    for index in 0..32u64 {
        let s = source.scene(index, &mut SampleRng::seed_from_u64(index)).unwrap();
        for b in &s.boxes {
            assert!(b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= 320.0 && b.y1 <= 240.0, "{b:?}");
            assert_ne!(b.smile, Smile::Unknown);
        }
        faces += s.boxes.len();
    }
    assert!(faces > 20, "{faces} faces in 32 scenes");
}

#[test]
fn background_folder_images_fill_the_scene() {
    let dir = tempfile::tempdir().unwrap();
    write_crops(dir.path(), 2);
    let backgrounds = dir.path().join("backgrounds");
    std::fs::create_dir_all(&backgrounds).unwrap();
    image::GrayImage::from_pixel(300, 200, image::Luma([77])).save(backgrounds.join("wall.png")).unwrap();
    let mut cfg = config(dir.path().into(), 0, all_train());
    if let SourceConfig::Crops { backgrounds: b, .. } = &mut cfg.source {
        *b = Some(backgrounds.clone());
    }
    let source = CropsSource::new(&cfg, Split::Train).unwrap();
    let s = source.scene(0, &mut SampleRng::seed_from_u64(3)).unwrap();
    assert!(s.boxes.is_empty());
    assert!(s.pixels.iter().all(|p| *p == 77), "a region of the background image, resampled");
    // An empty background folder is named, or counted and replaced by textures under Skip.
    std::fs::remove_file(backgrounds.join("wall.png")).unwrap();
    let error = CropsSource::new(&cfg, Split::Train).unwrap_err().to_string();
    assert!(error.contains(&backgrounds.display().to_string()), "{error}");
    cfg.on_bad_sample = grin_image::OnBadSample::Skip;
    let source = CropsSource::new(&cfg, Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(grin_image::BadInputKind::EmptyFolder), 1);
    let s = source.scene(0, &mut SampleRng::seed_from_u64(3)).unwrap();
    assert!(s.pixels.iter().any(|p| *p != s.pixels[0]), "procedural texture instead");
}

/// Round 23 of issue 90: a crop under both `smile/` and `no_smile/` (a hard
/// link, or `smile` a link to `no_smile`) trained as smiling and as not.
#[test]
fn a_crop_under_both_labels_is_named_or_left_out() {
    let dir = tempfile::tempdir().unwrap();
    write_crops(dir.path(), 4);
    let linked = dir.path().join("smile/no_smile_0.png");
    std::fs::hard_link(dir.path().join("no_smile/no_smile_0.png"), &linked).unwrap();
    let mut cfg = config(dir.path().into(), 1, all_train());
    let e = CropsSource::new(&cfg, Split::Train).unwrap_err().to_string();
    assert!(e.contains("no_smile_0.png: is also") && e.contains("has two labels"), "{e}");
    cfg.on_bad_sample = grin_image::OnBadSample::Skip;
    let source = CropsSource::new(&cfg, Split::Train).unwrap();
    assert_eq!(source.counts(), (4, 3), "the file left out of both folders");
    // One folder a link to the other: every crop has two labels.
    std::fs::remove_dir_all(dir.path().join("smile")).unwrap();
    std::os::unix::fs::symlink("no_smile", dir.path().join("smile")).unwrap();
    cfg.on_bad_sample = grin_image::OnBadSample::Error;
    let e = CropsSource::new(&cfg, Split::Train).unwrap_err().to_string();
    assert!(e.contains("has two labels"), "{e}");
}

/// Round 26 of issue 90: a `backgrounds` folder that is the source's own
/// `smile/`, or holds a link to a crop, taught faces as background.
#[test]
fn a_background_that_is_a_face_crop_is_named_or_left_out() {
    let dir = tempfile::tempdir().unwrap();
    write_crops(dir.path(), 3);
    let mut cfg = config(dir.path().into(), 0, all_train());
    let set_backgrounds = |cfg: &mut FeatureConfig, folder: PathBuf| {
        if let SourceConfig::Crops { backgrounds, .. } = &mut cfg.source {
            *backgrounds = Some(folder);
        }
    };
    set_backgrounds(&mut cfg, dir.path().join("smile"));
    let e = CropsSource::new(&cfg, Split::Train).unwrap_err().to_string();
    assert!(e.contains("smile_0.png: is also the face crop") && e.contains("a background holds no face"), "{e}");
    // A folder of one wall and one hard link to a crop: the wall is kept.
    let backgrounds = dir.path().join("backgrounds");
    std::fs::create_dir_all(&backgrounds).unwrap();
    image::GrayImage::from_pixel(300, 200, image::Luma([77])).save(backgrounds.join("wall.png")).unwrap();
    std::fs::hard_link(dir.path().join("no_smile/no_smile_1.png"), backgrounds.join("h.png")).unwrap();
    set_backgrounds(&mut cfg, backgrounds);
    assert!(CropsSource::new(&cfg, Split::Train).unwrap_err().to_string().contains("h.png: is also the face crop"));
    cfg.on_bad_sample = grin_image::OnBadSample::Skip;
    let source = CropsSource::new(&cfg, Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(grin_image::BadInputKind::MalformedAnnotation), 1);
    for seed in 0..8 {
        let s = source.scene(0, &mut SampleRng::seed_from_u64(seed)).unwrap();
        assert!(s.pixels.iter().all(|p| *p == 77), "only the wall is a background");
    }
}
