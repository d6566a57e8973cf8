//! Every kind of bad input is an error naming the file (and line), or a
//! counted skip under `on_bad_sample = "skip"`. Fixtures are written here.

use crate::annotations::AnnotatedSource;
use crate::crops::CropsSource;
use crate::source::SampleRng;
use crate::{FeatureConfig, Source, SourceConfig, Split, SplitConfig};
use grin_image::{fixtures, BadInputKind, InputError, OnBadSample};
use rand::SeedableRng;
use std::path::{Path, PathBuf};

fn crops_config(root: PathBuf, on_bad: OnBadSample) -> FeatureConfig {
    FeatureConfig {
        width: 128,
        height: 96,
        on_bad_sample: on_bad,
        source: SourceConfig::Crops {
            root,
            max_faces: 2,
            min_face: 16.0,
            max_face: 48.0,
            rotation_deg: 10.0,
            backgrounds: None,
        },
        split: SplitConfig { train: 1.0, val: 0.0, test: 0.0 },
        ..FeatureConfig::default()
    }
}

fn annotated_config(source: SourceConfig, on_bad: OnBadSample) -> FeatureConfig {
    FeatureConfig {
        width: 128,
        height: 96,
        on_bad_sample: on_bad,
        source,
        split: SplitConfig { train: 1.0, val: 0.0, test: 0.0 },
        ..FeatureConfig::default()
    }
}

