//! grin-detect end to end: the built binary on fixtures these tests write
//! (plus the committed test scene), checking output, exit codes and errors.

use grin_features::{held_out_photos, FeatureConfig, SourceConfig, SplitConfig};
use grin_image::{fixtures, ImageBound};
use grin_infer::{ModelSource, PhotoSize, Runner, DEFAULT_MODEL};
use image::{DynamicImage, GrayImage, ImageFormat, Luma, Rgb, RgbImage};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn grin_detect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grin-detect")).args(args).output().expect("grin-detect runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

fn json_lines(out: &Output) -> Vec<Value> {
    text(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("each stdout line is JSON")).collect()
}

/// A 320x240 held-out synthetic scene made by `examples/export_scenes.rs`.
fn scene() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/test-scene.png")
}

/// Its faces (x0, y0, x1, y1), from the generator's ground truth (`truth.json`
/// of `export_scenes --count 1 --start 3 --width 320 --height 240`).
const SCENE_FACES: &[[f64; 4]] = &[[212.4, 12.1, 251.3, 57.5], [47.1, 76.7, 74.3, 111.8], [77.9, 2.0, 164.3, 111.9]];

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A valid image with no face: a smooth gradient.
fn write_plain_png(path: &Path) {
    GrayImage::from_fn(96, 64, |x, y| Luma([(x + y) as u8])).save(path).unwrap();
}

fn iou(a: &[f64], b: &[f64]) -> f64 {
    let iw = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let ih = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = iw * ih;
    inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
}

fn boxes(report: &Value) -> Vec<Vec<f64>> {
    report["detections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["box"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect())
        .collect()
}

#[test]
fn json_report_finds_the_scene_faces_with_rounded_values() {
    let out = grin_detect(&["--json", s(&scene())]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let reports = json_lines(&out);
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r["image"], s(&scene()));
    assert_eq!((r["width"].as_u64(), r["height"].as_u64()), (Some(320), Some(240)));
    let detections = r["detections"].as_array().unwrap();
    assert!(!detections.is_empty(), "no face found in the test scene");
    for d in detections {
        let b: Vec<f64> = d["box"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(b[0] >= 0.0 && b[1] >= 0.0 && b[2] <= 320.0 && b[3] <= 240.0 && b[0] < b[2] && b[1] < b[3], "{b:?}");
        for v in &b {
            assert!(((v * 10.0).round() - v * 10.0).abs() < 1e-9, "box value {v} not rounded to 0.1");
        }
        for key in ["score", "smile"] {
            let p = d[key].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&p));
            assert!(((p * 1000.0).round() - p * 1000.0).abs() < 1e-9, "{key} {p} not rounded to 3 decimals");
        }
    }
    // The network ran at twice the photo's pixels (452x339); boxes are in its
    // own pixels: most true faces are matched.
    let found = boxes(r);
    let matched = SCENE_FACES.iter().filter(|f| found.iter().any(|b| iou(b, &f[..]) >= 0.5)).count();
    assert!(matched * 2 >= SCENE_FACES.len(), "matched {matched} of {} faces: {found:?}", SCENE_FACES.len());
}

#[test]
fn bad_inputs_get_one_error_line_each_and_the_rest_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.png");
    write_plain_png(&good);
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "not an image\n").unwrap();
    let fake_png = dir.path().join("fake.png");
    std::fs::write(&fake_png, "plain text with an image's name\n").unwrap();
    // A JPEG start-of-image marker followed by garbage.
    let corrupt = dir.path().join("corrupt.jpg");
    std::fs::write(&corrupt, [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', 0x13, 0x37, 0x00, 0x42]).unwrap();
    // A real JPEG cut off inside its header tables.
    let mut jpeg = Vec::new();
    image::open(scene()).unwrap().write_to(&mut std::io::Cursor::new(&mut jpeg), ImageFormat::Jpeg).unwrap();
    let truncated = dir.path().join("truncated.jpg");
    std::fs::write(&truncated, &jpeg[..100]).unwrap();
    // The same JPEG cut inside its scan data: the decoder alone would fill
    // the rest with grey and report faces on half a picture.
    let cut_scan = dir.path().join("cut-scan.jpg");
    std::fs::write(&cut_scan, &jpeg[..jpeg.len() * 2 / 3]).unwrap();
    let missing = dir.path().join("missing.png");

    let bad = [&notes, &fake_png, &corrupt, &truncated, &cut_scan, &missing];
    let scene = scene();
    let args = [s(&notes), s(&good), s(&fake_png), s(&corrupt), s(&truncated), s(&cut_scan), s(&missing), s(&scene)];
    let out = grin_detect(&[&["--json"][..], &args[..]].concat());
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let reports = json_lines(&out);
    let images: Vec<&str> = reports.iter().map(|r| r["image"].as_str().unwrap()).collect();
    assert_eq!(images, [s(&good), s(&scene)]);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), bad.len(), "one line per bad file: {stderr}");
    for (line, path) in lines.iter().zip(bad) {
        assert!(line.starts_with(&format!("error: {}: ", path.display())), "{line}");
    }
    assert!(lines[0].contains("not an image"), "{}", lines[0]);
    assert!(lines[4].contains("truncated JPEG"), "{}", lines[4]);
    assert!(lines[5].contains("No such file"), "{}", lines[5]);
}

