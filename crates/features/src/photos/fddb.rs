//! FDDB (Face Detection Data Set and Benchmark): news photos with one
//! ellipse a face, read from its fold files.
//!
//! `root/FDDB-folds/FDDB-fold-NN-ellipseList.txt` holds, per image, its name
//! (`2002/08/11/big/img_591`, the photo is `root/images/<name>.jpg`), the
//! face count, then one line a face: `major_axis_radius minor_axis_radius
//! angle centre_x centre_y 1`. Each ellipse becomes its exact bounding box
//! ([`ellipse_box`](super::face_box::ellipse_box)), which is what grin's one
//! box definition is fitted to. Every fold file in the folder is read, in
//! name order. FDDB's lists name some photos a copy leaves out (the shared
//! copy omits 83 of folds 1-8, SOURCE.md): a listed photo that is absent is
//! passed over and counted as an unreadable file, never an error; a fold
//! none of whose photos exist is (the root is wrong). A listed name that is
//! there but no photo (a FIFO, a folder) is an error naming it, or a
//! counted skip under `skip`.

use super::face_box::ellipse_box;
use crate::annotations::{bad_box, malformed, numbered, one_entry_a_photo, Annotated, BadLines, Entry};
use crate::sample::{FaceBox, Smile};
use grin_image::{read_text, BadInputKind, InputError};
use std::path::{Path, PathBuf};

/// The folder of fold files under an FDDB root.
const FOLDS: &str = "FDDB-folds";
/// How a fold's ellipse file name ends.
const ELLIPSE_SUFFIX: &str = "-ellipseList.txt";
/// Most faces one image may declare: FDDB's largest is 20; past this a
/// count is a damaged line, not a crowd.
const MAX_FACES: usize = 1000;
/// The largest radius or centre coordinate a line may give (px): far past
/// any photo, small enough for f32 to keep a box exact to 1/16 px.
const MAX_COORDINATE: f32 = 1.0e6;

