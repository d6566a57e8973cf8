//! Annotated detection sets: WIDER FACE, CelebA and a plain JSONL manifest,
//! all parsed into one list of (image, boxes with smile labels).
//!
//! Annotation files are parsed up front (a malformed line is an error naming
//! `file:line`, or a counted skip of that image); images are only opened when
//! a scene needs them, so a box outside its image is found then, against the
//! decoded size, and reported with the annotation line it came from.

use crate::config::{FeatureConfig, OnBadSample, SourceConfig, Split};
use crate::crops::{check_split, decode, skip_or_fail, split_of_path, Raster};
use crate::error::{BadInputKind, FeatureError, SkipCounts};
use crate::sample::{FaceBox, Sample, Smile, MAX_BOXES};
use crate::source::{SampleRng, Source};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Grey of the letterbox bars (the usual detector padding value).
pub const LETTERBOX_FILL: u8 = 114;
/// Boxes may overhang their image by this many pixels (annotators round outwards).
const EDGE_TOLERANCE: f32 = 1.0;
const IMAGE_EXTENSIONS: [&str; 4] = [".jpg", ".jpeg", ".png", ".bmp"];

/// One annotated face: box in source-image pixels and the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotated {
    pub face: FaceBox,
    pub line: usize,
}

/// One image and its faces.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub image: PathBuf,
    pub faces: Vec<Annotated>,
}

/// Scenes from annotated images, letterboxed to the output size.
#[derive(Debug)]
pub struct AnnotatedSource {
    name: &'static str,
    /// The file the box line numbers refer to.
    annotations: PathBuf,
    entries: Vec<Entry>,
    width: u32,
    height: u32,
    channels: u32,
    load_skips: SkipCounts,
}

impl AnnotatedSource {
    pub fn wider(cfg: &FeatureConfig, split: Split) -> Result<AnnotatedSource, FeatureError> {
        let SourceConfig::Wider { images, annotations } = &cfg.source else {
            return Err(wrong_kind("wider"));
        };
        let skips = SkipCounts::default();
        let text = read_text(annotations)?;
        let entries = parse_wider(&text, annotations, images, cfg.on_bad_sample, &skips)?;
        Self::build("wider", annotations, entries, cfg, split, skips)
    }

    pub fn celeba(cfg: &FeatureConfig, split: Split) -> Result<AnnotatedSource, FeatureError> {
        let SourceConfig::Celeba { images, bbox, attr } = &cfg.source else {
            return Err(wrong_kind("celeba"));
        };
        let skips = SkipCounts::default();
        let bbox_text = read_text(bbox)?;
        let attr_text = read_text(attr)?;
        let entries = parse_celeba(&bbox_text, bbox, &attr_text, attr, images, cfg.on_bad_sample, &skips)?;
        Self::build("celeba", bbox, entries, cfg, split, skips)
    }

    pub fn jsonl(cfg: &FeatureConfig, split: Split) -> Result<AnnotatedSource, FeatureError> {
        let SourceConfig::Jsonl { manifest } = &cfg.source else {
            return Err(wrong_kind("jsonl"));
        };
        let skips = SkipCounts::default();
        let text = read_text(manifest)?;
        let entries = parse_jsonl(&text, manifest, cfg.on_bad_sample, &skips)?;
        Self::build("jsonl", manifest, entries, cfg, split, skips)
    }

    fn build(
        name: &'static str,
        annotations: &Path,
        entries: Vec<Entry>,
        cfg: &FeatureConfig,
        split: Split,
        load_skips: SkipCounts,
    ) -> Result<AnnotatedSource, FeatureError> {
        check_split(&cfg.split)?;
        let entries: Vec<Entry> =
            entries.into_iter().filter(|e| split_of_path(&e.image, &cfg.split) == split).collect();
        if entries.is_empty() {
            return Err(FeatureError::Config(format!(
                "{}: no annotated images fall in the {split:?} split",
                annotations.display()
            )));
        }
        Ok(AnnotatedSource {
            name,
            annotations: annotations.to_path_buf(),
            entries,
            width: cfg.width,
            height: cfg.height,
            channels: cfg.channels,
            load_skips,
        })
    }