#[test]
fn a_reader_that_closes_the_pipe_ends_the_run_quietly() {
    // `grin-detect *.png | head -1`: the reader leaves after one line, and
    // each later line is written to a closed pipe (println! panicked there).
    let scene = scene();
    let images = vec![s(&scene); 50];
    // (50 timed runs: one per image, so nothing to note.)
    for mode in [&["--json"][..], &[][..], &["--bench", "--iterations", "50", "--json"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_grin-detect"))
            .args(mode)
            .args(&images)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{mode:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stderr), "", "{mode:?}: nothing to say about it");
    }
}

/// A committed `GRINMDL2` model (the shipped one is `GRINMDL3`, whose
/// record sums live in its framing) rewritten as `GRINMDL1`, the format
/// without checksums, so that a test can edit its header.
fn legacy_v1() -> Vec<u8> {
    let model = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/stage-3.grin")).unwrap();
    assert_eq!(&model[..8], b"GRINMDL2");
    // Magic, u32 header length, header, its 8-byte checksum, record.
    let end = 12 + u32::from_le_bytes(model[8..12].try_into().unwrap()) as usize;
    [&b"GRINMDL1"[..], &model[8..end], &model[end + 8..]].concat()
}

/// A `GRINMDL1` file whose header holds `value` at `pointer` (`/spec/width`).
fn with_header(v1: &[u8], pointer: &str, value: &str) -> Vec<u8> {
    let end = 12 + u32::from_le_bytes(v1[8..12].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&v1[12..end]).unwrap();
    *header.pointer_mut(pointer).expect("a header field") = serde_json::from_str(value).unwrap();
    let json = serde_json::to_vec(&header).unwrap();
    [&b"GRINMDL1"[..], &(json.len() as u32).to_le_bytes()[..], &json, &v1[end..]].concat()
}

#[test]
fn unusable_model_files_are_refused_with_one_line_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.png");
    write_plain_png(&good);

    // Header edits go through the older, unsealed format so that the checks
    // behind the header checksum are reached.
    let mut other = legacy_v1();
    let at = other.windows(16).position(|w| w == b"grin-detector-v1").expect("architecture in the header");
    other[at..at + 16].copy_from_slice(b"grin-detector-v9");
    let other_arch = dir.path().join("other-arch.grin");
    std::fs::write(&other_arch, &other).unwrap();

    // Out-of-range header values, each named by its key (issue 28).
    let header_cases = [
        ("zero-width", "/spec/width", "0", "sides must be 32..=4096"),
        ("huge-width", "/spec/width", "100000", "sides must be 32..=4096"),
        ("negative-iou", "/spec/model/nms_iou", "-1", "header: key `model.nms_iou`: -1 must be an IoU in (0, 1]"),
        ("nan-iou", "/spec/model/nms_iou", "null", "malformed model header: key `spec.model.nms_iou`"),
        ("big-threshold", "/spec/model/score_threshold", "2.5", "header: key `model.score_threshold`: 2.5"),
        ("many-detections", "/spec/model/max_detections", "1000000000", "header: key `model.max_detections`"),
    ];
    let mut header_files = Vec::new();
    for (name, pointer, value, expected) in header_cases {
        let path = dir.path().join(format!("{name}.grin"));
        std::fs::write(&path, with_header(&legacy_v1(), pointer, value)).unwrap();
        header_files.push((path, expected));
    }

    let mut header_flip = DEFAULT_MODEL.to_vec();
    header_flip[20] ^= 0x01;
    let header_flip_path = dir.path().join("header-flip.grin");
    std::fs::write(&header_flip_path, &header_flip).unwrap();

    let mut damaged = DEFAULT_MODEL.to_vec();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x40;
    let damaged_path = dir.path().join("damaged.grin");
    std::fs::write(&damaged_path, &damaged).unwrap();

    let mut cases = vec![
        (other_arch, "architecture `grin-detector-v9`"),
        (header_flip_path, "header"),
        (damaged_path, "checksum"),
        (good.clone(), "not a grin model file"),
        (dir.path().join("absent.grin"), "cannot read model"),
    ];
    cases.extend(header_files);
    for (model, expected) in &cases {
        let out = grin_detect(&["--model", s(model), s(&good)]);
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(&format!("error: {}: ", model.display())), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
    }
}

