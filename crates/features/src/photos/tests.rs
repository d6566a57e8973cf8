//! Real-photo sources: the Caltech landmark rule and parser, CelebA's
//! aligned box, random crops around faces, ignore regions, the mix, and a
//! deterministic held-out split. Fixtures are written by the tests; the last
//! test reads the real data in `../shared/data` and skips when it is absent.

use crate::photos::celeba_aligned_box;
use crate::photos::crop_scene;
use crate::photos::face_box::landmarks_to_box;
use crate::pipeline::build_source;
use crate::source::SampleRng;
use crate::{
    held_out_photos, parse_caltech, AnnotationText, BadLines, FaceBox, FeatureConfig, PhotoCrops, Sample, Smile,
    SourceConfig, Split, SplitConfig, MAX_BOXES,
};
use grin_image::{InputError, OnBadSample, SkipCounts};
use rand::SeedableRng;
use std::path::{Path, PathBuf};

#[test]
fn landmark_rule_is_a_box_of_2_42_by_3_59_eye_distances() {
    // Eyes 20 px apart at y 20, mouth at y 40: centre (20, 30 - 0.48 * 20), 48.4 by 71.8.
    let [x0, y0, x1, y1] = landmarks_to_box([10.0, 20.0], [30.0, 20.0], [20.0, 40.0]);
    for (got, want) in [(x0, -4.2), (y0, -15.5), (x1, 44.2), (y1, 56.3)] {
        assert!((got - want).abs() < 1e-3, "{x0} {y0} {x1} {y1}");
    }
    // A tilted pair of eyes: the distance, not its x component, sets the size.
    let t = landmarks_to_box([0.0, 0.0], [30.0, 40.0], [10.0, 60.0]);
    assert!(((t[2] - t[0]) - 121.0).abs() < 1e-3, "width {}", t[2] - t[0]);
    assert!(((t[3] - t[1]) - 179.5).abs() < 1e-3, "height {}", t[3] - t[1]);
}

#[test]
fn celeba_aligned_box_sits_on_the_face_of_an_89x109_portrait() {
    let [x0, y0, x1, y1] = celeba_aligned_box(89, 109);
    // Eyes 19.5 px apart at half size: 47.2 by 70.0 around (44.25, 65.75 - 0.48 * 19.5).
    assert!((x1 - x0 - 47.2).abs() < 0.5 && (y1 - y0 - 70.0).abs() < 0.5, "{x0} {y0} {x1} {y1}");
    assert!(((x0 + x1) / 2.0 - 44.25).abs() < 0.5 && ((y0 + y1) / 2.0 - 56.4).abs() < 0.5);
    assert!(x0 > 0.0 && y0 > 0.0 && x1 < 89.0 && y1 < 109.0, "inside the portrait");
}

const CALTECH: &str = "\
a.jpg 10 20 30 20 20 30 20 40
a.jpg 60 20 70 20 65 25 65 30
b.jpg 5 5 15 5 10 10 10 15
";

#[test]
fn caltech_parser_groups_faces_by_image() {
    let skips = SkipCounts::default();
    let file = AnnotationText { text: CALTECH, path: Path::new("gt.txt") };
    let entries =
        parse_caltech(file, Path::new("/imgs"), BadLines { on_bad: OnBadSample::Error, skips: &skips }).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].image, PathBuf::from("/imgs/a.jpg"));
    assert_eq!(entries[0].faces.len(), 2);
    assert!((entries[0].faces[0].face.x0 - -4.2).abs() < 1e-4);
    assert_eq!(entries[0].faces[1].line, 2);
    assert!(entries.iter().flat_map(|e| &e.faces).all(|f| f.face.smile == Smile::Unknown));
    assert_eq!(entries[1].faces.len(), 1);
}

