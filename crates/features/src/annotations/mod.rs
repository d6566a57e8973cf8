//! Annotated detection sets: WIDER FACE, CelebA and a plain JSONL manifest,
//! all parsed into one list of (image, boxes with smile labels).
//!
//! Annotation files are parsed up front (a malformed line is an error naming
//! `file:line`, or a counted skip of that image); images are only opened when
//! a scene needs them, so a box outside its image is found then, against the
//! decoded size, and reported with the annotation line it came from.

mod parse;

pub(crate) use parse::{bad_box, malformed, numbered, parse_celeba_attr};
pub use parse::{parse_celeba, parse_jsonl, parse_wider, AnnotationText, BadLines};

use crate::config::{FeatureConfig, SourceConfig, Split};
use crate::sample::{FaceBox, Sample, MAX_BOXES};
use crate::source::{SampleRng, Source};
use crate::split::{check_split, keep_split};
use grin_image::{
    letterbox_photo, read_text, skip_or_fail, BadInputKind, ImageBound, InputError, Letterbox, OnBadSample, Raster,
    SkipCounts,
};
use grin_terms::boxes::iou;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Boxes may overhang their image by this many pixels (annotators round outwards).
const EDGE_TOLERANCE: f32 = 1.0;

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
pub(crate) struct AnnotatedSource {
    name: &'static str,
    /// The file the box line numbers refer to.
    annotations: PathBuf,
    entries: Vec<Entry>,
    width: u32,
    height: u32,
    channels: u32,
    bound: ImageBound,
    load_skips: SkipCounts,
}

impl AnnotatedSource {
    pub(crate) fn wider(cfg: &FeatureConfig, split: Split) -> Result<AnnotatedSource, InputError> {
        let SourceConfig::Wider { images, annotations } = &cfg.source else {
            return Err(wrong_kind("wider"));
        };
        let skips = SkipCounts::default();
        let text = read_text(annotations)?;
        let bad = BadLines { on_bad: cfg.on_bad_sample, skips: &skips };
        let entries = parse_wider(AnnotationText { text: &text, path: annotations }, images, bad)?;
        Self::build("wider", annotations, entries, cfg, split, skips)
    }

    pub(crate) fn celeba(cfg: &FeatureConfig, split: Split) -> Result<AnnotatedSource, InputError> {
        let SourceConfig::Celeba { images, bbox, attr } = &cfg.source else {
            return Err(wrong_kind("celeba"));
        };
        let skips = SkipCounts::default();
        let bbox_text = read_text(bbox)?;
        let attr_text = read_text(attr)?;
        let (bbox_file, attr_file) =
            (AnnotationText { text: &bbox_text, path: bbox }, AnnotationText { text: &attr_text, path: attr });
        let entries =
            parse_celeba(bbox_file, attr_file, images, BadLines { on_bad: cfg.on_bad_sample, skips: &skips })?;
        Self::build("celeba", bbox, entries, cfg, split, skips)
    }

    pub(crate) fn jsonl(cfg: &FeatureConfig, split: Split) -> Result<AnnotatedSource, InputError> {
        let SourceConfig::Jsonl { manifest } = &cfg.source else {
            return Err(wrong_kind("jsonl"));
        };
        let skips = SkipCounts::default();
        let text = read_text(manifest)?;
        let entries = parse_jsonl(
            AnnotationText { text: &text, path: manifest },
            BadLines { on_bad: cfg.on_bad_sample, skips: &skips },
        )?;
        Self::build("jsonl", manifest, entries, cfg, split, skips)
    }

