//! Faces that a photo set's annotations lack, found by a second detector
//! (`scripts/unannotated-faces.sh` runs YuNet over the photos): ignore
//! regions in every training crop, neither face nor background.
//!
//! Caltech annotates about 10,500 faces in 7,092 photos, and YuNet finds
//! about 2,200 more that no annotation covers, in one photo in eight. A
//! crop that holds one teaches "this is not a face" at a face, the opposite
//! of what mining hard negatives teaches; an ignore region takes it out of
//! the loss. The file is grin-detect's JSON lines (`yunet-detect` writes
//! the same): one photo a line, `{"image", "width", "height",
//! "detections": [{"box": [x0, y0, x1, y1], "score"}]}`, in the photo's
//! pixels. Photos are matched by file name (where two photos share one, by the
//! most trailing folders too); lines naming a photo that is not
//! in the source (another split, another set) are passed over, but a file
//! that names none of them is an error. The detector must see the photo as
//! grin decodes it: `yunet-detect` ignores EXIF orientation, which no photo
//! of Caltech or the CelebA portraits carries; a found face centred outside
//! the decoded photo is an error naming this file's line (`faces_in`).

use super::landmarks::celeba_aligned_box;
use super::BoxRule;
use crate::annotations::{bad_box, malformed, numbered, Annotated, BadLines, Entry};
use crate::sample::{FaceBox, Smile};
use grin_image::{read_text, BadInputKind, InputError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(serde::Deserialize)]
struct Line {
    image: PathBuf,
    width: u32,
    height: u32,
    detections: Vec<Found>,
}

#[derive(serde::Deserialize)]
struct Found {
    #[serde(rename = "box")]
    bounds: [f32; 4],
}

/// Adds the faces in `file` that no annotation of their photo covers to
/// `entries` as ignore regions ([`Smile::Ignore`]); returns how many.
/// A bad line (one bad box makes it bad) is an error naming `file` and the
/// line, or (under `skip`) a counted skip of all that line's faces.
pub(super) fn add_unannotated(
    entries: &mut [Entry],
    file: &Path,
    rule: BoxRule,
    problems: BadLines,
) -> Result<usize, InputError> {
    if !file.exists() {
        // From a fresh clone this is the usual case: the file is made, not
        // shipped (the error said only "No such file or directory", issue 90).
        return Err(InputError::bad(
            file,
            None,
            BadInputKind::UnreadableFile,
            "missing: the source's `unannotated` file (faces its annotations lack) is made by \
             scripts/unannotated-faces.sh; run it, or leave the `unannotated` key out",
        ));
    }
    let text = read_text(file)?;
    let mut by_name: HashMap<&std::ffi::OsStr, Vec<usize>> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        if let Some(name) = e.image.file_name() {
            by_name.entry(name).or_default().push(i);
        }
    }
    let mut found: Vec<(usize, Annotated)> = Vec::new();
    let mut named = 0;
    for (line, text) in numbered(&text) {
        let parsed: Line = match serde_json::from_str(text) {
            Ok(parsed) => parsed,
            Err(e) => {
                problems.report(malformed(file, line, format!("not a detection line: {e}")))?;
                continue;
            }
        };
        let candidates = parsed.image.file_name().and_then(|name| by_name.get(name));
        let Some(index) = candidates.and_then(|c| closest(c, entries, &parsed.image)) else { continue };
        named += 1;
        let boxes: Result<Vec<FaceBox>, String> =
            parsed.detections.iter().map(|d| checked(d.bounds, parsed.width, parsed.height)).collect();
        let boxes = match boxes {
            Ok(boxes) => boxes,
            Err(why) => {
                problems.report(bad_box(file, line, why))?;
                continue;
            }
        };
        let labelled = labelled_boxes(&entries[index], rule, parsed.width, parsed.height);
        let new = boxes.into_iter().filter(|face| !labelled.iter().any(|b| same_face(b, face)));
        found.extend(new.map(|face| (index, Annotated { face, line })));
    }
    if named == 0 && !entries.is_empty() {
        return Err(InputError::Config(format!(
            "{}: names none of the source's {} photos (by file name): is it the detections of another set?",
            file.display(),
            entries.len()
        )));
    }
    let added = found.len();
    for (index, face) in found {
        entries[index].faces.push(face);
    }
    Ok(added)
}