#[test]
fn caltech_bad_lines_name_file_and_line_or_drop_the_whole_image() {
    for (text, needle) in [
        ("a.jpg 10 20 30 20 20 30 20 40\nb.jpg 1 2 3\n", "8 landmark"),
        ("a.jpg 10 20 30 20 20 30 20 40\nb.jpg 1 2 3 4 5 6 7 x\n", "not a finite number"),
        ("a.jpg 10 20 30 20 20 30 20 40\nb.jpg 1 2 3 4 5 6 7 NaN\n", "not a finite number"),
        ("a.jpg 10 20 30 20 20 30 20 40\nb.jpg 5 5 5 5 5 5 5 9\n", "eyes"),
        ("a.jpg 10 20 30 20 20 30 20 40\nb.jpg 1 2 3 4 5 6 7 2.8e9\n", "beyond any photo"),
    ] {
        let skips = SkipCounts::default();
        let file = AnnotationText { text, path: Path::new("gt.txt") };
        let e =
            parse_caltech(file, Path::new("/i"), BadLines { on_bad: OnBadSample::Error, skips: &skips }).unwrap_err();
        let message = e.to_string();
        assert!(message.starts_with("gt.txt:2:") && message.contains(needle), "{message}");
    }
    // Under skip, the image with a bad line is left out whole: keeping its
    // other faces would teach the dropped one as background.
    let text = "a.jpg 10 20 30 20 20 30 20 40\nb.jpg 5 5 15 5 10 10 10 15\nb.jpg 1 2\n";
    let skips = SkipCounts::default();
    let file = AnnotationText { text, path: Path::new("gt.txt") };
    let entries = parse_caltech(file, Path::new("/i"), BadLines { on_bad: OnBadSample::Skip, skips: &skips }).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].image, PathBuf::from("/i/a.jpg"));
    assert_eq!(skips.total(), 1);
}

fn face(x0: f32, y0: f32, x1: f32, y1: f32) -> FaceBox {
    FaceBox { x0, y0, x1, y1, smile: Smile::Yes }
}

fn gradient(width: u32, height: u32) -> grin_image::Raster {
    let pixels = (0..width * height).map(|i| ((i % width) * 255 / width) as u8).collect();
    grin_image::Raster { width, height, channels: 1, pixels }
}

#[test]
fn crops_hold_the_chosen_face_at_a_drawn_size() {
    let image = gradient(400, 300);
    let faces = [face(100.0, 100.0, 160.0, 160.0)];
    let crops = PhotoCrops { min_face: 12.0, max_face: 80.0, max_zoom_out: 8.0, ..PhotoCrops::default() };
    for seed in 0..200 {
        let mut rng = SampleRng::seed_from_u64(seed);
        let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
        assert_eq!((s.width, s.height, s.pixels.len()), (160, 120, 160 * 120));
        assert_eq!(s.boxes.len(), 1, "seed {seed}: the chosen face is always in the crop");
        let b = s.boxes[0];
        assert_eq!(b.smile, Smile::Yes);
        let side = (b.x1 - b.x0).max(b.y1 - b.y0);
        assert!((11.5..=80.5).contains(&side), "seed {seed}: side {side}");
        assert!(b.x0 >= 0.0 && b.y0 >= 0.0 && b.x1 <= 160.0 && b.y1 <= 120.0);
    }
}

#[test]
fn photos_shrink_no_further_than_filling_the_output() {
    // 400x300 into 160x120 fills at scale 0.4: the 60 px face is never under 24 px.
    let image = grin_image::Raster { width: 400, height: 300, channels: 1, pixels: vec![0; 120_000] };
    let faces = [face(100.0, 100.0, 160.0, 160.0)];
    let crops = PhotoCrops { min_face: 8.0, max_face: 80.0, ..PhotoCrops::default() };
    let mut smallest = f32::MAX;
    for seed in 0..200 {
        let mut rng = SampleRng::seed_from_u64(seed);
        let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
        smallest = smallest.min(s.boxes[0].x1 - s.boxes[0].x0);
        let fill = grin_image::LETTERBOX_FILL;
        assert!(s.pixels.iter().filter(|&&p| p == fill).count() < 160, "seed {seed}: no grey field around the photo");
    }
    assert!((23.9..30.0).contains(&smallest), "smallest face {smallest}");
}