    fn build(
        name: &'static str,
        annotations: &Path,
        entries: Vec<Entry>,
        cfg: &FeatureConfig,
        split: Split,
        load_skips: SkipCounts,
    ) -> Result<AnnotatedSource, InputError> {
        let problems = BadLines { on_bad: cfg.on_bad_sample, skips: &load_skips };
        let entries = one_entry_a_photo(entries, annotations, &problems)?;
        let entries = entries_of_split(entries, cfg, split, annotations, "images").map_err(|e| match &e {
            // None left because every line was bad: say so, not only the split.
            InputError::Config(message) if load_skips.total() > 0 => {
                InputError::Config(format!("{message} ({})", load_skips.summary().unwrap_or_default()))
            }
            _ => e,
        })?;
        Ok(AnnotatedSource {
            name,
            annotations: annotations.to_path_buf(),
            entries,
            width: cfg.width,
            height: cfg.height,
            channels: cfg.channels,
            bound: cfg.image_bound()?,
            load_skips,
        })
    }

    pub(crate) fn entries(&self) -> &[Entry] {
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

    fn files(&self) -> Vec<&Path> {
        self.entries.iter().map(|e| e.image.as_path()).collect()
    }

    fn len(&self) -> Option<usize> {
        Some(self.entries.len())
    }

    fn scene(&self, index: u64, _rng: &mut SampleRng) -> Result<Sample, InputError> {
        let entry = &self.entries[(index % self.entries.len() as u64) as usize];
        let photo = letterbox_photo(&entry.image, self.channels, self.width, self.height, self.bound)?;
        check_inside(entry, &photo.placement, &self.annotations)?;
        let faces: Vec<FaceBox> = entry.faces.iter().map(|a| a.face).collect();
        Ok(letterboxed_sample(photo.frame, &photo.placement, &faces))
    }
}

/// The entries whose image falls in `split`; none at all is an error naming
/// the annotation file, since every later step would fail less clearly.
pub(crate) fn entries_of_split(
    entries: Vec<Entry>,
    cfg: &FeatureConfig,
    split: Split,
    annotations: &Path,
    what: &str,
) -> Result<Vec<Entry>, InputError> {
    check_split(&cfg.split)?;
    let entries = keep_split(entries, |e: &Entry| e.image.as_path(), &cfg.split, split);
    if entries.is_empty() {
        return Err(InputError::Config(format!(
            "{}: no annotated {what} fall in the {split:?} split",
            annotations.display()
        )));
    }
    Ok(entries)
}

/// One entry a photo, each face once: a photo listed again (in one file
/// or fold, or as `./a.jpg` beside `a.jpg`) gets the faces of every
/// listing, and a face given twice (in one listing or two, or a box within
/// [`SAME_FACE_IOU`] of another) is one face. Two entries of one photo each
/// held only their own faces, the others scored as false detections, and a
/// face given twice was a second face never found (issue 90, rounds 21, 22
/// and 24). One face given with two smile labels is a conflict: an error
/// naming both lines, or under `skip` the photo left out.
pub(crate) fn one_entry_a_photo(
    entries: Vec<Entry>,
    annotations: &Path,
    problems: &BadLines,
) -> Result<Vec<Entry>, InputError> {
    let mut at: HashMap<PhotoKey, usize> = HashMap::new();
    let mut merged: Vec<Option<Entry>> = Vec::with_capacity(entries.len());
    for entry in entries {
        let k = *at.entry(PhotoKey::of(&entry.image)).or_insert_with(|| {
            merged.push(Some(Entry { image: entry.image.clone(), faces: Vec::new() }));
            merged.len() - 1
        });
        let Some(kept) = &mut merged[k] else { continue };
        let mut conflict = None;
        for face in entry.faces {
            // Equal corners too: an aligned portrait's face is a box its
            // rule makes later, all zeros here.
            let same = |f: &&Annotated| {
                f.face.corners() == face.face.corners() || iou(f.face.corners(), face.face.corners()) >= SAME_FACE_IOU
            };
            match kept.faces.iter().find(same) {
                None => kept.faces.push(face),
                Some(f) if f.face.smile == face.face.smile => {}
                Some(f) => conflict = Some((f.line, face.line)),
            }
        }
        if let Some((first, again)) = conflict {
            let message =
                format!("{} gives the face of line {first} again with another smile label", kept.image.display());
            problems.report(malformed(annotations, again, message))?;
            merged[k] = None;
        }
    }
    Ok(merged.into_iter().flatten().collect())
}

/// Boxes this close are one face given twice: two faces of a crowd overlap
/// far less (FDDB's and Caltech's closest pairs are under 0.5).
const SAME_FACE_IOU: f32 = 0.9;

/// Which photo a path names: the file's identity where it can be read
/// (`img/a.jpg`, `./img//a.jpg` and its absolute path are one photo), else
/// its path's components, which drop a `.` and a doubled `/`.
#[derive(PartialEq, Eq, Hash)]
pub(crate) enum PhotoKey {
    File(u64, u64),
    Path(PathBuf),
}

impl PhotoKey {
    pub(crate) fn of(image: &Path) -> PhotoKey {
        #[cfg(unix)]
        if let Ok(meta) = std::fs::metadata(image) {
            use std::os::unix::fs::MetadataExt;
            return PhotoKey::File(meta.dev(), meta.ino());
        }
        PhotoKey::Path(image.components().collect())
    }
}

/// The identities of `files`, each with its name, for [`not_also`].
pub(crate) fn keyed<'a>(files: impl IntoIterator<Item = &'a PathBuf>) -> HashMap<PhotoKey, PathBuf> {
    files.into_iter().map(|f| (PhotoKey::of(f), f.clone())).collect()
}