/// Of the entries whose photo has `image`'s file name, the one whose path
/// shares the most trailing folders with it: FDDB names photos `img_N`
/// afresh in each day's folder, so a name alone can name two photos.
fn closest(candidates: &[usize], entries: &[Entry], image: &Path) -> Option<usize> {
    let shared = |i: usize| {
        entries[i].image.components().rev().zip(image.components().rev()).take_while(|(a, b)| a == b).count()
    };
    let best = candidates.iter().copied().max_by_key(|&i| shared(i))?;
    // Two candidates as close as each other: the line cannot say which.
    let ties = candidates.iter().filter(|&&i| shared(i) == shared(best)).count();
    (ties == 1).then_some(best)
}

/// The annotated boxes of `entry` in its photo's pixels.
fn labelled_boxes(entry: &Entry, rule: BoxRule, width: u32, height: u32) -> Vec<FaceBox> {
    entry
        .faces
        .iter()
        .map(|a| match rule {
            BoxRule::Annotated => a.face,
            BoxRule::CelebaAligned => {
                let [x0, y0, x1, y1] = celeba_aligned_box(width, height);
                FaceBox { x0, y0, x1, y1, ..a.face }
            }
        })
        .collect()
}

/// A finite box of positive size whose centre lies in the photo, as an
/// ignore region.
fn checked(b: [f32; 4], width: u32, height: u32) -> Result<FaceBox, String> {
    let [x0, y0, x1, y1] = b;
    if !b.iter().all(|v| v.is_finite()) || x1 <= x0 || y1 <= y0 {
        return Err(format!("box {b:?} is not finite or has no size"));
    }
    let (cx, cy) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
    if !(0.0..=width as f32).contains(&cx) || !(0.0..=height as f32).contains(&cy) {
        return Err(format!("box {b:?} is centred outside its {width}x{height} photo"));
    }
    Ok(FaceBox { x0, y0, x1, y1, smile: Smile::Ignore })
}