    /// Annotation lines skipped while parsing (under `on_bad_sample = "skip"`).
    pub fn load_skips(&self) -> &SkipCounts {
        &self.load_skips
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

impl Source for AnnotatedSource {
    fn load_skips(&self) -> Option<&SkipCounts> {
        Some(&self.load_skips)
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn len(&self) -> Option<usize> {
        Some(self.entries.len())
    }

    fn scene(&self, index: u64, _rng: &mut SampleRng) -> Result<Sample, FeatureError> {
        let entry = &self.entries[(index % self.entries.len() as u64) as usize];
        let image = decode(&entry.image, self.channels)?;
        check_inside(entry, &image, &self.annotations)?;
        Ok(letterbox(&image, &entry.faces, self.width, self.height))
    }
}

fn wrong_kind(kind: &str) -> FeatureError {
    FeatureError::Config(format!("this source needs `features.source.kind = \"{kind}\"`"))
}

pub(crate) fn read_text(path: &Path) -> Result<String, FeatureError> {
    std::fs::read_to_string(path)
        .map_err(|e| FeatureError::bad(path, None, BadInputKind::UnreadableFile, format!("cannot read: {e}")))
}

/// A box outside its decoded image names the annotation line it came from.
fn check_inside(entry: &Entry, image: &Raster, annotations: &Path) -> Result<(), FeatureError> {
    let (w, h) = (image.width as f32, image.height as f32);
    for a in &entry.faces {
        let f = &a.face;
        if f.x0 < -EDGE_TOLERANCE || f.y0 < -EDGE_TOLERANCE || f.x1 > w + EDGE_TOLERANCE || f.y1 > h + EDGE_TOLERANCE {
            return Err(FeatureError::bad(
                annotations,
                Some(a.line),
                BadInputKind::BadBox,
                format!(
                    "box [{}, {}, {}, {}] lies outside {} ({}x{})",
                    f.x0,
                    f.y0,
                    f.x1,
                    f.y1,
                    entry.image.display(),
                    image.width,
                    image.height
                ),
            ));
        }
    }
    Ok(())
}

/// Scales the image to fit `width` x `height` keeping its aspect, centres it
/// on grey bars, and moves the boxes with it (largest `MAX_BOXES` kept).
pub fn letterbox(image: &Raster, faces: &[Annotated], width: u32, height: u32) -> Sample {
    let scale = (width as f32 / image.width as f32).min(height as f32 / image.height as f32);
    let nw = ((image.width as f32 * scale).round() as u32).clamp(1, width);
    let nh = ((image.height as f32 * scale).round() as u32).clamp(1, height);
    let (ox, oy) = ((width - nw) / 2, (height - nh) / 2);
    let resized = resize(image, nw, nh);
    let c = image.channels as usize;
    let mut pixels = vec![LETTERBOX_FILL; (width * height) as usize * c];
    let row = nw as usize * c;
    for y in 0..nh as usize {
        let at = ((oy as usize + y) * width as usize + ox as usize) * c;
        pixels[at..at + row].copy_from_slice(&resized[y * row..(y + 1) * row]);
    }
    let (sx, sy) = (nw as f32 / image.width as f32, nh as f32 / image.height as f32);
    let mut boxes: Vec<FaceBox> = faces
        .iter()
        .map(|a| FaceBox {
            x0: (a.face.x0 * sx + ox as f32).clamp(ox as f32, (ox + nw) as f32),
            y0: (a.face.y0 * sy + oy as f32).clamp(oy as f32, (oy + nh) as f32),
            x1: (a.face.x1 * sx + ox as f32).clamp(ox as f32, (ox + nw) as f32),
            y1: (a.face.y1 * sy + oy as f32).clamp(oy as f32, (oy + nh) as f32),
            smile: a.face.smile,
        })
        // Faces below a pixel after scaling carry no signal and break box losses.
        .filter(|b| b.x1 - b.x0 >= 1.0 && b.y1 - b.y0 >= 1.0)
        .collect();
    if boxes.len() > MAX_BOXES {
        let area = |b: &FaceBox| (b.x1 - b.x0) * (b.y1 - b.y0);
        boxes.sort_by(|a, b| area(b).total_cmp(&area(a)));
        boxes.truncate(MAX_BOXES);
    }
    Sample { width, height, channels: image.channels, pixels, boxes }
}

/// Area-aware (triangle filter) resize, so big photos do not alias when shrunk.
pub(crate) fn resize(image: &Raster, width: u32, height: u32) -> Vec<u8> {
    use image::imageops::{resize, FilterType};
    if (image.width, image.height) == (width, height) {
        return image.pixels.clone();
    }
    let (w, h) = (image.width, image.height);
    if image.channels == 1 {
        let buf = image::GrayImage::from_raw(w, h, image.pixels.clone()).expect("raster size matches");
        resize(&buf, width, height, FilterType::Triangle).into_raw()
    } else {
        let buf = image::RgbImage::from_raw(w, h, image.pixels.clone()).expect("raster size matches");
        resize(&buf, width, height, FilterType::Triangle).into_raw()
    }
}

/// Collects parse problems: the first is the error under `Error`; under
/// `Skip` each bad image is counted once and left out.
pub(crate) struct Problems<'a> {
    pub(crate) on_bad: OnBadSample,
    pub(crate) skips: &'a SkipCounts,
}

impl Problems<'_> {
    pub(crate) fn report(&self, error: FeatureError) -> Result<(), FeatureError> {
        skip_or_fail(self.on_bad, self.skips, error)
    }
}

pub(crate) fn malformed(path: &Path, line: usize, message: impl Into<String>) -> FeatureError {
    FeatureError::bad(path, Some(line), BadInputKind::MalformedAnnotation, message)
}

pub(crate) fn bad_box(path: &Path, line: usize, message: impl Into<String>) -> FeatureError {
    FeatureError::bad(path, Some(line), BadInputKind::BadBox, message)
}

/// `[x0, y0, x1, y1]` must be finite with positive width and height.
fn checked_box(path: &Path, line: usize, b: [f32; 4], smile: Smile) -> Result<FaceBox, FeatureError> {
    let [x0, y0, x1, y1] = b;
    if !b.iter().all(|v| v.is_finite()) {
        return Err(bad_box(path, line, format!("box {b:?} has a non-finite coordinate")));
    }
    if x1 <= x0 || y1 <= y0 {
        return Err(bad_box(path, line, format!("box {b:?} has zero or negative size")));
    }
    Ok(FaceBox { x0, y0, x1, y1, smile })
}

/// WIDER FACE `wider_face_*_bbx_gt.txt`: blocks of
/// `image/path.jpg`, `N`, then N lines `x y w h blur expression illumination invalid occlusion pose`
/// (N = 0 is followed by one line of zeros). WIDER has no smile labels.
pub fn parse_wider(
    text: &str,
    path: &Path,
    images: &Path,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<Entry>, FeatureError> {
    let problems = Problems { on_bad, skips };
    let lines: Vec<(usize, &str)> =
        text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty()).collect();
    let mut entries = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (name_line, name) = lines[i];
        i += 1;
        if !looks_like_image(name) {
            problems.report(malformed(path, name_line, format!("expected an image path, found {name:?}")))?;
            continue;
        }
        let Some(&(count_line, count_text)) = lines.get(i) else {
            problems.report(malformed(path, name_line, format!("{name}: file ends before the face count")))?;
            break;
        };
        i += 1;
        let Ok(count) = count_text.parse::<usize>() else {
            problems.report(malformed(
                path,
                count_line,
                format!("expected the face count of {name}, found {count_text:?}"),
            ))?;
            // Resynchronise on the next image path.
            while i < lines.len() && !looks_like_image(lines[i].1) {
                i += 1;
            }
            continue;
        };
        // N = 0 still has one (all-zero) box line.
        let box_lines = count.max(1);
        let mut faces = Vec::with_capacity(count);
        let mut problem = None;
        for k in 0..box_lines {
            let Some(&(line, text)) = lines.get(i) else {
                problem.get_or_insert(malformed(
                    path,
                    count_line,
                    format!("{name}: says {count} faces, file ends after {k}"),
                ));
                break;
            };
            if looks_like_image(text) {
                problem.get_or_insert(malformed(path, line, format!("{name}: says {count} faces, found {k}")));
                break;
            }
            i += 1;
            let fields: Result<Vec<f32>, _> = text.split_whitespace().map(str::parse::<f32>).collect();
            let fields = match fields {
                Ok(f) if f.len() >= 4 => f,
                _ => {
                    problem.get_or_insert(malformed(
                        path,
                        line,
                        format!("expected `x y w h ...` numbers, found {text:?}"),
                    ));
                    continue;
                }
            };
            if count == 0 {
                continue;
            }
            let b = [fields[0], fields[1], fields[0] + fields[2], fields[1] + fields[3]];
            match checked_box(path, line, b, Smile::Unknown) {
                Ok(face) => faces.push(Annotated { face, line }),
                Err(e) => {
                    problem.get_or_insert(e);
                }
            }
        }
        match problem {
            Some(e) => problems.report(e)?,
            None => entries.push(Entry { image: images.join(name), faces }),
        }
    }
    Ok(entries)
}

