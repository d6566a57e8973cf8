//! The WIDER FACE, CelebA and JSONL parsers, and letterboxed scenes, on
//! small fixtures the tests write.

use crate::annotations::AnnotatedSource;
use crate::source::SampleRng;
use crate::{
    parse_celeba, parse_jsonl, parse_wider, AnnotationText, BadLines, FeatureConfig, Smile, Source, SourceConfig,
    Split, SplitConfig, MAX_BOXES,
};
use grin_image::{OnBadSample, SkipCounts, LETTERBOX_FILL};
use rand::SeedableRng;
use std::path::{Path, PathBuf};

fn write_png(path: &Path, w: u32, h: u32, value: u8) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::GrayImage::from_pixel(w, h, image::Luma([value])).save(path).unwrap();
}

fn config(source: SourceConfig) -> FeatureConfig {
    FeatureConfig {
        width: 320,
        height: 240,
        source,
        split: SplitConfig { train: 1.0, val: 0.0, test: 0.0 },
        ..FeatureConfig::default()
    }
}

const WIDER: &str = "0--Parade/0_Parade_1.jpg
2
10 20 30 40 0 0 0 0 0 0
50 5 8 9 2 0 0 0 1 0
1--Handshaking/1_Handshaking_2.jpg
0
0 0 0 0 0 0 0 0 0 0
";

#[test]
fn wider_parser_reads_blocks_and_empty_images() {
    let skips = SkipCounts::default();
    let bad = BadLines { on_bad: OnBadSample::Error, skips: &skips };
    let entries =
        parse_wider(AnnotationText { text: WIDER, path: Path::new("gt.txt") }, Path::new("/imgs"), bad).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].image, PathBuf::from("/imgs/0--Parade/0_Parade_1.jpg"));
    let f = &entries[0].faces;
    assert_eq!(f.len(), 2);
    assert_eq!((f[0].face.x0, f[0].face.y0, f[0].face.x1, f[0].face.y1), (10.0, 20.0, 40.0, 60.0));
    assert_eq!(f[0].line, 3);
    assert_eq!(f[1].line, 4);
    assert!(f.iter().all(|a| a.face.smile == Smile::Unknown));
    assert!(entries[1].faces.is_empty());
    assert_eq!(skips.total(), 0);
}

#[test]
fn wider_source_letterboxes_images_and_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    write_png(&images.join("0--Parade/0_Parade_1.jpg.png"), 200, 100, 90);
    let text = "0--Parade/0_Parade_1.jpg.png\n1\n10 10 50 50 0 0 0 0 0 0\n";
    let gt = dir.path().join("gt.txt");
    std::fs::write(&gt, text).unwrap();
    let cfg = config(SourceConfig::Wider { images, annotations: gt });
    let source = AnnotatedSource::wider(&cfg, Split::Train).unwrap();
    assert_eq!(source.len(), Some(1));
    let s = source.scene(0, &mut SampleRng::seed_from_u64(0)).unwrap();
    // 200x100 fits 320x240 at 1.6x: 320x160, centred 40 px down.
    assert_eq!((s.width, s.height, s.channels), (320, 240, 1));
    assert_eq!(s.pixels[10 * 320 + 5], LETTERBOX_FILL);
    assert_eq!(s.pixels[120 * 320 + 160], 90);
    assert_eq!(s.boxes.len(), 1);
    let b = s.boxes[0];
    assert_eq!((b.x0, b.y0, b.x1, b.y1), (16.0, 56.0, 96.0, 136.0));
}

/// The 40 CelebA attribute names; `Smiling` is the 32nd.
fn celeba_names() -> Vec<String> {
    let mut names: Vec<String> = (0..40).map(|i| format!("Attr_{i}")).collect();
    names[31] = "Smiling".into();
    names
}