fn jpeg_bytes() -> Vec<u8> {
    let img = image::GrayImage::from_fn(64, 64, |x, y| image::Luma([(x * 3 + y * 2) as u8]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
    out.into_inner()
}

fn png_bytes() -> Vec<u8> {
    let img = image::GrayImage::from_fn(64, 64, |x, y| image::Luma([(x ^ y) as u8]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// Good crops in both folders plus one bad file in `smile/`.
fn crops_with(bad_name: &str, bad: Option<&[u8]>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["smile", "no_smile"] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        for i in 0..3 {
            std::fs::write(dir.path().join(folder).join(format!("{i}.jpg")), jpeg_bytes()).unwrap();
        }
    }
    let bad_path = dir.path().join("smile").join(bad_name);
    match bad {
        Some(bytes) => std::fs::write(&bad_path, bytes).unwrap(),
        // A folder with an image's name cannot be read as a file.
        None => std::fs::create_dir(&bad_path).unwrap(),
    }
    (dir, bad_path)
}

fn expect_bad(result: Result<impl std::fmt::Debug, InputError>, kind: BadInputKind, names: &[&str]) {
    let error = result.expect_err("bad input must fail under on_bad_sample = error");
    let InputError::BadInput { kind: got, .. } = &error else { panic!("not a bad-input error: {error}") };
    assert_eq!(*got, kind, "{error}");
    let text = error.to_string();
    for name in names {
        assert!(text.contains(name), "{text:?} should name {name:?}");
    }
}

/// The bad file is named (with `words`) under Error, and counted under Skip.
fn assert_crops_case(bad_name: &str, bad: Option<&[u8]>, kind: BadInputKind, words: &[&str]) {
    let (dir, bad_path) = crops_with(bad_name, bad);
    let error = CropsSource::new(&crops_config(dir.path().into(), OnBadSample::Error), Split::Train);
    expect_bad(error, kind, &[&[bad_path.display().to_string().as_str()][..], words].concat());
    let source = CropsSource::new(&crops_config(dir.path().into(), OnBadSample::Skip), Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(kind), 1);
    assert_eq!(source.load_skips().unwrap().total(), 1);
    assert_eq!(source.counts(), (3, 3), "the good crops are all kept");
    assert!(source.load_skips().unwrap().summary().unwrap().contains("skipped 1 inputs"));
}

#[test]
fn corrupt_image_is_named_or_skipped() {
    assert_crops_case("garbage.jpg", Some(b"this is not an image at all"), BadInputKind::CorruptImage, &[]);
}

#[test]
fn truncated_jpeg_is_named_or_skipped() {
    let bytes = jpeg_bytes();
    assert_crops_case("cut.jpg", Some(&bytes[..bytes.len() / 2]), BadInputKind::CorruptImage, &[]);
}

#[test]
fn truncated_png_is_named_or_skipped() {
    let bytes = png_bytes();
    assert_crops_case("cut.png", Some(&bytes[..bytes.len() / 2]), BadInputKind::CorruptImage, &[]);
}

#[test]
fn unreadable_file_is_named_or_skipped() {
    assert_crops_case("folder.jpg", None, BadInputKind::UnreadableFile, &[]);
}

/// Issue 28's image bombs: a 300-byte JPEG whose header claims 65500x65500
/// (an unbounded decoder took 8.9 GB and 49 s) and a small PNG claiming
/// 20000x20000 (it panicked inside the image crate under a 1.5 GB limit).
/// Both are refused from their header, at once, naming the file, the size,
/// the bound and the key that raises it.
#[test]
fn image_bombs_are_refused_from_their_header_or_skipped() {
    for (name, bytes, size) in [
        ("bomb.jpg", fixtures::jpeg_claiming(65500, 65500), "65500x65500"),
        ("bomb.png", fixtures::png_claiming(20000, 20000), "20000x20000"),
    ] {
        let started = std::time::Instant::now();
        let words = [size, "over the bound of 64.0 megapixels", "features.max_image_pixels raises it"];
        assert_crops_case(name, Some(&bytes), BadInputKind::ImageTooLarge, &words);
        // Six real crops decoded twice, and the bomb refused twice.
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{name}: {:?}", started.elapsed());
    }
}

#[test]
fn the_image_bound_is_a_config_key() {
    let (dir, _) = crops_with("3.jpg", Some(&jpeg_bytes()));
    // Every crop is 64x64 = 4096 pixels.
    let bounded = |max_image_pixels: u64| FeatureConfig {
        max_image_pixels,
        ..crops_config(dir.path().into(), OnBadSample::Error)
    };
    expect_bad(
        CropsSource::new(&bounded(4095), Split::Train),
        BadInputKind::ImageTooLarge,
        &["64x64", "features.max_image_pixels"],
    );
    assert_eq!(CropsSource::new(&bounded(4096), Split::Train).unwrap().counts(), (4, 3));
    let error = CropsSource::new(&bounded(0), Split::Train).unwrap_err().to_string();
    assert!(error.starts_with("key `features.max_image_pixels`: 0 must be within 1..="), "{error}");
}

#[test]
fn empty_folder_is_named_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("smile")).unwrap();
    std::fs::create_dir_all(dir.path().join("no_smile")).unwrap();
    std::fs::write(dir.path().join("smile/notes.txt"), "no images here").unwrap();
    for i in 0..2 {
        std::fs::write(dir.path().join(format!("no_smile/{i}.jpg")), jpeg_bytes()).unwrap();
    }
    let smile_dir = dir.path().join("smile").display().to_string();
    expect_bad(
        CropsSource::new(&crops_config(dir.path().into(), OnBadSample::Error), Split::Train),
        BadInputKind::EmptyFolder,
        &[&smile_dir],
    );
    let source = CropsSource::new(&crops_config(dir.path().into(), OnBadSample::Skip), Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(BadInputKind::EmptyFolder), 1);
    assert_eq!(source.counts(), (0, 2));
    // With nothing left at all even skipping cannot help: the root is named.
    std::fs::remove_file(dir.path().join("no_smile/0.jpg")).unwrap();
    std::fs::remove_file(dir.path().join("no_smile/1.jpg")).unwrap();
    expect_bad(
        CropsSource::new(&crops_config(dir.path().into(), OnBadSample::Skip), Split::Train),
        BadInputKind::EmptyFolder,
        &[&dir.path().display().to_string()],
    );
}

/// Issue 80, cause 9: a FIFO named like a photo hung the run loading it.
#[test]
fn a_fifo_in_a_photo_folder_is_named_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    for class in ["smile", "no_smile"] {
        std::fs::create_dir_all(dir.path().join(class)).unwrap();
        for i in 10..18 {
            std::fs::write(dir.path().join(format!("{class}/{i}.jpg")), jpeg_bytes()).unwrap();
        }
    }
    // Several, so that the split's hash puts some in the training split;
    // in both folders, since each was once refused as a whole (issue 90).
    let mut fifos = 0;
    for class in ["smile", "no_smile"] {
        for i in 1..=8 {
            let made = std::process::Command::new("mkfifo").arg(dir.path().join(format!("{class}/{i}.jpg"))).status();
            assert!(made.unwrap().success());
            fifos += 1;
        }
    }
    expect_bad(
        CropsSource::new(&crops_config(dir.path().into(), OnBadSample::Error), Split::Train),
        BadInputKind::UnreadableFile,
        &["smile/", ".jpg: not a regular file"],
    );
    // Under skip, each one is one counted file; the readable crops remain.
    let source = CropsSource::new(&crops_config(dir.path().into(), OnBadSample::Skip), Split::Train).unwrap();
    let skipped = source.load_skips().unwrap().get(BadInputKind::UnreadableFile);
    assert!((1..=fifos).contains(&skipped), "{skipped} of {fifos} FIFOs counted");
}

/// Issue 90, cause F: a FIFO among the photos an annotation file names
/// (Caltech's ground truth, a JSONL manifest) is checked where it is
/// opened, not only where folders are listed: `grin mine` and `grin train`
/// waited on it forever. A FIFO given as the annotation file itself too.
#[test]
fn a_fifo_named_by_an_annotation_file_is_refused_where_it_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("b.jpg");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo_manifest = dir.path().join("fifo.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo_manifest).status().unwrap().success());
    let manifest = write(dir.path(), "m.jsonl", "{\"image\": \"b.jpg\", \"boxes\": [[1, 1, 20, 20]]}\n");
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let open = |manifest: &Path| {
            let cfg = annotated_config(SourceConfig::Jsonl { manifest: manifest.to_path_buf() }, OnBadSample::Error);
            AnnotatedSource::jsonl(&cfg, Split::Train)
        };
        let photo = open(&manifest).unwrap().scene(0, &mut SampleRng::seed_from_u64(0)).map(|s| s.boxes.len());
        done.send((photo, open(&fifo_manifest).map(|s| s.len()))).unwrap();
    });
    let (photo, fifo_as_manifest) =
        finished.recv_timeout(std::time::Duration::from_secs(60)).expect("a FIFO was waited on");
    expect_bad(photo, BadInputKind::UnreadableFile, &[&fifo.display().to_string(), "not a regular file"]);
    expect_bad(
        fifo_as_manifest,
        BadInputKind::UnreadableFile,
        &["fifo.jsonl", "not a regular file", "grin reads its inputs from regular files"],
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn malformed_jsonl_line_is_named_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.jpg"), jpeg_bytes()).unwrap();
    std::fs::write(dir.path().join("b.jpg"), jpeg_bytes()).unwrap();
    let good = r#"{"image": "a.jpg", "boxes": [[1, 1, 20, 20]], "smile": [true]}"#;
    let other = good.replace("a.jpg", "b.jpg");
    let text = format!("{good}\n{{\"image\": \"a.jpg\", \"boxes\": [[1, 2, 3]\n{other}\n");
    let manifest = write(dir.path(), "m.jsonl", &text);
    let cfg = |on_bad| annotated_config(SourceConfig::Jsonl { manifest: manifest.clone() }, on_bad);
    expect_bad(
        AnnotatedSource::jsonl(&cfg(OnBadSample::Error), Split::Train),
        BadInputKind::MalformedAnnotation,
        &["m.jsonl:2"],
    );
    let source = AnnotatedSource::jsonl(&cfg(OnBadSample::Skip), Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(BadInputKind::MalformedAnnotation), 1);
    assert_eq!(source.len(), Some(2));
    // A wrong key is malformed too, and named.
    let manifest = write(dir.path(), "k.jsonl", r#"{"image": "a.jpg", "bxoes": []}"#);
    let error =
        AnnotatedSource::jsonl(&annotated_config(SourceConfig::Jsonl { manifest }, OnBadSample::Error), Split::Train);
    expect_bad(error, BadInputKind::MalformedAnnotation, &["k.jsonl:1", "bxoes"]);
}

#[test]
fn malformed_wider_line_is_named_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.jpg"), jpeg_bytes()).unwrap();
    let text = "a.jpg\n1\n1 1 10 10 0 0 0 0 0 0\nb.jpg\ntwo\n1 1 5 5 0 0 0 0 0 0\na.jpg\n1\n2 2 x 8 0 0 0 0 0 0\n";
    let gt = write(dir.path(), "wider_gt.txt", text);
    let cfg =
        |on_bad| annotated_config(SourceConfig::Wider { images: dir.path().into(), annotations: gt.clone() }, on_bad);
    expect_bad(
        AnnotatedSource::wider(&cfg(OnBadSample::Error), Split::Train),
        BadInputKind::MalformedAnnotation,
        &["wider_gt.txt:5"],
    );
    let source = AnnotatedSource::wider(&cfg(OnBadSample::Skip), Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(BadInputKind::MalformedAnnotation), 2, "count line and box line");
    assert_eq!(source.len(), Some(1));
}