fn looks_like_image(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    IMAGE_EXTENSIONS.iter().any(|e| lower.ends_with(e))
}

/// CelebA: `list_bbox_celeba.txt` (count, `image_id x_1 y_1 width height`,
/// rows) and `list_attr_celeba.txt` (count, 40 attribute names, rows of
/// 1/-1); the smile label is the `Smiling` column. An image missing from
/// the attribute file gets an unknown smile.
pub fn parse_celeba(
    bbox_text: &str,
    bbox_path: &Path,
    attr_text: &str,
    attr_path: &Path,
    images: &Path,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<Entry>, FeatureError> {
    let problems = Problems { on_bad, skips };
    let smiles = parse_celeba_attr(attr_text, attr_path, &problems)?;
    let mut lines = numbered(bbox_text);
    let declared = header_count(&mut lines, bbox_path)?;
    let (header_line, header) = lines.next().ok_or_else(|| malformed(bbox_path, 2, "missing header line"))?;
    let columns: Vec<&str> = header.split_whitespace().collect();
    let expected = ["x_1", "y_1", "width", "height"];
    if !expected.iter().all(|c| columns.contains(c)) {
        return Err(malformed(
            bbox_path,
            header_line,
            format!("expected header `image_id x_1 y_1 width height`, found {header:?}"),
        ));
    }
    // Some copies carry `image_id` in the header, others not: index from the end.
    let at = |name: &str| 1 + columns.iter().filter(|c| **c != "image_id").position(|c| *c == name).expect("checked");
    let (ix, iy, iw, ih) = (at("x_1"), at("y_1"), at("width"), at("height"));
    let mut entries = Vec::new();
    let mut rows = 0;
    for (line, text) in lines {
        rows += 1;
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            problems.report(malformed(
                bbox_path,
                line,
                format!("expected `image_id x y width height`, found {text:?}"),
            ))?;
            continue;
        }
        let numbers: Result<Vec<f32>, _> = [ix, iy, iw, ih].iter().map(|&k| fields[k].parse::<f32>()).collect();
        let Ok(n) = numbers else {
            problems.report(malformed(bbox_path, line, format!("non-numeric box in {text:?}")))?;
            continue;
        };
        let smile = smiles.get(fields[0]).copied().unwrap_or(Smile::Unknown);
        match checked_box(bbox_path, line, [n[0], n[1], n[0] + n[2], n[1] + n[3]], smile) {
            Ok(face) => entries.push(Entry { image: images.join(fields[0]), faces: vec![Annotated { face, line }] }),
            Err(e) => problems.report(e)?,
        }
    }
    if rows != declared {
        problems.report(malformed(bbox_path, 1, format!("declares {declared} rows, has {rows} (truncated?)")))?;
    }
    Ok(entries)
}