#[test]
fn cut_off_and_tiny_faces_become_ignore_regions() {
    let image = gradient(400, 300);
    // A big face, a tiny one (4 px) and one at the far edge.
    let faces = [face(150.0, 100.0, 250.0, 200.0), face(20.0, 20.0, 24.0, 24.0), face(340.0, 100.0, 400.0, 160.0)];
    let crops =
        PhotoCrops { min_face: 60.0, max_face: 60.0, max_upscale: 3.0, max_zoom_out: 8.0, ..PhotoCrops::default() };
    let mut ignored = 0;
    for seed in 0..100 {
        let mut rng = SampleRng::seed_from_u64(seed);
        let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
        for b in &s.boxes {
            let side = (b.x1 - b.x0).max(b.y1 - b.y0);
            match b.smile {
                Smile::Ignore => ignored += 1,
                _ => assert!(side >= crops.min_learnable, "a learnable face of {side} px"),
            }
        }
        assert!(s.boxes.iter().filter(|b| b.smile.is_face()).count() >= 1);
        assert!(s.boxes.len() <= MAX_BOXES);
    }
    assert!(ignored > 0, "the tiny face shows up as an ignore region");
}

#[test]
fn cut_crops_run_a_frame_edge_through_the_chosen_face_and_label_it_by_the_one_rule() {
    let image = gradient(400, 300);
    let faces = [face(150.0, 100.0, 210.0, 190.0)];
    let crops = PhotoCrops { min_face: 30.0, max_face: 60.0, cut: 1.0, min_visible: 0.5, ..PhotoCrops::default() };
    let (mut kept, mut ignored) = (0, 0);
    for seed in 0..200 {
        let mut rng = SampleRng::seed_from_u64(seed);
        let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
        let again = crop_scene(&image, &faces, 160, 120, &crops, &mut SampleRng::seed_from_u64(seed));
        assert_eq!((s.pixels, &s.boxes), (again.pixels, &again.boxes), "seed {seed}: deterministic");
        let b = s.boxes.first().unwrap_or_else(|| panic!("seed {seed}: the face stays partly in the crop"));
        let at_edge = b.x0 <= 0.0 || b.y0 <= 0.0 || b.x1 >= 160.0 || b.y1 >= 120.0;
        assert!(at_edge, "seed {seed}: an edge runs through the face: {b:?}");
        match b.smile {
            Smile::Ignore => ignored += 1,
            _ => kept += 1,
        }
    }
    assert!(
        kept > 100 && ignored > 10,
        "half or more inside is a face, less is ignored: {kept} faces, {ignored} ignored"
    );
}

#[test]
fn a_mosaic_tiles_four_half_size_crops_with_their_faces() {
    let quarter =
        |v: u8, boxes: Vec<FaceBox>| Sample { width: 80, height: 60, channels: 1, pixels: vec![v; 80 * 60], boxes };
    let quarters = [
        quarter(10, vec![face(10.0, 10.0, 30.0, 40.0)]),
        quarter(20, vec![]),
        quarter(30, vec![face(0.0, 0.0, 5.0, 5.0)]),
        quarter(40, vec![face(50.0, 20.0, 80.0, 60.0)]),
    ];
    let s = crate::photos::window::tile(quarters, 160, 121, 1);
    assert_eq!((s.width, s.height, s.pixels.len()), (160, 121, 160 * 121));
    assert_eq!((s.pixels[0], s.pixels[80], s.pixels[60 * 160], s.pixels[60 * 160 + 80]), (10, 20, 30, 40));
    assert!(s.pixels[120 * 160..].iter().all(|&p| p == grin_image::LETTERBOX_FILL), "the odd last row");
    let corners: Vec<[f32; 4]> = s.boxes.iter().map(|b| [b.x0, b.y0, b.x1, b.y1]).collect();
    assert_eq!(
        corners,
        vec![[130.0, 80.0, 160.0, 120.0], [10.0, 10.0, 30.0, 40.0], [0.0, 60.0, 5.0, 65.0]],
        "largest first"
    );
    let crops = crate::photos::window::quarter_crops(&PhotoCrops {
        min_face: 12.0,
        max_face: 120.0,
        mosaic: 0.5,
        ..PhotoCrops::default()
    });
    assert_eq!(
        (crops.min_face, crops.max_face, crops.mosaic),
        (8.0, 60.0, 0.0),
        "half the sizes, no smaller than learnable"
    );
}