#[test]
fn a_model_file_gives_the_same_output_as_the_embedded_copy_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("default.grin");
    std::fs::write(&model, DEFAULT_MODEL).unwrap();
    let embedded = grin_detect(&["--json", "--threads", "1", s(&scene())]);
    let from_file = grin_detect(&["--json", "--threads", "2", "--model", s(&model), s(&scene())]);
    assert!(embedded.status.success() && from_file.status.success());
    assert_eq!(text(&embedded.stdout), text(&from_file.stdout));
}

#[test]
fn boxes_map_back_to_the_pixels_of_a_larger_image() {
    let dir = tempfile::tempdir().unwrap();
    let small = image::open(scene()).unwrap();
    let big = dir.path().join("big.png");
    small.resize_exact(640, 480, image::imageops::FilterType::Nearest).save(&big).unwrap();
    // The same run size for both: only the mapping back differs.
    let a = grin_detect(&["--json", "--size", "640x480", s(&scene())]);
    let b = grin_detect(&["--json", "--size", "640x480", s(&big)]);
    let (a, b) = (&json_lines(&a)[0], &json_lines(&b)[0]);
    assert_eq!((b["width"].as_u64(), b["height"].as_u64()), (Some(640), Some(480)));
    let halved: Vec<Vec<f64>> = boxes(b).iter().map(|v| v.iter().map(|x| x / 2.0).collect()).collect();
    let confident: Vec<Vec<f64>> = a["detections"]
        .as_array()
        .unwrap()
        .iter()
        .zip(boxes(a))
        .filter(|(d, _)| d["score"].as_f64().unwrap() > 0.6)
        .map(|(_, b)| b)
        .collect();
    assert!(!confident.is_empty());
    for box_a in &confident {
        assert!(halved.iter().any(|h| iou(h, box_a) > 0.8), "{box_a:?} not in {halved:?}");
    }
}

#[test]
fn size_flag_runs_the_network_at_that_size() {
    let at_320 = grin_detect(&["--json", "--size", "320x240", s(&scene())]);
    assert!(at_320.status.success(), "{}", text(&at_320.stderr));
    let report = &json_lines(&at_320)[0];
    for b in boxes(report) {
        assert!(b[2] <= 320.0 && b[3] <= 240.0);
    }
    let human = grin_detect(&["--size", "320x240", s(&scene())]);
    assert!(text(&human.stdout).starts_with("model: embedded default (trained at "));
    // Faces too close for one pass are looked for on the frame halved: a pass keeps faces up to
    // the model's pyramid_above (161 px), so 160x120 holds any face and no third pass runs.
    assert!(text(&human.stdout).lines().next().unwrap().ends_with("running at 320x240 + 160x120"));
    // Without --size an image file runs at twice its own pixels: a photo's small faces get them.
    let photo = grin_detect(&[s(&scene())]);
    let stdout = text(&photo.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].ends_with("each photo at twice its own pixels (at most 2073600)"), "{}", lines[0]);
    assert!(lines[1].ends_with("test-scene.png: running at 452x339 + 226x169 + 113x84"), "{}", lines[1]);
    let one_pass = grin_detect(&["--size", "320x240", "--pyramid-above", "0", s(&scene())]);
    assert!(text(&one_pass.stdout).lines().next().unwrap().ends_with("running at 320x240"));
    for bad in ["-1", "3", "many"] {
        let out = grin_detect(&[&format!("--pyramid-above={bad}"), s(&scene())]);
        assert_eq!(out.status.code(), Some(2), "--pyramid-above {bad}");
        assert!(text(&out.stderr).contains("--pyramid-above"), "--pyramid-above {bad}: {}", text(&out.stderr));
    }

    for bad in ["10x10", "320x99999", "320", "wide x tall"] {
        let out = grin_detect(&["--size", bad, s(&scene())]);
        assert_eq!(out.status.code(), Some(2), "--size {bad}");
        assert!(text(&out.stderr).contains("--size"), "--size {bad}: {}", text(&out.stderr));
    }
}

