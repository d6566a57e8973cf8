//! Face boxes from landmarks: Caltech's five points a face, and where
//! CelebA's alignment puts them, both by the one box definition
//! ([`landmarks_to_box`]).

use super::face_box::landmarks_to_box;
use crate::annotations::{
    bad_box, malformed, numbered, one_entry_a_photo, parse_celeba_attr, Annotated, AnnotationText, BadLines, Entry,
};
use crate::sample::{FaceBox, Smile};
use grin_image::InputError;
use std::collections::HashMap;
use std::path::Path;

/// Where CelebA's alignment puts the landmarks, as fractions of the image:
/// the means of `list_landmarks_align_celeba.txt` (178x218 images: eyes at
/// (69, 111) and (108, 111), mouth corners at y 152). The box then follows
/// the same rule as Caltech's.
pub(crate) const CELEBA_ALIGNED_LEFT_EYE: [f32; 2] = [69.0 / 178.0, 111.0 / 218.0];
pub(crate) const CELEBA_ALIGNED_RIGHT_EYE: [f32; 2] = [108.0 / 178.0, 111.0 / 218.0];
pub(crate) const CELEBA_ALIGNED_MOUTH: [f32; 2] = [88.5 / 178.0, 152.0 / 218.0];

/// The face box of an aligned CelebA image of `width` x `height`.
pub(crate) fn celeba_aligned_box(width: u32, height: u32) -> [f32; 4] {
    let at = |p: [f32; 2]| [p[0] * width as f32, p[1] * height as f32];
    landmarks_to_box(at(CELEBA_ALIGNED_LEFT_EYE), at(CELEBA_ALIGNED_RIGHT_EYE), at(CELEBA_ALIGNED_MOUTH))
}

/// `WebFaces_GroundThruth.txt`: one face a line,
/// `image Leye-x Leye-y Reye-x Reye-y nose-x nose-y mouth-x mouth-y`.
/// Faces of one image are gathered in file order; an image with a bad line
/// is left out whole under `skip` (dropping one face would make it background).
pub fn parse_caltech(file: AnnotationText, images: &Path, problems: BadLines) -> Result<Vec<Entry>, InputError> {
    let AnnotationText { text, path } = file;
    let mut order: Vec<String> = Vec::new();
    let mut faces: HashMap<String, Vec<Annotated>> = HashMap::new();
    let mut bad: std::collections::HashSet<String> = Default::default();
    for (line, text) in numbered(text) {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let name = fields[0].to_string();
        if !faces.contains_key(&name) {
            order.push(name.clone());
            faces.insert(name.clone(), Vec::new());
        }
        match caltech_face(&fields, path, line) {
            Ok(face) => faces.get_mut(&name).expect("inserted above").push(Annotated { face, line }),
            Err(e) => {
                problems.report(e)?;
                bad.insert(name);
            }
        }
    }
    Ok(order
        .into_iter()
        .filter(|name| !bad.contains(name))
        .map(|name| {
            let faces = faces.remove(&name).unwrap_or_default();
            Entry { image: images.join(&name), faces }
        })
        .collect())
}

/// The largest landmark coordinate a line may give, in pixels: far past any photo
/// grin reads, and small enough that f32 keeps a box's side to 1/16 px.
const MAX_LANDMARK: f32 = 1.0e6;

fn caltech_face(fields: &[&str], path: &Path, line: usize) -> Result<FaceBox, InputError> {
    if fields.len() != 9 {
        return Err(malformed(
            path,
            line,
            format!("expected `image` and 8 landmark coordinates, found {} fields", fields.len()),
        ));
    }
    let mut v = [0f32; 8];
    for (k, field) in fields[1..].iter().enumerate() {
        v[k] = match field.parse::<f32>() {
            // Within MAX_LANDMARK the box's arithmetic stays finite and exact to a
            // fraction of a pixel (found by fuzzing: 2.8e9 made a box with no height).
            Ok(x) if x.abs() <= MAX_LANDMARK => x,
            Ok(x) if x.is_finite() => {
                return Err(malformed(path, line, format!("landmark coordinate {field:?} lies beyond any photo")))
            }
            _ => return Err(malformed(path, line, format!("landmark coordinate {field:?} is not a finite number"))),
        };
    }
    let [x0, y0, x1, y1] = landmarks_to_box([v[0], v[1]], [v[2], v[3]], [v[6], v[7]]);
    if x1 - x0 < 1.0 {
        return Err(bad_box(path, line, "the eyes are less than half a pixel apart: no face box"));
    }
    Ok(FaceBox { x0, y0, x1, y1, smile: Smile::Unknown })
}

/// Every image of CelebA's attribute file, with its smile. Boxes are left
/// empty here: they depend on the decoded size ([`celeba_aligned_box`]).
pub(super) fn parse_celeba_aligned(
    text: &str,
    path: &Path,
    images: &Path,
    problems: &BadLines,
) -> Result<Vec<Entry>, InputError> {
    let smiles = parse_celeba_attr(text, path, problems)?;
    // A photo whose rows conflict is left out (under `skip`, counted there).
    let mut names: Vec<(&String, Smile, usize)> =
        smiles.iter().filter_map(|(n, (s, line))| Some((n, (*s)?, *line))).collect();
    names.sort_by(|a, b| a.0.cmp(b.0));
    let entries = names
        .into_iter()
        .map(|(name, smile, line)| {
            let face = FaceBox { x0: 0.0, y0: 0.0, x1: 0.0, y1: 0.0, smile };
            Entry { image: images.join(name), faces: vec![Annotated { face, line }] }
        })
        .collect();
    // A portrait under two names (a link) is one photo (round 25).
    one_entry_a_photo(entries, path, problems)
}
