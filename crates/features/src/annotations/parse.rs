//! Parsers for the annotation files: WIDER FACE, CelebA (boxes and the
//! `Smiling` attribute) and the JSONL manifest. A malformed line is an
//! error naming `file:line`, or under `skip` a counted skip of its image.

use super::{Annotated, Entry};
use crate::sample::{FaceBox, Smile};
use grin_image::{is_image_path, skip_or_fail, BadInputKind, InputError, OnBadSample, SkipCounts};
use std::collections::HashMap;
use std::path::Path;

/// An annotation file's text, and the path its errors name.
#[derive(Clone, Copy)]
pub struct AnnotationText<'a> {
    pub text: &'a str,
    pub path: &'a Path,
}

/// What a parser does with a bad line: under `Error` the first is the
/// error; under `Skip` each bad image is counted once and left out.
#[derive(Clone, Copy)]
pub struct BadLines<'a> {
    pub on_bad: OnBadSample,
    pub skips: &'a SkipCounts,
}

impl BadLines<'_> {
    pub(crate) fn report(&self, error: InputError) -> Result<(), InputError> {
        skip_or_fail(self.on_bad, self.skips, error)
    }
}

pub(crate) fn malformed(path: &Path, line: usize, message: impl Into<String>) -> InputError {
    InputError::bad(path, Some(line), BadInputKind::MalformedAnnotation, message)
}

pub(crate) fn bad_box(path: &Path, line: usize, message: impl Into<String>) -> InputError {
    InputError::bad(path, Some(line), BadInputKind::BadBox, message)
}

/// `[x0, y0, x1, y1]` must be finite with positive width and height.
fn checked_box(path: &Path, line: usize, b: [f32; 4], smile: Smile) -> Result<FaceBox, InputError> {
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
pub fn parse_wider(file: AnnotationText, images: &Path, problems: BadLines) -> Result<Vec<Entry>, InputError> {
    let AnnotationText { text, path } = file;
    let lines: Vec<(usize, &str)> = numbered(text).collect();
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
        // The count comes from the file: reserve no more than the lines left can hold
        // (found by fuzzing: a count near usize::MAX overflowed the allocation).
        let mut faces = Vec::with_capacity(count.min(lines.len().saturating_sub(i)));
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
    is_image_path(Path::new(line))
}

/// CelebA: `list_bbox_celeba.txt` (count, `image_id x_1 y_1 width height`,
/// rows) and `list_attr_celeba.txt` (count, 40 attribute names, rows of
/// 1/-1); the smile label is the `Smiling` column. An image missing from
/// the attribute file gets an unknown smile.
pub fn parse_celeba(
    bbox: AnnotationText,
    attr: AnnotationText,
    images: &Path,
    problems: BadLines,
) -> Result<Vec<Entry>, InputError> {
    let (AnnotationText { text: bbox_text, path: bbox_path }, attr_path) = (bbox, attr.path);
    let smiles = parse_celeba_attr(attr.text, attr_path, &problems)?;
    let mut lines = numbered(bbox_text);
    let declared = header_count(&mut lines, bbox_path)?;
    let (header_line, header) = lines.next().ok_or_else(|| malformed(bbox_path, 2, "missing header line"))?;
    let mut columns: Vec<&str> = header.split_whitespace().collect();
    // Some copies carry `image_id` in the header, others not.
    if columns.first() == Some(&"image_id") {
        columns.remove(0);
    }
    let expected = ["x_1", "y_1", "width", "height"];
    // Exactly the four box columns: a row has four numbers after its image
    // id, so any other header would index past them (found by fuzzing).
    if columns.len() != expected.len() || !expected.iter().all(|c| columns.contains(c)) {
        return Err(malformed(
            bbox_path,
            header_line,
            format!("expected header `image_id x_1 y_1 width height`, found {header:?}"),
        ));
    }
    let at = |name: &str| 1 + columns.iter().position(|c| *c == name).expect("checked");
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
        let smile = match smiles.get(fields[0]) {
            Some((Some(smile), _)) => *smile,
            Some((None, _)) => continue, // its labels conflict: left out under `skip`, counted there
            None => Smile::Unknown,
        };
        match checked_box(bbox_path, line, [n[0], n[1], n[0] + n[2], n[1] + n[3]], smile) {
            Ok(face) => entries.push(Entry { image: images.join(fields[0]), faces: vec![Annotated { face, line }] }),
            Err(e) => problems.report(e)?,
        }
    }
    check_row_count(bbox_path, declared, rows, &problems)?;
    Ok(entries)
}

/// A CelebA file's first line is its row count: fewer rows than it says
/// is a file cut short, more is a file that grew by hand.
fn check_row_count(path: &Path, declared: usize, rows: usize, problems: &BadLines) -> Result<(), InputError> {
    let why = match rows.cmp(&declared) {
        std::cmp::Ordering::Equal => return Ok(()),
        std::cmp::Ordering::Less => "cut short?",
        std::cmp::Ordering::Greater => "rows added, or the count not updated?",
    };
    problems.report(malformed(path, 1, format!("its first line says {declared} rows, the file has {rows} ({why})")))
}

/// CelebA's attribute file: each image's `Smiling` label, or `None` for an
/// image whose rows give two labels (an error, or under `skip` left out),
/// with the line it was first given on.
pub(crate) fn parse_celeba_attr(
    text: &str,
    path: &Path,
    problems: &BadLines,
) -> Result<HashMap<String, (Option<Smile>, usize)>, InputError> {
    let mut lines = numbered(text);
    let declared = header_count(&mut lines, path)?;
    let (header_line, header) = lines.next().ok_or_else(|| malformed(path, 2, "missing attribute names line"))?;
    let names: Vec<&str> = header.split_whitespace().collect();
    let column = names
        .iter()
        .position(|n| *n == "Smiling")
        .ok_or_else(|| malformed(path, header_line, "no `Smiling` column in the attribute names"))?;
    // A second column of that name would be passed over without a word.
    if names.iter().filter(|n| **n == "Smiling").count() > 1 {
        return Err(malformed(path, header_line, "`Smiling` names two columns; which is the label?"));
    }
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
        // A row again with another label was taken last-wins, without a
        // word (issue 90, round 22).
        match smiles.get(fields[0]) {
            Some(&(Some(kept), first)) if kept != smile => {
                problems.report(malformed(
                    path,
                    line,
                    format!("{} is given again with another `Smiling` label (first at line {first})", fields[0]),
                ))?;
                smiles.insert(fields[0].to_string(), (None, first));
            }
            Some(_) => {}
            None => {
                smiles.insert(fields[0].to_string(), (Some(smile), line));
            }
        }
    }
    check_row_count(path, declared, rows, problems)?;
    Ok(smiles)
}

/// Non-empty lines with their 1-based numbers.
pub(crate) fn numbered(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty())
}

pub(crate) fn header_count<'a>(
    lines: &mut impl Iterator<Item = (usize, &'a str)>,
    path: &Path,
) -> Result<usize, InputError> {
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
pub fn parse_jsonl(file: AnnotationText, problems: BadLines) -> Result<Vec<Entry>, InputError> {
    let AnnotationText { text, path } = file;
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

fn parse_manifest_line(text: &str, path: &Path, line: usize, folder: &Path) -> Result<Entry, InputError> {
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