#[test]
fn letterbox_grey_fills_what_lies_outside_the_photo() {
    // A 40x30 photo with a face that must come out 60 px: the photo is
    // enlarged at most 3x (120x90), so grey bars surround it.
    let image = grin_image::Raster { width: 40, height: 30, channels: 1, pixels: vec![0; 1200] };
    let faces = [face(10.0, 5.0, 30.0, 25.0)];
    let crops =
        PhotoCrops { min_face: 100.0, max_face: 100.0, max_upscale: 3.0, max_zoom_out: 8.0, ..PhotoCrops::default() };
    let mut rng = SampleRng::seed_from_u64(1);
    let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
    let fill = grin_image::LETTERBOX_FILL;
    assert_eq!(s.pixels.iter().filter(|&&p| p == 0).count(), 120 * 90, "the photo at 3x");
    assert_eq!(s.pixels.iter().filter(|&&p| p == fill).count(), 160 * 120 - 120 * 90);
    let side = s.boxes[0].x1 - s.boxes[0].x0;
    assert!((side - 60.0).abs() < 0.01, "face capped by max_upscale: {side}");
}

/// A Caltech-style folder of `count` grey photos, two faces each.
fn caltech_fixture(dir: &Path, count: usize) -> PathBuf {
    let images = dir.join("images");
    std::fs::create_dir_all(&images).unwrap();
    let mut gt = String::new();
    for i in 0..count {
        let name = format!("pic{i:05}.jpg");
        image::GrayImage::from_fn(200, 150, |x, y| image::Luma([((x + y + i as u32) % 256) as u8]))
            .save(images.join(&name))
            .unwrap();
        gt += &format!("{name} 40 50 60 50 50 60 50 70\n{name} 120 40 150 40 135 55 135 70\n");
    }
    std::fs::write(dir.join("WebFaces_GroundThruth.txt"), gt).unwrap();
    dir.to_path_buf()
}

fn photo_config(source: SourceConfig) -> FeatureConfig {
    FeatureConfig { width: 160, height: 120, source, ..FeatureConfig::default() }
}

#[test]
fn caltech_source_cuts_scenes_from_its_split_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = caltech_fixture(dir.path(), 40);
    let cfg = photo_config(SourceConfig::Caltech { root, crops: PhotoCrops::default() });
    let train = build_source(&cfg, Split::Train).unwrap();
    assert_eq!(train.name(), "caltech");
    let n_train = train.len().unwrap();
    let held = held_out_photos(&cfg, 0).unwrap();
    assert_eq!(held.len(), 1);
    let n_test = held[0].len();
    let n_val = build_source(&cfg, Split::Val).map(|s| s.len().unwrap()).unwrap_or(0);
    assert_eq!(n_train + n_val + n_test, 40, "each photo in exactly one split");
    assert!(n_test > 0 && n_train > n_test);
    let mut rng = SampleRng::seed_from_u64(3);
    for i in 0..30 {
        let s = train.scene(i, &mut rng).unwrap();
        assert!(s.boxes.iter().any(|b| b.smile == Smile::Unknown), "Caltech faces have no smile label");
    }
}

/// Round 22 of issue 90: a photo's name spelt two ways (`./pic.jpg`) was two
/// photos in the annotated sources; Caltech's lines are one photo too.
#[test]
fn caltech_lines_naming_one_photo_two_ways_are_one_photo() {
    let dir = tempfile::tempdir().unwrap();
    let root = caltech_fixture(dir.path(), 40);
    let gt = root.join("WebFaces_GroundThruth.txt");
    let text = std::fs::read_to_string(&gt).unwrap();
    let again: String = text.lines().filter(|l| l.contains(" 120 40 ")).map(|l| format!("./{l}\n")).collect();
    std::fs::write(&gt, format!("{text}{again}")).unwrap();
    let cfg = photo_config(SourceConfig::Caltech { root, crops: PhotoCrops::default() });
    let held = held_out_photos(&cfg, 0).unwrap();
    let n = |split| build_source(&cfg, split).map(|s| s.len().unwrap()).unwrap_or(0);
    assert_eq!(n(Split::Train) + n(Split::Val) + held[0].len(), 40, "each photo once");
}