pub(crate) fn parse_celeba_attr(
    text: &str,
    path: &Path,
    problems: &Problems,
) -> Result<HashMap<String, Smile>, FeatureError> {
    let mut lines = numbered(text);
    let declared = header_count(&mut lines, path)?;
    let (header_line, header) = lines.next().ok_or_else(|| malformed(path, 2, "missing attribute names line"))?;
    let names: Vec<&str> = header.split_whitespace().collect();
    let column = names
        .iter()
        .position(|n| *n == "Smiling")
        .ok_or_else(|| malformed(path, header_line, "no `Smiling` column in the attribute names"))?;
    let mut smiles = HashMap::new();
    let mut rows = 0;
    for (line, text) in lines {
        rows += 1;
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != names.len() + 1 {
            problems.report(malformed(
                path,
                line,
                format!("expected {} fields, found {}", names.len() + 1, fields.len()),
            ))?;
            continue;
        }
        let smile = match fields[column + 1] {
            "1" => Smile::Yes,
            "-1" => Smile::No,
            other => {
                problems.report(malformed(path, line, format!("`Smiling` must be 1 or -1, found {other:?}")))?;
                continue;
            }
        };
        smiles.insert(fields[0].to_string(), smile);
    }
    if rows != declared {
        problems.report(malformed(path, 1, format!("declares {declared} rows, has {rows} (truncated?)")))?;
    }
    Ok(smiles)
}