#[test]
fn a_photo_larger_than_the_pixel_budget_is_shrunk_by_one_factor() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.png");
    let scene = image::open(scene()).unwrap();
    scene.resize_exact(2560, 1920, image::imageops::FilterType::Triangle).save(&big).unwrap();
    // 2560x1920 is 4.9 megapixels: 0.6495 of each side fits 1920x1080's pixels.
    let out = grin_detect(&[s(&big)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("big.png: running at 1662x1247 + 831x623 + "), "{}", text(&out.stdout));
    let small = grin_detect(&["--photo-pixels", "76800", s(&big)]);
    assert!(
        text(&small.stdout).lines().any(|l| l.ends_with("big.png: running at 320x240 + 160x120")),
        "{}",
        text(&small.stdout)
    );
    // Boxes still come back in the photo's pixels: the faces of the scene, 8 times larger.
    let report = &json_lines(&grin_detect(&["--json", s(&big)]))[0];
    let found = boxes(report);
    let matched = SCENE_FACES
        .iter()
        .filter(|f| found.iter().any(|b| iou(b, &f.iter().map(|v| v * 8.0).collect::<Vec<_>>()) >= 0.5))
        .count();
    assert!(matched * 2 >= SCENE_FACES.len(), "matched {matched} of {} faces: {found:?}", SCENE_FACES.len());
    for bad in ["0", "1023", "99999999999", "many"] {
        let out = grin_detect(&["--photo-pixels", bad, s(&big)]);
        assert_eq!(out.status.code(), Some(2), "--photo-pixels {bad}");
        assert!(text(&out.stderr).contains("--photo-pixels"), "--photo-pixels {bad}: {}", text(&out.stderr));
    }
    let both = grin_detect(&["--photo-pixels", "76800", "--size", "320x240", s(&big)]);
    assert_eq!(both.status.code(), Some(2), "--photo-pixels with --size");
}

#[test]
fn draw_writes_one_picture_per_image_with_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("drawn.png");
    let run = grin_detect(&["--draw", s(&out), s(&scene())]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let drawn = image::open(&out).unwrap().to_rgb8();
    assert_eq!(drawn.dimensions(), (320, 240));
    // The scene is grey; only box outlines have colour.
    assert!(drawn.pixels().any(|p| p.0[0] != p.0[1] || p.0[1] != p.0[2]));
    // It says where it wrote, and what the colours mean.
    let said = text(&run.stderr);
    assert!(said.contains(&format!("wrote {}: ", out.display())) && said.contains("green (smiling)"), "{said}");

    let plain = dir.path().join("plain.png");
    write_plain_png(&plain);
    let run = grin_detect(&["--draw", s(&out), s(&scene()), s(&plain)]);
    assert!(run.status.success());
    assert_eq!(image::image_dimensions(dir.path().join("drawn-1.png")).unwrap(), (320, 240));
    assert_eq!(image::image_dimensions(dir.path().join("drawn-2.png")).unwrap(), (96, 64));
}

