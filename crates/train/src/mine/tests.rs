use super::*;
use crate::test_photos::face_free;
use burn_ndarray::NdArray;
use grin_features::Smile;
use grin_image::Raster;
use grin_model::InitDetector;
use grin_terms::photo::{self, PHOTO_MAX_PIXELS};

fn face(x0: f32, y0: f32, x1: f32, y1: f32) -> FaceBox {
    FaceBox { x0, y0, x1, y1, smile: Smile::Unknown }
}

fn det(x0: f32, y0: f32, x1: f32, y1: f32) -> Detection {
    Detection { x0, y0, x1, y1, score: 0.9, smile: 0.5 }
}

#[test]
fn a_detection_near_a_face_is_never_mined() {
    let faces = [face(100.0, 100.0, 140.0, 150.0)];
    assert!(!clear_of(&det(100.0, 100.0, 140.0, 150.0), &faces, PHOTOS), "the face itself");
    assert!(!clear_of(&det(145.0, 110.0, 160.0, 125.0), &faces, PHOTOS), "within half a face of it");
    assert!(clear_of(&det(170.0, 110.0, 185.0, 125.0), &faces, PHOTOS), "well clear of it");
    assert!(clear_of(&det(10.0, 10.0, 20.0, 20.0), &[], PHOTOS), "no face at all");
}

#[test]
fn on_a_portrait_a_detection_beside_the_face_is_mined_one_inside_it_never() {
    let faces = [face(23.0, 45.0, 66.0, 87.0)];
    let neck = det(30.0, 86.0, 51.0, 107.0);
    assert!(clear_of(&neck, &faces, PORTRAITS), "a twentieth of the neck's box overlaps the face's");
    assert!(!clear_of(&neck, &faces, PHOTOS), "a photo's rule keeps half a face away");
    assert!(!clear_of(&det(40.0, 70.0, 60.0, 95.0), &faces, PORTRAITS), "the mouth and chin");
    assert!(!clear_of(&det(20.0, 40.0, 70.0, 90.0), &faces, PORTRAITS), "the face itself");
}

#[test]
fn a_crop_stays_inside_the_frame_and_has_the_asked_size() {
    let sample =
        Sample { width: 64, height: 48, channels: 1, pixels: (0..64 * 48).map(|i| i as u8).collect(), boxes: vec![] };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.png");
    let d = det(0.0, 0.0, 6.0, 6.0);
    let b =
        write_crop(frame_window(&sample, &d, (32, 24)), &sample, &d, PHOTOS, &path, Path::new("photo.png")).unwrap();
    let img = image::open(&path).unwrap().to_luma8();
    assert_eq!(img.dimensions(), (32, 24));
    assert_eq!(img.get_pixel(0, 0).0[0], 0, "moved inside: it starts at the frame's corner");
    assert_eq!(b, [0.0, 0.0, 6.0, 6.0]);
}

#[test]
fn faces_in_a_crop_are_painted_over() {
    let face = FaceBox { x0: 40.0, y0: 10.0, x1: 50.0, y1: 20.0, smile: Smile::No };
    let sample = Sample { width: 64, height: 48, channels: 1, pixels: vec![7; 64 * 48], boxes: vec![face] };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.png");
    let d = det(10.0, 20.0, 16.0, 26.0);
    write_crop(frame_window(&sample, &d, (64, 48)), &sample, &d, PHOTOS, &path, Path::new("photo.png")).unwrap();
    let img = image::open(&path).unwrap().to_luma8();
    assert_eq!(img.get_pixel(45, 15).0[0], LETTERBOX_FILL, "the face");
    assert_eq!(img.get_pixel(37, 8).0[0], LETTERBOX_FILL, "half a face around it");
    assert_eq!(img.get_pixel(12, 22).0[0], 7, "the mined detection stays");
}