fn celeba_attr_row(image: &str, smiling: i8) -> String {
    let values: Vec<String> = (0..40).map(|i| if i == 31 { smiling.to_string() } else { "-1".into() }).collect();
    format!("{image} {}", values.join("  "))
}

fn celeba_fixture(rows: &[(&str, [u32; 4], i8)]) -> (String, String) {
    let mut bbox = format!("{}\nimage_id x_1 y_1 width height\n", rows.len());
    let mut attr = format!("{}\n{}\n", rows.len(), celeba_names().join(" "));
    for (image, [x, y, w, h], smiling) in rows {
        bbox.push_str(&format!("{image}    {x}   {y}  {w}  {h}\n"));
        attr.push_str(&celeba_attr_row(image, *smiling));
        attr.push('\n');
    }
    (bbox, attr)
}

#[test]
fn celeba_parser_takes_smile_from_the_smiling_column() {
    let (bbox, attr) = celeba_fixture(&[("000001.jpg", [95, 71, 226, 313], 1), ("000002.jpg", [72, 94, 221, 306], -1)]);
    let skips = SkipCounts::default();
    let entries = parse_celeba(
        AnnotationText { text: &bbox, path: Path::new("list_bbox_celeba.txt") },
        AnnotationText { text: &attr, path: Path::new("list_attr_celeba.txt") },
        Path::new("img"),
        BadLines { on_bad: OnBadSample::Error, skips: &skips },
    )
    .unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].image, PathBuf::from("img/000001.jpg"));
    let a = entries[0].faces[0].face;
    assert_eq!((a.x0, a.y0, a.x1, a.y1, a.smile), (95.0, 71.0, 321.0, 384.0, Smile::Yes));
    assert_eq!(entries[0].faces[0].line, 3);
    assert_eq!(entries[1].faces[0].face.smile, Smile::No);
}

#[test]
fn celeba_source_builds_scenes_from_files() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("img_celeba");
    write_png(&images.join("000001.png"), 178, 218, 200);
    let (bbox, attr) = celeba_fixture(&[("000001.png", [20, 30, 100, 120], 1)]);
    let (bbox_path, attr_path) = (dir.path().join("list_bbox_celeba.txt"), dir.path().join("list_attr_celeba.txt"));
    std::fs::write(&bbox_path, bbox).unwrap();
    std::fs::write(&attr_path, attr).unwrap();
    let mut cfg = config(SourceConfig::Celeba { images, bbox: bbox_path, attr: attr_path });
    cfg.channels = 3;
    let source = AnnotatedSource::celeba(&cfg, Split::Train).unwrap();
    assert_eq!(source.name(), "celeba");
    let s = source.scene(0, &mut SampleRng::seed_from_u64(1)).unwrap();
    assert_eq!((s.channels, s.pixels.len()), (3, 320 * 240 * 3));
    assert_eq!(s.boxes.len(), 1);
    assert_eq!(s.boxes[0].smile, Smile::Yes);
    assert!(s.boxes[0].x0 >= 0.0 && s.boxes[0].x1 <= 320.0 && s.boxes[0].y1 <= 240.0);
}

#[test]
fn jsonl_parser_resolves_paths_and_unknown_smiles() {
    let text = r#"{"image": "sub/a.png", "boxes": [[1, 2, 11, 12], [20, 20, 40, 44]], "smile": [true, null]}

{"image": "/abs/b.png", "boxes": [], "smile": []}
{"image": "c.png", "boxes": [[0, 0, 5, 5]]}
"#;
    let skips = SkipCounts::default();
    let file = AnnotationText { text, path: Path::new("/data/set/manifest.jsonl") };
    let entries = parse_jsonl(file, BadLines { on_bad: OnBadSample::Error, skips: &skips }).unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0].image, PathBuf::from("/data/set/sub/a.png"));
    assert_eq!(entries[1].image, PathBuf::from("/abs/b.png"));
    assert_eq!(entries[0].faces[0].face.smile, Smile::Yes);
    assert_eq!(entries[0].faces[1].face.smile, Smile::Unknown);
    assert_eq!(entries[2].faces[0].face.smile, Smile::Unknown);
    assert_eq!(entries[2].faces[0].line, 4);
}