/// Non-empty lines with their 1-based numbers.
pub(crate) fn numbered(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty())
}

pub(crate) fn header_count<'a>(
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
    path: &Path,
) -> Result<usize, FeatureError> {
    let (line, text) = lines.next().ok_or_else(|| malformed(path, 1, "empty file"))?;
    text.parse().map_err(|_| malformed(path, line, format!("expected the row count, found {text:?}")))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestLine {
    image: String,
    boxes: Vec<[f32; 4]>,
    #[serde(default)]
    smile: Option<Vec<Option<bool>>>,
}

/// One JSON object a line: `{"image": "a.jpg", "boxes": [[x0,y0,x1,y1]], "smile": [true|false|null]}`.
/// Image paths are relative to the manifest's folder; a missing `smile`
/// means every face's smile is unknown.
pub fn parse_jsonl(
    text: &str,
    path: &Path,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<Entry>, FeatureError> {
    let problems = Problems { on_bad, skips };
    let folder = path.parent().unwrap_or(Path::new(""));
    let mut entries = Vec::new();
    for (line, text) in numbered(text) {
        match parse_manifest_line(text, path, line, folder) {
            Ok(entry) => entries.push(entry),
            Err(e) => problems.report(e)?,
        }
    }
    Ok(entries)
}

fn parse_manifest_line(text: &str, path: &Path, line: usize, folder: &Path) -> Result<Entry, FeatureError> {
    let m: ManifestLine = serde_json::from_str(text).map_err(|e| malformed(path, line, e.to_string()))?;
    let smiles = m.smile.unwrap_or_else(|| vec![None; m.boxes.len()]);
    if smiles.len() != m.boxes.len() {
        return Err(malformed(path, line, format!("{} boxes but {} smile labels", m.boxes.len(), smiles.len())));
    }
    let faces = m
        .boxes
        .iter()
        .zip(&smiles)
        .map(|(b, s)| {
            let smile = match s {
                Some(true) => Smile::Yes,
                Some(false) => Smile::No,
                None => Smile::Unknown,
            };
            checked_box(path, line, *b, smile).map(|face| Annotated { face, line })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Entry { image: folder.join(&m.image), faces })
}