#[test]
fn held_out_split_is_deterministic_and_letterboxed() {
    let dir = tempfile::tempdir().unwrap();
    let root = caltech_fixture(dir.path(), 40);
    let cfg = photo_config(SourceConfig::Caltech { root, crops: PhotoCrops::default() });
    let names = |sets: Vec<crate::HeldOutPhotos>| -> Vec<PathBuf> {
        sets.iter().flat_map(|s| (0..s.len()).map(|i| s.image_path(i).to_path_buf())).collect()
    };
    let first = names(held_out_photos(&cfg, 0).unwrap());
    assert_eq!(first, names(held_out_photos(&cfg, 0).unwrap()));
    // Another seed does not move photos between splits: the split is by file name.
    let reseeded = FeatureConfig { seed: 99, ..cfg.clone() };
    assert_eq!(first, names(held_out_photos(&reseeded, 0).unwrap()));
    let set = &held_out_photos(&cfg, 2).unwrap()[0];
    assert_eq!(set.len(), 2, "the limit caps the count");
    let s = set.letterboxed(0, 320, 240, 1).unwrap();
    assert_eq!((s.width, s.height), (320, 240));
    // 200x150 scales by 1.6 exactly: the first face (48.4 px wide) becomes 77.4 px.
    let b = s.boxes[0];
    assert!(((b.x1 - b.x0) - 77.44).abs() < 0.1, "{b:?}");
}

#[test]
fn found_faces_the_annotations_lack_are_ignore_regions_in_training_crops_only() {
    // 400x300 photos, one annotated face at the top left; the found faces:
    // two at the right, and a looser box around the annotated one (already
    // labelled: not added).
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("images")).unwrap();
    let (mut gt, mut found) = (String::new(), String::new());
    for i in 0..40 {
        let name = format!("pic{i:05}.jpg");
        image::GrayImage::from_fn(400, 300, |x, y| image::Luma([((x * y + i) % 256) as u8]))
            .save(dir.path().join("images").join(&name))
            .unwrap();
        gt += &format!("{name} 40 50 60 50 50 60 50 70\n");
        found += &format!(
            "{{\"image\": \"{name}\", \"width\": 400, \"height\": 300, \"detections\": [{{\"box\": [300, 200, 330, 230]}}, \
             {{\"box\": [300, 20, 330, 50]}}, {{\"box\": [38, 40, 62, 72]}}]}}\n"
        );
    }
    std::fs::write(dir.path().join("WebFaces_GroundThruth.txt"), gt).unwrap();
    std::fs::write(dir.path().join("found.jsonl"), found).unwrap();
    let scenes = |unannotated: Option<PathBuf>| {
        let crops = PhotoCrops { background: 0.5, unannotated, ..PhotoCrops::default() };
        let cfg = photo_config(SourceConfig::Caltech { root: dir.path().to_path_buf(), crops });
        let train = build_source(&cfg, Split::Train).unwrap();
        let mut rng = SampleRng::seed_from_u64(5);
        let scenes: Vec<Sample> = (0..100).map(|i| train.scene(i, &mut rng).unwrap()).collect();
        (scenes, cfg)
    };
    let face_free = |s: &[Sample]| s.iter().filter(|s| s.boxes.is_empty()).count();
    let ignored = |s: &[Sample]| s.iter().filter(|s| s.boxes.iter().any(|b| b.smile == Smile::Ignore)).count();
    let (plain, _) = scenes(None);
    assert!(face_free(&plain) > 20, "one annotated face allows face-free crops: {}", face_free(&plain));
    let (cleaned, cfg) = scenes(Some(dir.path().join("found.jsonl")));
    // Three faces now, a crowd: no face-free crop; each scene centres on the
    // annotated face, and a found one is an ignore region where it shows.
    assert_eq!(face_free(&cleaned), 0);
    assert!(cleaned.iter().all(|s| s.boxes.iter().filter(|b| b.smile.is_face()).count() == 1));
    assert!(ignored(&cleaned) > ignored(&plain) + 10, "{} against {}", ignored(&cleaned), ignored(&plain));
    // Scoring keeps the annotations alone, and the found faces apart, in the
    // letterboxed pixels (400x300 at 320x240: scaled by 0.8).
    let held = held_out_photos(&cfg, 1).unwrap();
    assert!(held[0].has_found());
    assert_eq!(held[0].letterboxed(0, 320, 240, 1).unwrap().boxes.len(), 1);
    let photo = held[0].letterboxed_with_found(0, 320, 240, 1).unwrap();
    assert_eq!(photo.sample.boxes.len(), 1);
    assert_eq!((photo.source.width, photo.source.height), (400, 300), "the photo itself, for a second look");
    let found: Vec<[f32; 4]> = photo.found.iter().map(|b| b.corners()).collect();
    assert_eq!(found, [[240.0, 160.0, 264.0, 184.0], [240.0, 16.0, 264.0, 40.0]]);
    let plain = photo_config(SourceConfig::Caltech { root: dir.path().to_path_buf(), crops: PhotoCrops::default() });
    assert!(!held_out_photos(&plain, 1).unwrap()[0].has_found());
}