#[test]
fn malformed_and_truncated_celeba_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..40).map(|i| if i == 31 { "Smiling".into() } else { format!("A{i}") }).collect();
    let row = |img: &str, v: &str| format!("{img} {}", vec![v; 40].join(" "));
    let attr_text = format!("2\n{}\n{}\n{}\n", names.join(" "), row("1.jpg", "1"), row("2.jpg", "-1"));
    let attr = write(dir.path(), "list_attr_celeba.txt", &attr_text);
    let bbox_text = "3\nimage_id x_1 y_1 width height\n1.jpg 1 1 10 10\n2.jpg 1 1 ten 10\n";
    let bbox = write(dir.path(), "list_bbox_celeba.txt", bbox_text);
    let cfg = |on_bad| {
        annotated_config(
            SourceConfig::Celeba { images: dir.path().into(), bbox: bbox.clone(), attr: attr.clone() },
            on_bad,
        )
    };
    expect_bad(
        AnnotatedSource::celeba(&cfg(OnBadSample::Error), Split::Train),
        BadInputKind::MalformedAnnotation,
        &["list_bbox_celeba.txt:4"],
    );
    // Skipping counts the bad row and the row count that no longer matches (a truncated file).
    let source = AnnotatedSource::celeba(&cfg(OnBadSample::Skip), Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(BadInputKind::MalformedAnnotation), 2);
    assert_eq!(source.len(), Some(1));
    let no_smiling: Vec<String> = (0..40).map(|i| format!("A{i}")).collect();
    let attr_text = format!("1\n{}\n{}\n", no_smiling.join(" "), row("1.jpg", "1"));
    write(dir.path(), "list_attr_celeba.txt", &attr_text);
    expect_bad(
        AnnotatedSource::celeba(&cfg(OnBadSample::Error), Split::Train),
        BadInputKind::MalformedAnnotation,
        &["list_attr_celeba.txt:2", "Smiling"],
    );
}