#[test]
fn a_drawing_over_its_own_photo_is_refused_and_the_photo_kept() {
    let dir = tempfile::tempdir().unwrap();
    let photo = dir.path().join("p.png");
    std::fs::copy(scene(), &photo).unwrap();
    let before = std::fs::read(&photo).unwrap();
    let run = grin_detect(&["--draw", s(&photo), s(&photo)]);
    assert_eq!(run.status.code(), Some(2), "refused before anything runs: {}", text(&run.stderr));
    assert!(text(&run.stderr).contains("is also an input"), "{}", text(&run.stderr));
    assert_eq!(std::fs::read(&photo).unwrap(), before);
    // Nor over the model file it runs (issue 90).
    let model = dir.path().join("m.grin");
    std::fs::write(&model, DEFAULT_MODEL).unwrap();
    let model_before = std::fs::read(&model).unwrap();
    let run = grin_detect(&["--model", s(&model), "--draw", s(&model), s(&scene())]);
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert!(text(&run.stderr).contains("is also an input"), "{}", text(&run.stderr));
    assert_eq!(std::fs::read(&model).unwrap(), model_before);
}

#[test]
fn bench_reports_latency_and_cost() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.png");
    let out = grin_detect(&[
        "--bench",
        "--json",
        "--threads",
        "1",
        "--iterations",
        "7",
        "--warmup",
        "1",
        "--size",
        "160x120",
        s(&scene()),
        s(&missing),
    ]);
    assert_eq!(out.status.code(), Some(1), "the missing image fails the run");
    assert!(text(&out.stderr).contains(s(&missing)));
    let r = &json_lines(&out)[0];
    assert_eq!(r["threads"], 1);
    assert_eq!(r["iterations"], 7);
    assert_eq!(r["images"], 1);
    assert_eq!((r["width"].as_u64(), r["height"].as_u64()), (Some(160), Some(120)));
    let median = r["median_ms"].as_f64().unwrap();
    assert!(median > 0.0 && r["p95_ms"].as_f64().unwrap() >= median && r["fps"].as_f64().unwrap() > 0.0);
    assert!(r["params"].as_u64().unwrap() > 1000 && r["mflops"].as_f64().unwrap() > 0.0);
    // The parts, each timed on its own: no part's median over the whole's p95.
    for part in ["detection", "scaling", "network", "decoding"] {
        let m = r[part]["median_ms"].as_f64().unwrap_or_else(|| panic!("{part} in {r}"));
        assert!(m > 0.0 && m <= r["p95_ms"].as_f64().unwrap(), "{part}: {m} ms");
    }
    // Detection is each frame's network, decoding and look together: never
    // under the network alone, frame by frame, so not in the median either.
    assert!(r["detection"]["median_ms"].as_f64() >= r["network"]["median_ms"].as_f64());

    let human = grin_detect(&["--bench", "--iterations", "3", s(&scene())]);
    assert!(human.status.success());
    assert!(text(&human.stdout).contains("median"), "{}", text(&human.stdout));
    let needs_bench = grin_detect(&["--iterations", "3", s(&scene())]);
    assert_eq!(needs_bench.status.code(), Some(2));
    // Round 20: one iteration over three images reported three, unsaid.
    let uneven = grin_detect(&[
        "--bench",
        "--json",
        "--iterations",
        "1",
        "--warmup",
        "0",
        s(&scene()),
        s(&scene()),
        s(&scene()),
    ]);
    assert!(uneven.status.success(), "{}", text(&uneven.stderr));
    assert_eq!(json_lines(&uneven)[0]["images"], 1);
    assert!(
        text(&uneven.stderr).contains("not a multiple of the 3 images: the first is timed once more"),
        "{}",
        text(&uneven.stderr)
    );
    // Round 21: images at two sizes were timed under one size's label.
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.png");
    image::open(scene()).unwrap().resize_exact(96, 72, image::imageops::FilterType::Triangle).save(&small).unwrap();
    let mixed = grin_detect(&["--bench", "--iterations", "2", s(&scene()), s(&small)]);
    assert_eq!(mixed.status.code(), Some(2), "{}", text(&mixed.stderr));
    assert!(text(&mixed.stderr).contains("--bench times one frame size"), "{}", text(&mixed.stderr));
    let sized = grin_detect(&["--bench", "--iterations", "2", "--size", "160x120", s(&scene()), s(&small)]);
    assert!(sized.status.success(), "{}", text(&sized.stderr));
}