#[test]
fn mix_draws_parts_by_weight_and_checks_its_weights() {
    let dir = tempfile::tempdir().unwrap();
    let root = caltech_fixture(dir.path(), 30);
    let caltech = SourceConfig::Caltech { root, crops: PhotoCrops::default() };
    let synthetic = SourceConfig::default();
    let cfg =
        photo_config(SourceConfig::Mix { weights: vec![3.0, 1.0], parts: vec![caltech.clone(), synthetic.clone()] });
    let mix = build_source(&cfg, Split::Train).unwrap();
    let mut from_photos = 0;
    for i in 0..400u64 {
        let mut rng = SampleRng::seed_from_u64(i);
        let s = mix.scene(i, &mut rng).unwrap();
        // Photo crops carry unknown smiles; synthetic faces are labelled.
        from_photos += usize::from(s.boxes.iter().any(|b| b.smile == Smile::Unknown));
    }
    assert!((250..=350).contains(&from_photos), "3:1 weights drew {from_photos} of 400 from the photos");

    for (weights, needle) in
        [(vec![1.0], "1 weights for 2 parts"), (vec![1.0, -1.0], "non-negative"), (vec![0.0, 0.0], "positive sum")]
    {
        let bad = photo_config(SourceConfig::Mix { weights, parts: vec![caltech.clone(), synthetic.clone()] });
        let Err(e) = build_source(&bad, Split::Train) else { panic!("accepted {bad:?}") };
        assert!(matches!(e, InputError::Config(_)) && e.to_string().contains(needle), "{e}");
    }
}

#[test]
fn a_missing_annotation_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = photo_config(SourceConfig::Caltech { root: dir.path().to_path_buf(), crops: PhotoCrops::default() });
    let Err(e) = build_source(&cfg, Split::Train) else { panic!("accepted") };
    let e = e.to_string();
    assert!(e.contains("WebFaces_GroundThruth.txt") && e.contains("cannot read"), "{e}");
    let bad_crops = PhotoCrops { min_face: 50.0, max_face: 20.0, ..PhotoCrops::default() };
    let root = caltech_fixture(dir.path(), 5);
    let cfg = photo_config(SourceConfig::Caltech { root, crops: bad_crops });
    let Err(e) = build_source(&cfg, Split::Train) else { panic!("accepted") };
    let e = e.to_string();
    assert!(e.contains("features.source.crops.min_face"), "{e}");
}