#[test]
fn as_looked_a_crop_is_the_looks_cut_at_its_scale_with_faces_painted_over() {
    // A 200x100 picture of columns (x as its grey), letterboxed 2x into 400x200.
    let source =
        Raster { width: 200, height: 100, channels: 1, pixels: (0..200 * 100).map(|i| (i % 200) as u8).collect() };
    let (frame, placement) = grin_image::letterbox(&source, 400, 200);
    // A face just left of the detection (frame pixels).
    let sample = Sample {
        width: 400,
        height: 200,
        channels: 1,
        pixels: frame.pixels,
        boxes: vec![face(180.0, 92.0, 186.0, 98.0)],
    };
    let photo = HeldOutPhoto { sample, found: Vec::new(), source, placement };
    let look = SecondLook { below: 0.65, ..SecondLook::default() };
    let d = det(190.0, 90.0, 210.0, 110.0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.png");
    let b =
        write_crop(as_looked(&photo, &d, &look, (64, 48)), &photo.sample, &d, PHOTOS, &path, Path::new("photo.png"))
            .unwrap();
    // The look sees d's side as 144 / 3 = 48 px, at any cut size: so does the crop.
    for (got, want) in b.iter().zip([8.0, 0.0, 56.0, 48.0]) {
        assert!((got - want).abs() < 1e-3, "{b:?}");
    }
    let img = image::open(&path).unwrap().to_luma8();
    assert_eq!(img.dimensions(), (64, 48));
    // The look's own cut (144 px over its 60 px window: the same 2.4x)
    // holds the crop 40 px in from its left and 48 px down.
    let cut = photo.placement.cut(&photo.source, look.window(&d), 144, false);
    for (x, y) in [(10u32, 30u32), (32, 24), (63, 47), (40, 0)] {
        let want = cut.pixels[((y + 48) * 144 + x + 40) as usize];
        assert!(img.get_pixel(x, y).0[0].abs_diff(want) <= 2, "({x}, {y}): {:?} against {want}", img.get_pixel(x, y));
    }
    assert_eq!(img.get_pixel(2, 10).0[0], LETTERBOX_FILL, "the face beside it, half a face around, painted over");
    assert_ne!(img.get_pixel(32, 24).0[0], LETTERBOX_FILL, "the detection stays");
}

fn options(out: &Path) -> MineOptions {
    // Score 0: an untrained model's every box is mined, one a photo.
    MineOptions {
        score: 0.0,
        per_photo: 1,
        photos: 0,
        crop: (64, 48),
        own_size: Some(PHOTO_MAX_PIXELS),
        as_looked: None,
        out: out.into(),
    }
}

#[test]
fn own_size_mines_each_photo_at_the_photo_default() {
    let sizes = [(200, 150), (90, 120)];
    let (_photos, features, spec) = face_free(&sizes, Split::Train);
    let device = Default::default();
    let model = spec.init::<NdArray<f32>>(&device);
    let out = tempfile::tempdir().unwrap();
    let report = mine(&model, &spec, &features, &options(out.path()), &device).unwrap();
    assert_eq!((report[0].photos, report[0].crops), (2, 2), "{report:?}");
    for (k, &(w, h)) in sizes.iter().enumerate() {
        let (ow, oh) = photo::own_size(w, h, PHOTO_MAX_PIXELS);
        let name = format!("{}-{k}-p{k}-{ow}x{oh}-0.png", report[0].source);
        let crop = image::open(out.path().join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((crop.width(), crop.height()), (64, 48), "{name}: the training input's size");
    }
}

/// Two photos with one name (FDDB's `img_N` in two days' folders; here
/// `p0.png` and `p0.jpg`): each keeps its own crop (issue 90, round 10).
#[test]
fn photos_sharing_a_name_keep_a_crop_each() {
    let (photos, features, spec) = face_free(&[(200, 150)], Split::Train);
    image::open(photos.path().join("p0.png")).unwrap().save(photos.path().join("p0.jpg")).unwrap();
    let device = Default::default();
    let model = spec.init::<NdArray<f32>>(&device);
    let out = tempfile::tempdir().unwrap();
    let report = mine(&model, &spec, &features, &options(out.path()), &device).unwrap();
    assert_eq!((report[0].photos, report[0].crops), (2, 2), "{report:?}");
    let manifest = std::fs::read_to_string(out.path().join(MANIFEST)).unwrap();
    let names: std::collections::BTreeSet<String> = manifest
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["image"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{manifest}");
    assert!(names.iter().all(|name| out.path().join(name).is_file()), "{names:?}");
    assert!(!out.path().join(grin_features::MINING_MARK).exists(), "a finished mining removes its mark");
    // Round 16: its mark or list under a link's name went through the link.
    let notes = out.path().join("notes.txt");
    std::fs::write(&notes, "mine").unwrap();
    for name in [grin_features::MINING_MARK, MANIFEST] {
        let link = out.path().join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&notes, &link).unwrap();
        let e = mine(&model, &spec, &features, &options(out.path()), &device).unwrap_err().to_string();
        assert!(e.contains("is a link") && e.contains(name), "{e}");
        std::fs::remove_file(&link).unwrap();
        // Round 17: a folder (or a FIFO) there was found after the mining.
        std::fs::create_dir(&link).unwrap();
        let e = mine(&model, &spec, &features, &options(out.path()), &device).unwrap_err().to_string();
        assert!(e.contains("is no plain file") && e.contains(name), "{e}");
        std::fs::remove_dir(&link).unwrap();
    }
    assert_eq!(std::fs::read(&notes).unwrap(), b"mine");
    // Round 19: two minings at once into one folder shared its mark and list.
    let held = grin_output::hold_folder(out.path()).unwrap();
    let e = mine(&model, &spec, &features, &options(out.path()), &device).unwrap_err().to_string();
    assert!(e.contains("another grin command is writing into this folder"), "{e}");
    drop(held);
    mine(&model, &spec, &features, &options(out.path()), &device).unwrap();
}

#[test]
fn as_looked_every_mined_box_is_at_the_looks_scale() {
    let (_photos, features, spec) = face_free(&[(200, 150), (90, 120)], Split::Train);
    let device = Default::default();
    let model = spec.init::<NdArray<f32>>(&device);
    let out = tempfile::tempdir().unwrap();
    let look = SecondLook::default();
    let options = MineOptions { as_looked: Some(look), ..options(out.path()) };
    let report = mine(&model, &spec, &features, &options, &device).unwrap();
    assert_eq!(report[0].crops, 2, "{report:?}");
    let manifest = std::fs::read_to_string(out.path().join(MANIFEST)).unwrap();
    for line in manifest.lines() {
        let entry: serde_json::Value = serde_json::from_str(line).unwrap();
        let crop = image::open(out.path().join(entry["image"].as_str().unwrap())).unwrap();
        assert_eq!((crop.width(), crop.height()), (64, 48), "{line}");
        let b: Vec<f32> = entry["box"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
        let longer = (b[2] - b[0]).max(b[3] - b[1]);
        let want = look.side as f32 / look.context;
        assert!((longer - want).abs() < 0.01, "{line}: the look sees a box at {want} px");
    }
}

/// Issue 80, cause 5: the manifest was appended to, so mining twice into
/// one folder listed every crop twice.
#[test]
fn mining_twice_into_one_folder_lists_each_crop_once() {
    let (_photos, features, spec) = face_free(&[(200, 150), (90, 120)], Split::Train);
    let device = Default::default();
    let model = spec.init::<NdArray<f32>>(&device);
    let out = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let report = mine(&model, &spec, &features, &options(out.path()), &device).unwrap();
        assert_eq!(report[0].crops, 2, "{report:?}");
    }
    let manifest = std::fs::read_to_string(out.path().join(MANIFEST)).unwrap();
    assert_eq!(manifest.lines().count(), 2, "{manifest}");
}

#[test]
fn at_own_size_a_photo_that_cannot_be_read_is_named_or_skipped() {
    let (photos, features, spec) = face_free(&[(80, 60)], Split::Train);
    std::fs::write(photos.path().join("broken.png"), b"not a png").unwrap();
    let device = Default::default();
    let model = spec.init::<NdArray<f32>>(&device);
    let out = tempfile::tempdir().unwrap();
    let e = mine(&model, &spec, &features, &options(out.path()), &device).unwrap_err();
    assert!(format!("{e:#}").contains("broken.png"), "{e:#}");
    let features = FeatureConfig { on_bad_sample: OnBadSample::Skip, ..features };
    let report = mine(&model, &spec, &features, &options(out.path()), &device).unwrap();
    assert_eq!(
        (report[0].photos, report[0].skipped),
        (1, 1),
        "the readable photo is mined, the broken one skipped: {report:?}"
    );
}