#[test]
fn jsonl_source_keeps_the_largest_boxes() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("many.png"), 320, 240, 10);
    let boxes: Vec<String> = (0..20).map(|i| format!("[{}, 0, {}, {}]", i * 15, i * 15 + 2 + i, 2 + i)).collect();
    let smiles: Vec<&str> = (0..20).map(|i| if i % 2 == 0 { "false" } else { "true" }).collect();
    let line = format!(r#"{{"image": "many.png", "boxes": [{}], "smile": [{}]}}"#, boxes.join(","), smiles.join(","));
    let manifest = dir.path().join("m.jsonl");
    std::fs::write(&manifest, line).unwrap();
    let source = AnnotatedSource::jsonl(&config(SourceConfig::Jsonl { manifest }), Split::Train).unwrap();
    let s = source.scene(0, &mut SampleRng::seed_from_u64(0)).unwrap();
    assert_eq!(s.boxes.len(), MAX_BOXES);
    let smallest = s.boxes.iter().map(|b| b.x1 - b.x0).fold(f32::MAX, f32::min);
    assert_eq!(smallest, 6.0, "the four smallest boxes (2..5 px) are the ones dropped");
}

/// Issue 90, round 22: a photo named on two lines was two photos, each
/// with its own line's faces, so each scored the other's faces as false
/// detections. One photo now, each face once; one box with two smile
/// labels is an error naming the line, or under `skip` the photo left out.
#[test]
fn a_photo_listed_twice_is_one_photo_with_every_face_once() {
    let dir = tempfile::tempdir().unwrap();
    write_png(&dir.path().join("a.png"), 320, 240, 10);
    write_png(&dir.path().join("b.png"), 320, 240, 10);
    let manifest = dir.path().join("m.jsonl");
    let lines: [&str; 4] = [
        r#"{"image": "a.png", "boxes": [[10, 10, 50, 50]], "smile": [true]}"#,
        r#"{"image": "b.png", "boxes": [[5, 5, 25, 25]]}"#,
        r#"{"image": "./a.png", "boxes": [[10, 10, 50, 50], [100, 100, 150, 150]], "smile": [true, false]}"#,
        &format!(r#"{{"image": {:?}, "boxes": [[100, 100, 150, 150]], "smile": [false]}}"#, dir.path().join("a.png")),
    ];
    std::fs::write(&manifest, lines.join("\n")).unwrap();
    let cfg =
        |on_bad| FeatureConfig { on_bad_sample: on_bad, ..config(SourceConfig::Jsonl { manifest: manifest.clone() }) };
    let source = AnnotatedSource::jsonl(&cfg(OnBadSample::Error), Split::Train).unwrap();
    assert_eq!(source.len(), Some(2), "a.png once, b.png once");
    let a = &source.entries()[0];
    assert_eq!(a.faces.iter().map(|f| (f.line, f.face.smile)).collect::<Vec<_>>(), [(1, Smile::Yes), (3, Smile::No)]);
    let conflict = r#"{"image": "a.png", "boxes": [[10, 10, 50, 50]], "smile": [false]}"#;
    std::fs::write(&manifest, format!("{}\n{conflict}", lines.join("\n"))).unwrap();
    let e = AnnotatedSource::jsonl(&cfg(OnBadSample::Error), Split::Train).unwrap_err().to_string();
    assert!(e.contains("m.jsonl:5") && e.contains("face of line 1 again with another smile label"), "{e}");
    let source = AnnotatedSource::jsonl(&cfg(OnBadSample::Skip), Split::Train).unwrap();
    assert_eq!(source.len(), Some(1), "a.png left out, b.png kept");
    assert_eq!(source.load_skips().unwrap().total(), 1);
    // Round 24: a face given twice in one line, or 0.01 px apart, is one
    // face; given twice with two labels in one line, a conflict.
    let twice = r#"{"image": "a.png", "boxes": [[10, 10, 50, 50], [10.01, 10, 50, 50.01]], "smile": [true, true]}"#;
    std::fs::write(&manifest, twice).unwrap();
    let source = AnnotatedSource::jsonl(&cfg(OnBadSample::Error), Split::Train).unwrap();
    assert_eq!(source.entries()[0].faces.len(), 1);
    std::fs::write(&manifest, twice.replace("[true, true]", "[true, false]")).unwrap();
    let e = AnnotatedSource::jsonl(&cfg(OnBadSample::Error), Split::Train).unwrap_err().to_string();
    assert!(e.contains("m.jsonl:1") && e.contains("face of line 1 again with another smile label"), "{e}");
    // Round 22: every line bad under `skip` blamed the split alone.
    std::fs::write(&manifest, "{\"image\": 1}\n[]\n").unwrap();
    let e = AnnotatedSource::jsonl(&cfg(OnBadSample::Skip), Split::Train).unwrap_err().to_string();
    assert!(e.contains("fall in the Train split (skipped 2 inputs: 2 malformed"), "{e}");
}

/// CelebA's attribute file: a row given again with another label was taken
/// last-wins, and a second `Smiling` column passed over (round 22).
#[test]
fn celeba_rows_that_disagree_and_a_second_smiling_column_are_named() {
    let parse = |bbox: &str, attr: &str, on_bad| {
        let skips = SkipCounts::default();
        let entries = parse_celeba(
            AnnotationText { text: bbox, path: Path::new("list_bbox_celeba.txt") },
            AnnotationText { text: attr, path: Path::new("list_attr_celeba.txt") },
            Path::new("img"),
            BadLines { on_bad, skips: &skips },
        );
        (entries.map_err(|e| e.to_string()), skips.total())
    };
    let (bbox, attr) = celeba_fixture(&[("1.jpg", [9, 9, 40, 40], 1), ("2.jpg", [9, 9, 40, 40], -1)]);
    let again = attr.replacen("2\n", "3\n", 1) + &celeba_attr_row("1.jpg", 1) + "\n";
    let (entries, _) = parse(&bbox, &again, OnBadSample::Error);
    assert_eq!(entries.unwrap()[0].faces[0].face.smile, Smile::Yes, "the same label again is the same row");
    let other = attr.replacen("2\n", "3\n", 1) + &celeba_attr_row("1.jpg", -1) + "\n";
    let e = parse(&bbox, &other, OnBadSample::Error).0.unwrap_err();
    assert!(e.contains("list_attr_celeba.txt:5") && e.contains("another `Smiling` label (first at line 3)"), "{e}");
    let (entries, skipped) = parse(&bbox, &other, OnBadSample::Skip);
    let entries = entries.unwrap();
    assert_eq!((entries.len(), skipped), (1, 1), "1.jpg left out, counted");
    assert_eq!(entries[0].image, PathBuf::from("img/2.jpg"));
    let two_columns = attr.replacen("Attr_0 ", "Smiling ", 1);
    let e = parse(&bbox, &two_columns, OnBadSample::Skip).0.unwrap_err();
    assert!(e.contains("list_attr_celeba.txt:2") && e.contains("`Smiling` names two columns"), "{e}");
    // The first line's count: more rows than it says is no cut-off file.
    let e = parse(&bbox.replacen("2\n", "1\n", 1), &attr, OnBadSample::Error).0.unwrap_err();
    assert!(e.contains("list_bbox_celeba.txt:1") && e.contains("says 1 rows, the file has 2 (rows added"), "{e}");
    let e = parse(&bbox.replacen("2\n", "3\n", 1), &attr, OnBadSample::Error).0.unwrap_err();
    assert!(e.contains("(cut short?)"), "{e}");
}