/// A 16:9 colour photo, 1280x720: the test scene three times as large at
/// (200, 0) on a coloured gradient, and its faces there.
fn wide_photo() -> (DynamicImage, Vec<[f64; 4]>) {
    let scene = image::open(scene()).unwrap().resize_exact(960, 720, image::imageops::FilterType::Triangle).to_rgb8();
    let photo = RgbImage::from_fn(1280, 720, |x, y| match x.checked_sub(200) {
        Some(sx) if sx < 960 => *scene.get_pixel(sx, y),
        _ => Rgb([(x / 5) as u8, (y / 3) as u8, 90]),
    });
    let faces = SCENE_FACES.iter().map(|f| [f[0] * 3.0 + 200.0, f[1] * 3.0, f[2] * 3.0 + 200.0, f[3] * 3.0]).collect();
    (DynamicImage::ImageRgb8(photo), faces)
}

/// The 16:9 photo as a PNG, and as a phone writes it: a JPEG stored on its
/// side (720x1280) with an EXIF tag saying to turn it a quarter clockwise.
fn write_wide_photos(dir: &Path) -> [PathBuf; 2] {
    let (photo, _) = wide_photo();
    let (png, turned) = (dir.join("wide.png"), dir.join("turned.jpg"));
    photo.save(&png).unwrap();
    std::fs::write(&turned, fixtures::jpeg_with_exif_orientation(&photo.rotate270(), 6)).unwrap();
    [png, turned]
}

/// Issue 27's one photo path: `grin eval` and `grin calibrate` (held-out
/// photos, through grin-features) and `grin-detect` make the same frame
/// from the same file, byte for byte, and map boxes between the photo and
/// the frame the same way.
#[test]
fn eval_and_grin_detect_make_the_same_frame_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_wide_photos(dir.path());
    let (_, faces) = wide_photo();
    let boxes = serde_json::to_string(&faces).unwrap();
    let manifest = dir.path().join("m.jsonl");
    let lines: Vec<String> = files
        .iter()
        .map(|f| format!(r#"{{"image": "{}", "boxes": {boxes}}}"#, f.file_name().unwrap().to_str().unwrap()))
        .collect();
    std::fs::write(&manifest, lines.join("\n")).unwrap();
    let cfg = FeatureConfig {
        source: SourceConfig::Jsonl { manifest },
        split: SplitConfig { train: 0.0, val: 0.0, test: 1.0 },
        ..FeatureConfig::default()
    };
    let held = held_out_photos(&cfg, 0).unwrap();
    let mut runner = Runner::load(ModelSource::Embedded).unwrap();
    runner.set_run_size(640, 480).unwrap();
    let bound = ImageBound { max_pixels: grin_image::DEFAULT_MAX_PIXELS, knob: "--max-pixels" };
    assert_eq!(held[0].len(), 2);
    for i in 0..2 {
        let path = held[0].image_path(i);
        let evaluated = held[0].letterboxed(i, 640, 480, 1).unwrap();
        let (image, frame) = runner.read_photo(path, bound, PhotoSize::RunSize).unwrap();
        // The JPEG is turned upright: 1280x720 as shown, not 720x1280 as stored.
        assert_eq!((image.width(), image.height()), (1280, 720), "{}", path.display());
        let bytes: Vec<u8> = frame.pixels.iter().map(|v| (v * 255.0).round() as u8).collect();
        assert_eq!(bytes, evaluated.pixels, "{}: grin-detect's frame is not eval's", path.display());
        assert!(frame.pixels.iter().zip(&evaluated.pixels).all(|(&f, &e)| f == e as f32 / 255.0));
        // 1280x720 in 640x480: 640x360, centred 60 rows down on grey.
        assert!(evaluated.pixels[..640 * 60].iter().all(|&v| v == grin_image::LETTERBOX_FILL));
        // Eval's boxes, mapped back by grin-detect's mapping, are the faces.
        assert_eq!(evaluated.boxes.len(), faces.len());
        for (b, face) in evaluated.boxes.iter().zip(&faces) {
            let d = grin_net::Detection { x0: b.x0, y0: b.y0, x1: b.x1, y1: b.y1, score: 1.0, smile: 0.0 };
            let back = frame.mapping().to_source(d).unwrap();
            let got = [back.x0, back.y0, back.x1, back.y1];
            assert!(got.iter().zip(face).all(|(&g, &f)| (g as f64 - f).abs() < 0.01), "{got:?} vs {face:?}");
        }
    }
}

#[test]
fn grin_detect_reports_boxes_in_the_pixels_of_a_wide_or_turned_photo() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_wide_photos(dir.path());
    let (_, faces) = wide_photo();
    let out = grin_detect(&["--json", s(&files[0]), s(&files[1])]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for report in json_lines(&out) {
        assert_eq!((report["width"].as_u64(), report["height"].as_u64()), (Some(1280), Some(720)), "{report}");
        let found = boxes(&report);
        let matched = faces.iter().filter(|f| found.iter().any(|b| iou(b, &f[..]) >= 0.5)).count();
        assert!(matched * 2 >= faces.len(), "{}: matched {matched} of {}: {found:?}", report["image"], faces.len());
    }
}

/// Issue 28's image bombs, through `grin-detect`: each is one line naming
/// the file and the bound, at once (an unbounded decoder took 8.9 GB and
/// 49 s on the JPEG); the other images still run; `--max-pixels` moves the bound.
#[test]
fn image_bombs_are_refused_at_once_and_max_pixels_moves_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (jpeg, png) = (dir.path().join("bomb.jpg"), dir.path().join("bomb.png"));
    std::fs::write(&jpeg, fixtures::jpeg_claiming(65500, 65500)).unwrap();
    std::fs::write(&png, fixtures::png_claiming(20000, 20000)).unwrap();
    let started = std::time::Instant::now();
    let out = grin_detect(&["--json", s(&jpeg), s(&png), s(&scene())]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(json_lines(&out).len(), 1, "the scene still runs");
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "error: {}: image 65500x65500 (4290.2 megapixels) is over the bound of 64.0 megapixels and 65535 px \
                 a side (--max-pixels raises it)",
                jpeg.display()
            ),
            format!(
                "error: {}: image 20000x20000 (400.0 megapixels) is over the bound of 64.0 megapixels and 65535 px \
                 a side (--max-pixels raises it)",
                png.display()
            ),
        ]
    );
    // The scene is 320x240 = 76800 pixels.
    let refused = grin_detect(&["--max-pixels", "76799", s(&scene())]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("image 320x240 (0.1 megapixels) is over the bound"),
        "{}",
        text(&refused.stderr)
    );
    assert!(grin_detect(&["--max-pixels", "76800", s(&scene())]).status.success());
    let zero = grin_detect(&["--max-pixels", "0", s(&scene())]);
    assert_eq!(zero.status.code(), Some(2));
    assert!(text(&zero.stderr).contains("--max-pixels"), "{}", text(&zero.stderr));
}