/// Every image of every fold under `root`, with its faces, absent photos
/// left out (counted in `problems.skips`).
pub(crate) fn read_fddb(root: &Path, problems: BadLines) -> Result<(PathBuf, Vec<Entry>), InputError> {
    let folds = root.join(FOLDS);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folds)
        .map_err(|e| InputError::bad(&folds, None, BadInputKind::UnreadableFile, format!("cannot list: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(ELLIPSE_SUFFIX)))
        .collect();
    files.sort();
    let Some(first) = files.first().cloned() else {
        return Err(InputError::bad(
            &folds,
            None,
            BadInputKind::EmptyFolder,
            format!("no `FDDB-fold-NN{ELLIPSE_SUFFIX}` file: is this an FDDB root?"),
        ));
    };
    let images = root.join("images");
    let mut entries = Vec::new();
    for file in &files {
        let text = read_text(file)?;
        let listed = parse_fddb(&text, file, &images, problems)?;
        let count = listed.len();
        let mut present = Vec::with_capacity(count);
        let mut absent = 0;
        for entry in listed {
            match std::fs::metadata(&entry.image) {
                Ok(m) if m.is_file() => present.push(entry),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => absent += 1,
                // There but no photo (a FIFO, a folder, a device, a link
                // loop): what the same line in Caltech's or a JSONL's list
                // is, named, not counted with the missing (round 26).
                _ => match grin_image::open_file(&entry.image) {
                    Err(e) => problems.report(e)?,
                    Ok(_) => present.push(entry),
                },
            }
        }
        if absent == count && count > 0 {
            return Err(InputError::bad(
                file,
                None,
                BadInputKind::UnreadableFile,
                format!("none of its {count} photos is under {}", images.display()),
            ));
        }
        for _ in 0..absent {
            problems.skips.record(BadInputKind::UnreadableFile);
        }
        entries.extend(present);
    }
    // Line numbers name the fold file they came from; the first stands for
    // the set in messages that name no line.
    let entries = one_entry_a_photo(entries, &first, &problems)?;
    Ok((first, entries))
}

/// One ellipse file's images and faces (photos not checked). An image with
/// a bad line is an error naming the line, or under `skip` left out whole
/// (dropping one face would make it background).
pub(crate) fn parse_fddb(text: &str, path: &Path, images: &Path, problems: BadLines) -> Result<Vec<Entry>, InputError> {
    let lines: Vec<(usize, &str)> = numbered(text).collect();
    let mut entries = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (name_line, name) = lines[i];
        i += 1;
        if name.parse::<f64>().is_ok() || name.split_whitespace().nth(1).is_some() {
            problems.report(malformed(path, name_line, format!("expected an image name, found {name:?}")))?;
            continue;
        }
        let count = match lines.get(i).map(|&(line, t)| (line, t.parse::<usize>())) {
            Some((_, Ok(n))) if n <= MAX_FACES => n,
            Some((line, _)) => {
                let found = lines[i].1;
                problems.report(malformed(
                    path,
                    line,
                    format!("expected the face count of {name} (0..={MAX_FACES}), found {found:?}"),
                ))?;
                i += 1;
                continue;
            }
            None => {
                problems.report(malformed(path, name_line, format!("{name}: the file ends before its face count")))?;
                break;
            }
        };
        let count_line = lines[i].0;
        i += 1;
        let mut faces = Vec::with_capacity(count.min(lines.len() - i));
        let mut problem = None;
        for k in 0..count {
            let Some(&(line, text)) = lines.get(i) else {
                problem =
                    Some(malformed(path, count_line, format!("{name}: says {count} faces, the file ends after {k}")));
                break;
            };
            i += 1;
            match ellipse_face(text, path, line) {
                Ok(face) => faces.push(Annotated { face, line }),
                Err(e) => {
                    problem = Some(e);
                    break;
                }
            }
        }
        match problem {
            Some(e) => problems.report(e)?,
            None => entries.push(Entry { image: images.join(format!("{name}.jpg")), faces }),
        }
    }
    Ok(entries)
}

/// One `major minor angle cx cy 1` line as its face box.
fn ellipse_face(text: &str, path: &Path, line: usize) -> Result<FaceBox, InputError> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    if fields.len() != 6 {
        return Err(malformed(
            path,
            line,
            format!("expected `major_radius minor_radius angle centre_x centre_y 1`, found {text:?}"),
        ));
    }
    let mut v = [0f32; 5];
    for (k, field) in fields[..5].iter().enumerate() {
        v[k] = match field.parse::<f32>() {
            Ok(x) if x.abs() <= MAX_COORDINATE => x,
            _ => return Err(malformed(path, line, format!("{field:?} is not a number within ±{MAX_COORDINATE}"))),
        };
    }
    let [major, minor, angle, cx, cy] = v;
    if !(major >= 0.5 && minor >= 0.5) {
        return Err(bad_box(
            path,
            line,
            format!("radii {major} and {minor}: an ellipse needs both of half a pixel or more"),
        ));
    }
    let [x0, y0, x1, y1] = ellipse_box(major, minor, angle, [cx, cy]);
    Ok(FaceBox { x0, y0, x1, y1, smile: Smile::Unknown })
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_image::{OnBadSample, SkipCounts};

    const FOLD: &str = "\
2002/08/11/big/img_591
1
123.583300 85.549500 1.265839 269.693400 161.781200  1
2002/08/26/big/img_265
2
67.363819 44.511485 -1.476417 105.249970 87.209036  1
41.936870 27.064477 1.471906 184.070915 129.345601  1
2002/07/19/big/img_423
0
";

    fn parse(text: &str, on_bad: OnBadSample) -> (Result<Vec<Entry>, InputError>, SkipCounts) {
        let skips = SkipCounts::default();
        let parsed =
            parse_fddb(text, Path::new("fold.txt"), Path::new("/fddb/images"), BadLines { on_bad, skips: &skips });
        (parsed, skips)
    }

    #[test]
    fn each_image_gets_its_ellipses_as_boxes_taller_than_wide() {
        let entries = parse(FOLD, OnBadSample::Error).0.unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].image, PathBuf::from("/fddb/images/2002/08/11/big/img_591.jpg"));
        assert_eq!(entries[1].faces.len(), 2);
        assert_eq!(entries[1].faces[1].line, 7, "a face names its line");
        assert!(entries[2].faces.is_empty(), "an image may hold no face");
        let f = entries[0].faces[0].face;
        assert!(f.y1 - f.y0 > f.x1 - f.x0, "chin to forehead is the long side: {f:?}");
        assert!(((f.x0 + f.x1) / 2.0 - 269.6934).abs() < 1e-3 && ((f.y0 + f.y1) / 2.0 - 161.7812).abs() < 1e-3);
        assert_eq!(f.smile, Smile::Unknown, "FDDB has no smile labels");
    }

    #[test]
    fn a_bad_line_names_the_file_and_line_or_skips_its_image() {
        for (text, line, what) in [
            ("a\nmany\n", 2, "face count"),
            ("a\n2\n10 5 0 50 50 1\n", 2, "says 2 faces"),
            ("a\n1\n10 5 0 50 1\n", 3, "expected `major_radius"),
            ("a\n1\n10 5 0 NaN 50 1\n", 3, "not a number"),
            ("a\n1\n10 0 0 50 50 1\n", 3, "radii"),
            ("a\n1\n10 5 0 5e9 50 1\n", 3, "not a number"),
            ("a\n99999999999\n", 2, "face count"),
        ] {
            let message = parse(text, OnBadSample::Error).0.unwrap_err().to_string();
            assert!(message.contains(&format!("fold.txt:{line}")) && message.contains(what), "{text:?}: {message}");
        }
        let text = format!("a\n1\n10 0 0 50 50 1\n{FOLD}");
        let (entries, skips) = parse(&text, OnBadSample::Skip);
        assert_eq!(entries.unwrap().len(), 3, "the bad image alone is left out");
        assert_eq!(skips.total(), 1);
    }

    #[test]
    fn absent_photos_are_counted_and_a_wrong_root_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(FOLDS)).unwrap();
        let none = read_fddb(root, BadLines { on_bad: OnBadSample::Error, skips: &SkipCounts::default() });
        assert!(none.unwrap_err().to_string().contains("FDDB root"));
        std::fs::write(root.join(FOLDS).join("FDDB-fold-01-ellipseList.txt"), FOLD).unwrap();
        let skips = SkipCounts::default();
        let message = read_fddb(root, BadLines { on_bad: OnBadSample::Error, skips: &skips }).unwrap_err().to_string();
        assert!(
            message.contains("FDDB-fold-01-ellipseList.txt") && message.contains("none of its 3 photos"),
            "{message}"
        );
        let photo = root.join("images/2002/08/26/big/img_265.jpg");
        std::fs::create_dir_all(photo.parent().unwrap()).unwrap();
        std::fs::write(&photo, b"").unwrap();
        let (_, entries) = read_fddb(root, BadLines { on_bad: OnBadSample::Error, skips: &skips }).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].image, photo);
        assert_eq!(skips.get(BadInputKind::UnreadableFile), 2, "the two absent photos are counted");
        // Round 21: a photo listed twice was two photos, each with its
        // entry's faces alone. One photo, each face once.
        let again = "2002/08/26/big/img_265\n1\n20.0 10.0 0.0 60.0 60.0 1\n";
        std::fs::write(root.join(FOLDS).join("FDDB-fold-02-ellipseList.txt"), format!("{FOLD}{again}")).unwrap();
        let (_, entries) = read_fddb(root, BadLines { on_bad: OnBadSample::Error, skips: &skips }).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].faces.len(), 3, "two faces once, and the third");
    }

    /// Round 26 of issue 90: a listed photo that is a FIFO or a folder was
    /// counted with the absent ones, unnamed, even under `error`.
    #[test]
    fn a_listed_name_that_is_no_photo_is_named_or_a_counted_skip() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(FOLDS)).unwrap();
        std::fs::write(root.join(FOLDS).join("FDDB-fold-01-ellipseList.txt"), FOLD).unwrap();
        let photo = root.join("images/2002/08/26/big/img_265.jpg");
        std::fs::create_dir_all(photo.parent().unwrap()).unwrap();
        std::fs::write(&photo, b"").unwrap();
        let not_a_photo = root.join("images/2002/07/19/big/img_423.jpg");
        std::fs::create_dir_all(&not_a_photo).unwrap();
        let skips = SkipCounts::default();
        let e = read_fddb(root, BadLines { on_bad: OnBadSample::Error, skips: &skips }).unwrap_err().to_string();
        assert!(e.contains("img_423.jpg"), "{e}");
        let (_, entries) = read_fddb(root, BadLines { on_bad: OnBadSample::Skip, skips: &skips }).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(skips.get(BadInputKind::UnreadableFile), 2, "one absent, one no photo");
    }
}