/// `files` less those that are also one of `others` (by identity, so a link
/// is the file it names): one file in two roles that exclude each other
/// (a face crop as a background, an image as a mined crop; rounds 26 and
/// 27 of issue 90). Each is refused naming both, or left out and counted.
pub(crate) fn not_also(
    files: Vec<PathBuf>,
    others: &HashMap<PhotoKey, PathBuf>,
    role: &str,
    why: &str,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<PathBuf>, InputError> {
    let mut kept = Vec::with_capacity(files.len());
    for file in files {
        match others.get(&PhotoKey::of(&file)) {
            Some(other) => {
                let message = format!("is also {role} {}: {why}", other.display());
                skip_or_fail(on_bad, skips, InputError::bad(&file, None, BadInputKind::MalformedAnnotation, message))?;
            }
            None => kept.push(file),
        }
    }
    Ok(kept)
}

fn wrong_kind(kind: &str) -> InputError {
    InputError::Config(format!("this source needs `features.source.kind = \"{kind}\"`"))
}

/// A box outside its decoded image names the annotation line it came from.
fn check_inside(entry: &Entry, image: &Letterbox, annotations: &Path) -> Result<(), InputError> {
    let (w, h) = (image.source_width as f32, image.source_height as f32);
    for a in &entry.faces {
        let f = &a.face;
        if f.x0 < -EDGE_TOLERANCE || f.y0 < -EDGE_TOLERANCE || f.x1 > w + EDGE_TOLERANCE || f.y1 > h + EDGE_TOLERANCE {
            return Err(InputError::bad(
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
                    image.source_width,
                    image.source_height
                ),
            ));
        }
    }
    Ok(())
}

/// A letterboxed photo as a training or evaluation sample, its faces (in
/// the photo's pixels) moved into the frame; the largest `MAX_BOXES` kept.
pub(crate) fn letterboxed_sample(frame: Raster, placement: &Letterbox, faces: &[FaceBox]) -> Sample {
    let mut boxes: Vec<FaceBox> = faces
        .iter()
        .map(|f| {
            let [x0, y0, x1, y1] = placement.to_frame(f.corners());
            FaceBox { x0, y0, x1, y1, smile: f.smile }
        })
        // Faces below a pixel after scaling carry no signal and break box losses.
        .filter(|b| b.x1 - b.x0 >= 1.0 && b.y1 - b.y0 >= 1.0)
        .collect();
    if boxes.len() > MAX_BOXES {
        let area = |b: &FaceBox| (b.x1 - b.x0) * (b.y1 - b.y0);
        boxes.sort_by(|a, b| area(b).total_cmp(&area(a)));
        boxes.truncate(MAX_BOXES);
    }
    Sample { width: frame.width, height: frame.height, channels: frame.channels, pixels: frame.pixels, boxes }
}

#[cfg(test)]
mod tests;