/// Issue 90, round 6: within the largest --max-pixels, a buffer past what the
/// process may have aborted the decoder or the stream (exit 134). Under an
/// address-space limit, about a Pi's memory, each is an error naming it.
#[test]
fn a_buffer_past_the_process_memory_is_an_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("huge.png");
    std::fs::write(&png, fixtures::png_claiming(60000, 60000)).unwrap();
    let bin = env!("CARGO_BIN_EXE_grin-detect");
    let limited = |script: String| {
        std::process::Command::new("sh").arg("-c").arg(format!("ulimit -v 1000000; {script}")).output().unwrap()
    };
    let image = limited(format!("exec {bin} --max-pixels 4000000000 {}", png.display()));
    assert_eq!(image.status.code(), Some(1), "{}", text(&image.stderr));
    assert!(text(&image.stderr).contains("huge.png: image 60000x60000 needs"), "{}", text(&image.stderr));
    let args = "--stream - --input-format gray8 --input-size 40000x40000 --max-pixels 1600000000";
    let stream = limited(format!("head -c 100 /dev/zero | {bin} {args}"));
    assert_ne!(stream.status.code(), Some(134), "{}", text(&stream.stderr));
    assert!(text(&stream.stderr).contains("more memory than this process may take"), "{}", text(&stream.stderr));
    // Round 9: an 8000x8000 grey photo is found in 64 MB, but its drawing is
    // an RGB copy of 192 MB and its encoding: that copy panicked in the
    // image crate, or aborted.
    let grey = dir.path().join("grey.png");
    image::GrayImage::from_pixel(8000, 8000, image::Luma([128])).save(&grey).unwrap();
    let drawn = dir.path().join("drawn.png");
    let draw = limited(format!("ulimit -v 400000; exec {bin} {} --draw {}", grey.display(), drawn.display()));
    let stderr = text(&draw.stderr);
    assert_eq!(draw.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("--draw {}: a 8000x8000 picture needs", drawn.display())), "{stderr}");
    assert!(!drawn.exists(), "nothing written");
}