#[test]
fn real_caltech_and_celeba_scenes() {
    let Some(data) = crate::shared_data::shared_data() else { return };
    let celeba = data.join("celeba-smile-10k");
    let cfg = FeatureConfig {
        split: SplitConfig::default(),
        ..photo_config(SourceConfig::Mix {
            weights: vec![1.0, 1.0],
            parts: vec![
                SourceConfig::Caltech { root: data.join("caltech-webfaces"), crops: PhotoCrops::default() },
                SourceConfig::CelebaAligned {
                    images: celeba.join("images"),
                    attr: celeba.join("list_attr_celeba_000001-010000.txt"),
                    crops: PhotoCrops::default(),
                },
            ],
        })
    };
    let mix = build_source(&cfg, Split::Train).unwrap();
    let (mut smiles, mut unknown) = (0, 0);
    for i in 0..200u64 {
        let mut rng = SampleRng::seed_from_u64(i);
        let s = mix.scene(i, &mut rng).unwrap();
        assert!(s.boxes.iter().any(|b| b.smile.is_face()), "every real crop holds a face");
        smiles += s.boxes.iter().filter(|b| b.smile.smiling().is_some()).count();
        unknown += s.boxes.iter().filter(|b| b.smile == Smile::Unknown).count();
    }
    assert!(smiles > 50 && unknown > 50, "both parts drawn: {smiles} labelled, {unknown} unknown");
    let held = held_out_photos(&cfg, 0).unwrap();
    let sizes: Vec<(&str, usize)> = held.iter().map(|s| (s.name, s.len())).collect();
    // About a tenth of each set, by file name.
    assert!(sizes[0].0 == "caltech" && (500..900).contains(&sizes[0].1), "{sizes:?}");
    assert!(sizes[1].0 == "celeba-aligned" && (800..1200).contains(&sizes[1].1), "{sizes:?}");
    assert!(held[1].portraits && !held[0].portraits);
}

#[test]
fn background_crops_keep_clear_of_faces() {
    let image = gradient(400, 300);
    let faces = [face(20.0, 20.0, 60.0, 60.0)];
    let crops = PhotoCrops { background: 1.0, ..PhotoCrops::default() };
    let mut face_free = 0;
    for seed in 0..100 {
        let mut rng = SampleRng::seed_from_u64(seed);
        let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
        if s.boxes.is_empty() {
            face_free += 1;
        } else {
            assert!(s.boxes.iter().any(|b| b.smile.is_face()), "a fallback crop holds its face");
        }
    }
    assert!(face_free > 80, "{face_free} of 100 crops were face-free");
    // A group photo never gives background: its faces may not all be labelled.
    let group = [face(20.0, 20.0, 40.0, 40.0), face(100.0, 20.0, 120.0, 40.0), face(200.0, 20.0, 220.0, 40.0)];
    for seed in 0..50 {
        let mut rng = SampleRng::seed_from_u64(seed);
        assert!(!crop_scene(&image, &group, 160, 120, &crops, &mut rng).boxes.is_empty());
    }
}

#[test]
fn zoomed_in_crops_upscale_the_surroundings_and_ignore_the_oversized_face() {
    // An 89x109 portrait's face (43 px) drawn past max_face 110: at 3.07x
    // (110 * 1.2 / 43) to 5x, so the window is 32..52 px of the portrait.
    let image = gradient(89, 109);
    let faces = [face(22.0, 44.0, 65.0, 87.0)];
    let crops = PhotoCrops { zoom_in: 1.0, zoom_in_upscale: 5.0, ..PhotoCrops::default() };
    let mut face_free = 0;
    for seed in 0..200 {
        let mut rng = SampleRng::seed_from_u64(seed);
        let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
        assert_eq!((s.width, s.height), (160, 120));
        for b in &s.boxes {
            assert_eq!(b.smile, Smile::Ignore, "a face past max_face is never learnable: {b:?}");
        }
        face_free += usize::from(s.boxes.is_empty());
    }
    assert!(face_free > 10, "some windows show only the face's surroundings: {face_free} of 200");
    // A face that no zoom within the limit can draw past max_face gives an
    // ordinary crop, with the face learnable.
    let crops = PhotoCrops { zoom_in: 1.0, zoom_in_upscale: 2.0, ..PhotoCrops::default() };
    let mut rng = SampleRng::seed_from_u64(3);
    let s = crop_scene(&image, &faces, 160, 120, &crops, &mut rng);
    assert!(s.boxes.iter().any(|b| b.smile.is_face()), "{:?}", s.boxes);
}