/// Two boxes of one face: either one's centre lies inside the other (the
/// two detectors draw boxes of different extent around the same face).
fn same_face(a: &FaceBox, b: &FaceBox) -> bool {
    let inside = |p: &FaceBox, q: &FaceBox| {
        let (cx, cy) = ((p.x0 + p.x1) / 2.0, (p.y0 + p.y1) / 2.0);
        (q.x0..=q.x1).contains(&cx) && (q.y0..=q.y1).contains(&cy)
    };
    inside(a, b) || inside(b, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_image::{OnBadSample, SkipCounts};

    fn entry(name: &str, faces: &[[f32; 4]]) -> Entry {
        let faces = faces
            .iter()
            .enumerate()
            .map(|(i, &[x0, y0, x1, y1])| Annotated {
                face: FaceBox { x0, y0, x1, y1, smile: Smile::Unknown },
                line: i + 1,
            })
            .collect();
        Entry { image: PathBuf::from("images").join(name), faces }
    }

    fn run(text: &str, entries: &mut [Entry], on_bad: OnBadSample) -> (Result<usize, InputError>, SkipCounts) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("found.jsonl");
        std::fs::write(&file, text).unwrap();
        let skips = SkipCounts::default();
        let added = add_unannotated(entries, &file, BoxRule::Annotated, BadLines { on_bad, skips: &skips });
        (added, skips)
    }

    #[test]
    fn a_found_face_no_annotation_covers_becomes_an_ignore_region() {
        let mut entries = [entry("a.jpg", &[[10.0, 10.0, 30.0, 30.0]]), entry("b.jpg", &[])];
        let text = concat!(
            // The annotated face (a looser box around it) and one beside it.
            r#"{"image": "/elsewhere/a.jpg", "width": 100, "height": 80, "detections": ["#,
            r#"{"box": [8, 6, 33, 34], "score": 0.9}, {"box": [50, 10, 70, 32], "score": 0.8}]}"#,
            "\n",
            // A photo of another split.
            r#"{"image": "c.jpg", "width": 100, "height": 80, "detections": [{"box": [1, 1, 9, 9], "score": 0.9}]}"#,
        );
        let (added, _) = run(text, &mut entries, OnBadSample::Error);
        assert_eq!(added.unwrap(), 1);
        assert_eq!(entries[0].faces.len(), 2);
        let found = entries[0].faces[1].face;
        assert_eq!([found.x0, found.y0, found.x1, found.y1], [50.0, 10.0, 70.0, 32.0]);
        assert_eq!(found.smile, Smile::Ignore);
        assert!(entries[1].faces.is_empty());
    }

    /// Issue 90: `configs/fewer-false-37.toml` from a fresh clone said only
    /// "No such file or directory"; the error now says what makes the file.
    #[test]
    fn a_missing_file_says_which_script_makes_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("caltech-yunet.jsonl");
        let skips = SkipCounts::default();
        let problems = BadLines { on_bad: OnBadSample::Skip, skips: &skips };
        let e = add_unannotated(&mut [entry("a.jpg", &[])], &file, BoxRule::Annotated, problems).unwrap_err();
        let message = e.to_string();
        assert!(message.contains("caltech-yunet.jsonl: missing"), "{message}");
        assert!(message.contains("scripts/unannotated-faces.sh") && message.contains("`unannotated`"), "{message}");
    }

    #[test]
    fn two_photos_of_one_name_are_told_apart_by_their_folders() {
        let mut entries = [entry("a.jpg", &[]), entry("a.jpg", &[])];
        entries[0].image = PathBuf::from("fddb/images/2002/08/11/big/a.jpg");
        entries[1].image = PathBuf::from("fddb/images/2002/08/12/big/a.jpg");
        let text = concat!(
            r#"{"image": "/copy/2002/08/12/big/a.jpg", "width": 100, "height": 80, "detections": ["#,
            r#"{"box": [50, 10, 70, 32], "score": 0.8}]}"#,
            "\n",
            // A line that fits both as well cannot say which: passed over.
            r#"{"image": "a.jpg", "width": 100, "height": 80, "detections": [{"box": [1, 1, 9, 9], "score": 0.9}]}"#,
        );
        let (added, _) = run(text, &mut entries, OnBadSample::Error);
        assert_eq!(added.unwrap(), 1);
        assert!(entries[0].faces.is_empty());
        assert_eq!(entries[1].faces.len(), 1);
    }

    #[test]
    fn a_bad_line_names_the_file_and_line_or_is_a_counted_skip() {
        let text = "{\"image\": \"a.jpg\", \"width\": 100, \"height\": 80, \"detections\": []}\nnot json\n";
        let (added, _) = run(text, &mut [entry("a.jpg", &[])], OnBadSample::Error);
        let message = added.unwrap_err().to_string();
        assert!(message.contains("found.jsonl:2") && message.contains("not a detection line"), "{message}");

        let (added, skips) = run(text, &mut [entry("a.jpg", &[])], OnBadSample::Skip);
        assert_eq!(added.unwrap(), 0);
        assert_eq!(skips.get(BadInputKind::MalformedAnnotation), 1);

        let outside = r#"{"image": "a.jpg", "width": 100, "height": 80, "detections": [{"box": [90, 70, 130, 120], "score": 0.9}]}"#;
        let message = run(outside, &mut [entry("a.jpg", &[])], OnBadSample::Error).0.unwrap_err().to_string();
        assert!(message.contains("found.jsonl:1") && message.contains("centred outside"), "{message}");
        // Under skip, one bad box leaves its whole line out, counted once.
        let mixed = r#"{"image": "a.jpg", "width": 100, "height": 80, "detections": [{"box": [10, 10, 20, 20]}, {"box": [5, 5, 5, 9]}]}"#;
        let (added, skips) = run(mixed, &mut [entry("a.jpg", &[])], OnBadSample::Skip);
        assert_eq!(added.unwrap(), 0);
        assert_eq!(skips.get(BadInputKind::BadBox), 1);
    }

    #[test]
    fn a_file_naming_none_of_the_photos_is_an_error_naming_it() {
        let text = r#"{"image": "z.jpg", "width": 100, "height": 80, "detections": []}"#;
        let message = run(text, &mut [entry("a.jpg", &[])], OnBadSample::Skip).0.unwrap_err().to_string();
        assert!(message.contains("found.jsonl") && message.contains("names none"), "{message}");
        let missing = add_unannotated(
            &mut [entry("a.jpg", &[])],
            Path::new("/nonexistent/found.jsonl"),
            BoxRule::Annotated,
            BadLines { on_bad: OnBadSample::Skip, skips: &SkipCounts::default() },
        );
        assert!(missing.unwrap_err().to_string().contains("/nonexistent/found.jsonl"));
    }
}