/// Issue 90, causes D and E: flags that cannot apply were dropped without
/// a word, and `--iterations 4294967295` reserved 68 GB and aborted. Each
/// is now refused before anything runs, naming the flag.
#[test]
fn a_flag_that_cannot_apply_or_a_count_past_its_bound_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let drawn = dir.path().join("drawn.png");
    let scene = scene();
    // (A model without a look, `--second-look-confirm` alone: the same rule,
    // grin_model's `look.rs` tests.)
    let odd_name = dir.path().join("drawn.xyz");
    // Round 9: a missing folder and a format grin does not write (.gif)
    // were found after detection, the latter in the image crate's words.
    let no_folder = dir.path().join("absent").join("drawn.png");
    let gif = dir.path().join("drawn.gif");
    // Round 17: a read-only drawing was refused after detection (exit 1).
    let read_only = dir.path().join("kept.png");
    std::fs::write(&read_only, b"kept").unwrap();
    std::fs::set_permissions(&read_only, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let cases: [(&[&str], &str); 15] = [
        // Round 7: found only after detection ran (exit 1).
        (&["--draw", s(dir.path())], "is a folder: name a file"),
        // Round 10: a trailing slash, found only when the picture was written.
        (&["--draw", "o.png/"], "--draw o.png/: ends in /, so names a folder"),
        (&["--draw", s(&odd_name)], "grin writes pictures as .png or .jpg"),
        (&["--draw", s(&no_folder)], "absent does not exist"),
        (&["--draw", s(&gif)], "drawn.gif: grin writes pictures as .png or .jpg"),
        (&["--draw", s(&read_only)], "kept.png: is read-only: not replaced"),
        (&["--second-look-below", "0", "--second-look-confirm", "0.99"], "--second-look-confirm: no second look runs"),
        (&["--bench", "--draw", s(&drawn)], "--draw"),
        (&["--bench", "--iterations", "4294967295"], "--iterations"),
        (&["--bench", "--warmup", "4294967295"], "--warmup"),
        (&["--stream", "-", "--json"], "--json"),
        (&["--stream", "-", "--photo-pixels", "100000"], "--photo-pixels"),
        (&["--stream", "-", "--track-patience", "4294967295"], "--track-patience"),
        // Round 6: ignored on a stream without a word.
        (&["--stream", "-", "--iterations", "5"], "--iterations"),
        (&["--stream", "-", "--warmup", "3"], "--warmup"),
    ];
    for (args, named) in cases {
        let mut all = args.to_vec();
        if !args.contains(&"--stream") {
            all.push(s(&scene));
        }
        let started = std::time::Instant::now();
        let out = grin_detect(&all);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named) && !stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{args:?}: refused before it runs");
    }
    assert!(!drawn.exists(), "nothing drawn");
    assert_eq!(std::fs::read(&read_only).unwrap(), b"kept");
    // With the shipped model's look on, confirm applies.
    let out = grin_detect(&["--second-look-confirm", "0.99", s(&scene)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Round 25 of issue 90: `grin-detect --json r.jpg >> r.jpg` appended its
/// report to the photo it read (exit 0); `cat` refuses the same.
#[test]
fn standard_output_onto_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let photo = dir.path().join("r.png");
    std::fs::copy(scene(), &photo).unwrap();
    let before = std::fs::read(&photo).unwrap();
    let appended = std::fs::OpenOptions::new().append(true).open(&photo).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_grin-detect"))
        .args(["--json", s(&photo)])
        .stdout(appended)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("r.png: is also standard output"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&photo).unwrap(), before);
    // An output onto standard output's file (round 26): the drawing would
    // replace the file the JSON goes to, or be mixed with it.
    let json = dir.path().join("o.png");
    for draw in [json.clone(), "/dev/stdout".into()] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_grin-detect"))
            .args(["--draw", s(&draw), s(&photo)])
            .stdout(std::fs::File::create(&json).unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(": is also standard output: what the command"), "{}", text(&out.stderr));
    }
}