#[test]
fn zoom_in_keys_out_of_range_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = caltech_fixture(dir.path(), 2);
    for (crops, key) in [
        (PhotoCrops { zoom_in: 1.5, ..PhotoCrops::default() }, "crops.zoom_in`"),
        (PhotoCrops { zoom_in_upscale: 0.5, ..PhotoCrops::default() }, "crops.zoom_in_upscale`"),
        (PhotoCrops { zoom_in_upscale: f32::NAN, ..PhotoCrops::default() }, "crops.zoom_in_upscale`"),
    ] {
        let cfg = photo_config(SourceConfig::Caltech { root: root.clone(), crops });
        let Err(err) = build_source(&cfg, Split::Train) else { panic!("{key} accepted") };
        let err = err.to_string();
        assert!(err.contains(key), "{err}");
    }
}

/// Issue 90, round 14: an output is checked against every photo the
/// annotations name outside the source's folders, in every split (a photo
/// of another split was replaced by `eval --out`, `precompute --out`, ...).
#[test]
fn photos_named_outside_the_folders_are_found_in_every_split() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("set");
    std::fs::create_dir_all(&set).unwrap();
    let absolute = dir.path().join("abs");
    let mut lines = String::new();
    let mut outside = Vec::new();
    for i in 0..12 {
        lines += &format!("{{\"image\": \"in{i}.png\", \"boxes\": [[1, 1, 9, 9]]}}\n");
        lines += &format!("{{\"image\": \"../up{i}.png\", \"boxes\": [[1, 1, 9, 9]]}}\n");
        let far = absolute.join(format!("far{i}.png"));
        lines += &format!("{{\"image\": {:?}, \"boxes\": [[1, 1, 9, 9]]}}\n", far.display().to_string());
        outside.extend([set.join(format!("../up{i}.png")), far]);
    }
    std::fs::write(set.join("m.jsonl"), lines).unwrap();
    let cfg = FeatureConfig {
        split: SplitConfig { train: 0.4, val: 0.3, test: 0.3 },
        ..photo_config(SourceConfig::Jsonl { manifest: set.join("m.jsonl") })
    };
    let sizes: Vec<usize> = [Split::Train, Split::Val, Split::Test]
        .map(|split| crate::photos_of_split(&cfg, split, 0).unwrap().iter().map(|s| s.len()).sum())
        .to_vec();
    assert!(sizes.iter().all(|&n| n > 0), "every split holds photos: {sizes:?}");
    let mut found = crate::photos_named_outside(&cfg);
    found.sort();
    outside.sort();
    assert_eq!(found, outside);
}

/// Round 25 of issue 90: an aligned portrait under two names (a hard link)
/// was two portraits, with two labels if its rows disagreed.
#[test]
fn an_aligned_portrait_under_two_names_is_one_portrait() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("1.jpg"), b"portrait").unwrap();
    std::fs::hard_link(dir.path().join("1.jpg"), dir.path().join("2.jpg")).unwrap();
    let columns: Vec<String> = (0..40).map(|i| if i == 31 { "Smiling".into() } else { format!("A{i}") }).collect();
    let row = |name: &str, smiling: &str| {
        let values: Vec<&str> = (0..40).map(|i| if i == 31 { smiling } else { "-1" }).collect();
        format!("{name} {}\n", values.join(" "))
    };
    let attr = |second: &str| format!("2\n{}\n{}{}", columns.join(" "), row("1.jpg", "1"), row("2.jpg", second));
    let skips = SkipCounts::default();
    let problems = BadLines { on_bad: OnBadSample::Error, skips: &skips };
    let parse = |text: &str| super::landmarks::parse_celeba_aligned(text, Path::new("attr.txt"), dir.path(), &problems);
    assert_eq!(parse(&attr("1")).unwrap().len(), 1, "one portrait, one face");
    let e = parse(&attr("-1")).unwrap_err().to_string();
    assert!(e.contains("attr.txt:4") && e.contains("face of line 3 again with another smile label"), "{e}");
}