#[test]
fn zero_size_box_is_named_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.jpg"), jpeg_bytes()).unwrap();
    let text =
        "{\"image\": \"a.jpg\", \"boxes\": [[1, 1, 20, 20]]}\n{\"image\": \"a.jpg\", \"boxes\": [[5, 5, 5, 30]]}\n";
    let manifest = write(dir.path(), "m.jsonl", text);
    let cfg = |on_bad| annotated_config(SourceConfig::Jsonl { manifest: manifest.clone() }, on_bad);
    expect_bad(AnnotatedSource::jsonl(&cfg(OnBadSample::Error), Split::Train), BadInputKind::BadBox, &["m.jsonl:2"]);
    let source = AnnotatedSource::jsonl(&cfg(OnBadSample::Skip), Split::Train).unwrap();
    assert_eq!(source.load_skips().unwrap().get(BadInputKind::BadBox), 1);
    let wider = write(dir.path(), "gt.txt", "a.jpg\n1\n3 3 0 9 0 0 0 0 0 0\n");
    let cfg =
        annotated_config(SourceConfig::Wider { images: dir.path().into(), annotations: wider }, OnBadSample::Error);
    expect_bad(AnnotatedSource::wider(&cfg, Split::Train), BadInputKind::BadBox, &["gt.txt:3"]);
}

#[test]
fn box_outside_image_names_the_annotation_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.jpg"), jpeg_bytes()).unwrap();
    let text = "{\"image\": \"a.jpg\", \"boxes\": [[1, 1, 20, 20], [40, 40, 90, 60]]}\n";
    let manifest = write(dir.path(), "m.jsonl", text);
    let source =
        AnnotatedSource::jsonl(&annotated_config(SourceConfig::Jsonl { manifest }, OnBadSample::Error), Split::Train)
            .unwrap();
    let error = source.scene(0, &mut SampleRng::seed_from_u64(0));
    expect_bad(error, BadInputKind::BadBox, &["m.jsonl:1", "a.jpg", "64x64"]);
}

#[test]
fn missing_or_corrupt_annotated_image_is_named_at_scene_time() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.jpg"), b"\xFF\xD8\xFF garbage").unwrap();
    let text = "{\"image\": \"gone.jpg\", \"boxes\": []}\n{\"image\": \"bad.jpg\", \"boxes\": []}\n";
    let manifest = write(dir.path(), "m.jsonl", text);
    let source =
        AnnotatedSource::jsonl(&annotated_config(SourceConfig::Jsonl { manifest }, OnBadSample::Error), Split::Train)
            .unwrap();
    let mut rng = SampleRng::seed_from_u64(0);
    expect_bad(source.scene(0, &mut rng), BadInputKind::UnreadableFile, &["gone.jpg"]);
    expect_bad(source.scene(1, &mut rng), BadInputKind::CorruptImage, &["bad.jpg"]);
    // A missing annotation file is an unreadable file, named.
    let cfg = annotated_config(SourceConfig::Jsonl { manifest: dir.path().join("nope.jsonl") }, OnBadSample::Skip);
    expect_bad(AnnotatedSource::jsonl(&cfg, Split::Train), BadInputKind::UnreadableFile, &["nope.jsonl"]);
}

#[test]
fn scene_time_bad_inputs_are_counted_skips_in_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    // One photo a line: a photo named twice is one photo (round 22).
    for name in ["a.jpg", "b.jpg", "c.jpg"] {
        std::fs::write(dir.path().join(name), jpeg_bytes()).unwrap();
    }
    let bytes = jpeg_bytes();
    std::fs::write(dir.path().join("cut.jpg"), &bytes[..bytes.len() / 2]).unwrap();
    let text = [
        r#"{"image": "a.jpg", "boxes": [[1, 1, 20, 20]], "smile": [true]}"#,
        r#"{"image": "cut.jpg", "boxes": [[1, 1, 20, 20]], "smile": [false]}"#,
        r#"{"image": "b.jpg", "boxes": [[30, 30, 90, 50]], "smile": [false]}"#,
        r#"{"image": "c.jpg", "boxes": [[2, 2, 30, 30]], "smile": [null]}"#,
    ]
    .join("\n");
    let manifest = write(dir.path(), "m.jsonl", &text);
    let cfg = annotated_config(SourceConfig::Jsonl { manifest: manifest.clone() }, OnBadSample::Skip);
    let pipeline = crate::Pipeline::new(&cfg, Split::Train).unwrap();
    for index in 0..20 {
        let s = pipeline.sample(index).unwrap();
        assert_eq!((s.width, s.height), (128, 96));
    }
    // Indices 1 and 2 mod 4 are bad; their replacement candidates may be bad again.
    assert!(pipeline.skips().get(BadInputKind::CorruptImage) >= 5);
    assert!(pipeline.skips().get(BadInputKind::BadBox) >= 5);
    let summary = pipeline.skips().summary().unwrap();
    assert!(summary.contains("corrupt or truncated image") && summary.contains("box outside"), "{summary}");
    // The same inputs under Error stop at the first bad one, named.
    let cfg = annotated_config(SourceConfig::Jsonl { manifest }, OnBadSample::Error);
    let pipeline = crate::Pipeline::new(&cfg, Split::Train).unwrap();
    expect_bad(pipeline.sample(1), BadInputKind::CorruptImage, &["cut.jpg"]);
    expect_bad(pipeline.sample(2), BadInputKind::BadBox, &["m.jsonl:3"]);
}

#[test]
fn a_file_shown_by_two_parts_of_a_mix_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let photos = dir.path().join("photos");
    let free = dir.path().join("free");
    for folder in [&photos, &free] {
        std::fs::create_dir_all(folder).unwrap();
    }
    std::fs::write(photos.join("a.jpg"), jpeg_bytes()).unwrap();
    std::fs::write(free.join("wall.png"), png_bytes()).unwrap();
    let faces = r#"{"image": "a.jpg", "boxes": [[1, 1, 20, 20]], "smile": [true]}"#;
    let manifest = write(&photos, "m.jsonl", faces);
    let jsonl = SourceConfig::Jsonl { manifest };
    let negatives = SourceConfig::Negatives { images: Some(free.clone()), mined: None, graphics: 0.0, zoom_in: 0.0 };
    let mix = |parts: Vec<SourceConfig>| {
        let cfg = annotated_config(SourceConfig::Mix { weights: vec![1.0; parts.len()], parts }, OnBadSample::Error);
        crate::pipeline::build_source(&cfg, Split::Train).map(|_| ()).map_err(|e| e.to_string())
    };
    // Distinct files: a mix as before.
    assert!(mix(vec![jsonl.clone(), negatives.clone()]).is_ok());
    // The photo with faces, linked among the face-free images.
    std::os::unix::fs::symlink(photos.join("a.jpg"), free.join("link.jpg")).unwrap();
    let error = mix(vec![jsonl.clone(), negatives]).unwrap_err();
    for words in ["link.jpg", "parts[0] (jsonl)", "parts[1] (negatives)", "a.jpg", "one part of a mix"] {
        assert!(error.contains(words), "{words:?} missing from: {error}");
    }
    // One photo labelled by two annotation files, under another spelling.
    let again = write(dir.path(), "again.jsonl", &faces.replace("a.jpg", "photos/./a.jpg"));
    let error = mix(vec![jsonl, SourceConfig::Jsonl { manifest: again }]).unwrap_err();
    assert!(error.contains("parts[0] (jsonl) and by parts[1] (jsonl)"), "{error}");
}
