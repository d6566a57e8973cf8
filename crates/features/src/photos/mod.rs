//! Real photographs as training scenes: Caltech WebFaces (five landmarks a
//! face), FDDB's news photos (an ellipse a face) and CelebA's aligned
//! portraits (the `Smiling` attribute), cut into
//! random crops around their faces the way SSD and YuNet sample WIDER FACE.
//!
//! A crop picks one face, draws the size that face will have in the output
//! (log-uniform), and places a window of the output's aspect around it.
//! Where the window leaves the photo, the letterbox grey fills in: that is
//! what a whole photo looks like once `grin-detect` letterboxes it. Faces
//! that the crop cuts off or shrinks below a learnable size become ignore
//! regions ([`Smile::Ignore`]) rather than background.
//!
//! Un-annotated faces: Caltech does not annotate every small or background
//! face. Crops are therefore centred on an annotated face, which keeps most
//! of each crop near the people the annotators looked at. Face-free crops
//! (`crops.background`, off by default) are cut only from photos with at most
//! two faces, and keep clear of those faces by half a face: group photos,
//! where faces go un-annotated, never give background. Faces a second
//! detector found (`crops.unannotated`) are ignore regions and count here.

mod face_box;
mod fddb;
mod held_out;
mod landmarks;
mod unannotated;
pub(crate) mod window;

pub use held_out::{
    has_held_out_photos, held_out_photos, photos_named_outside, photos_of_split, HeldOutPhoto, HeldOutPhotos,
};
pub(crate) use landmarks::celeba_aligned_box;
pub use landmarks::parse_caltech;
pub(crate) use window::crop_scene;
use window::{quarter_crops, tile};

use crate::annotations::{bad_box, entries_of_split, one_entry_a_photo, AnnotationText, BadLines, Entry};
use crate::config::{FeatureConfig, PhotoCrops, SourceConfig, Split};
use crate::sample::{FaceBox, Sample, Smile};
use crate::source::{SampleRng, Source};
use grin_image::{decode, read_text, resize, ImageBound, InputError, Raster, SkipCounts};
use landmarks::parse_celeba_aligned;
use rand::Rng;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use unannotated::add_unannotated;

/// How a source's face boxes relate to the decoded image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum BoxRule {
    /// Boxes are in image pixels, as annotated.
    Annotated,
    /// One face where CelebA's alignment puts it.
    CelebaAligned,
}

/// A decoded photo, shrunk to `max_side`, with its faces in its pixels.
#[derive(Debug)]
struct Photo {
    image: Raster,
    faces: Vec<FaceBox>,
}

/// Random crops of real photos.
pub(crate) struct PhotoSource {
    name: &'static str,
    annotations: PathBuf,
    entries: Vec<Entry>,
    rule: BoxRule,
    crops: PhotoCrops,
    /// The crops of a mosaic's quarters (`crops.mosaic`).
    quarter: PhotoCrops,
    width: u32,
    height: u32,
    channels: u32,
    bound: ImageBound,
    /// Each photo is decoded once, on first use, by whichever worker needs it.
    cache: Vec<OnceLock<Arc<Photo>>>,
    load_skips: SkipCounts,
}

impl std::fmt::Debug for PhotoSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhotoSource").field("name", &self.name).field("photos", &self.entries.len()).finish()
    }
}

impl PhotoSource {
    pub(crate) fn new(cfg: &FeatureConfig, split: Split) -> Result<PhotoSource, InputError> {
        let skips = SkipCounts::default();
        let (name, annotations, mut entries, rule, crops) = parse_source(&cfg.source, cfg, &skips)?;
        check_crops(&crops)?;
        if let Some(file) = &crops.unannotated {
            let problems = BadLines { on_bad: cfg.on_bad_sample, skips: &skips };
            add_unannotated(&mut entries, file, rule, problems)?;
        }
        let entries = entries_of_split(entries, cfg, split, &annotations, "photos")?;
        let cache = (0..entries.len()).map(|_| OnceLock::new()).collect();
        Ok(PhotoSource {
            name,
            annotations,
            entries,
            rule,
            quarter: quarter_crops(&crops),
            crops,
            width: cfg.width,
            height: cfg.height,
            channels: cfg.channels,
            bound: cfg.image_bound()?,
            cache,
            load_skips: skips,
        })
    }

    fn photo(&self, index: usize) -> Result<Arc<Photo>, InputError> {
        if let Some(photo) = self.cache[index].get() {
            return Ok(photo.clone());
        }
        let entry = &self.entries[index];
        let photo = Arc::new(load_photo(entry, self.rule, self.channels, self.bound, &self.crops, &self.annotations)?);
        Ok(self.cache[index].get_or_init(|| photo).clone())
    }
}

impl Source for PhotoSource {
    fn name(&self) -> &'static str {
        self.name
    }

    fn files(&self) -> Vec<&Path> {
        self.entries.iter().map(|e| e.image.as_path()).collect()
    }

    fn len(&self) -> Option<usize> {
        Some(self.entries.len())
    }

    fn scene(&self, _index: u64, rng: &mut SampleRng) -> Result<Sample, InputError> {
        // Photos are drawn at random, not by index, so that every worker sees
        // every photo early (the cache fills evenly) and a run of steps is
        // not one photo's.
        if self.crops.mosaic > 0.0 && rng.random::<f32>() < self.crops.mosaic {
            let (w, h) = (self.width / 2, self.height / 2);
            let quarter = |rng: &mut SampleRng| -> Result<Sample, InputError> {
                let photo = self.photo(rng.random_range(0..self.entries.len()))?;
                Ok(crop_scene(&photo.image, &photo.faces, w, h, &self.quarter, rng))
            };
            let quarters = [quarter(rng)?, quarter(rng)?, quarter(rng)?, quarter(rng)?];
            return Ok(tile(quarters, self.width, self.height, self.channels));
        }
        let pick = rng.random_range(0..self.entries.len());
        let photo = self.photo(pick)?;
        Ok(crop_scene(&photo.image, &photo.faces, self.width, self.height, &self.crops, rng))
    }

    fn load_skips(&self) -> Option<&SkipCounts> {
        Some(&self.load_skips)
    }
}

type Parsed = (&'static str, PathBuf, Vec<Entry>, BoxRule, PhotoCrops);

pub(super) fn parse_source(
    source: &SourceConfig,
    cfg: &FeatureConfig,
    skips: &SkipCounts,
) -> Result<Parsed, InputError> {
    let problems = BadLines { on_bad: cfg.on_bad_sample, skips };
    match source {
        SourceConfig::Caltech { root, crops } => {
            let path = root.join("WebFaces_GroundThruth.txt");
            let text = read_text(&path)?;
            let entries = parse_caltech(AnnotationText { text: &text, path: &path }, &root.join("images"), problems)?;
            // Its lines are grouped by name; a name spelt two ways is one photo too.
            let entries = one_entry_a_photo(entries, &path, &problems)?;
            Ok(("caltech", path, entries, BoxRule::Annotated, crops.clone()))
        }
        SourceConfig::Fddb { root, crops } => {
            let (path, entries) = fddb::read_fddb(root, problems)?;
            Ok(("fddb", path, entries, BoxRule::Annotated, crops.clone()))
        }
        SourceConfig::CelebaAligned { images, attr, crops } => {
            let entries = parse_celeba_aligned(&read_text(attr)?, attr, images, &problems)?;
            Ok(("celeba-aligned", attr.clone(), entries, BoxRule::CelebaAligned, crops.clone()))
        }
        _ => Err(InputError::Config(
            "PhotoSource needs `features.source.kind = \"caltech\"`, `\"fddb\"` or `\"celeba_aligned\"`".into(),
        )),
    }
}

pub(crate) fn check_crops(c: &PhotoCrops) -> Result<(), InputError> {
    let bad = |key: &str, why: String| InputError::Config(format!("key `features.source.crops.{key}`: {why}"));
    if !(c.min_face >= 2.0 && c.min_face <= c.max_face && c.max_face <= 4096.0) {
        return Err(bad(
            "min_face",
            format!("need 2 <= min_face <= max_face <= 4096, got {}..{}", c.min_face, c.max_face),
        ));
    }
    if !(c.max_upscale.is_finite() && (0.1..=16.0).contains(&c.max_upscale)) {
        return Err(bad("max_upscale", format!("{} must be within 0.1..=16", c.max_upscale)));
    }
    if !(c.max_zoom_out.is_finite() && (1.0..=64.0).contains(&c.max_zoom_out)) {
        return Err(bad("max_zoom_out", format!("{} must be within 1..=64", c.max_zoom_out)));
    }
    if !(0.0..=1.0).contains(&c.min_visible) {
        return Err(bad("min_visible", format!("{} must be within 0..=1", c.min_visible)));
    }
    if !(c.min_learnable.is_finite() && (0.0..=1024.0).contains(&c.min_learnable)) {
        return Err(bad("min_learnable", format!("{} must be within 0..=1024", c.min_learnable)));
    }
    if !(0.0..=1.0).contains(&c.background) {
        return Err(bad("background", format!("{} must be a probability in 0..=1", c.background)));
    }
    for (key, share) in [("cut", c.cut), ("mosaic", c.mosaic)] {
        if !(0.0..=1.0).contains(&share) {
            return Err(bad(key, format!("{share} must be a probability in 0..=1")));
        }
    }
    if !(0.0..=1.0).contains(&c.zoom_in) {
        return Err(bad("zoom_in", format!("{} must be a probability in 0..=1", c.zoom_in)));
    }
    if !(c.zoom_in_upscale.is_finite() && (1.0..=16.0).contains(&c.zoom_in_upscale)) {
        return Err(bad("zoom_in_upscale", format!("{} must be within 1..=16", c.zoom_in_upscale)));
    }
    if !(64..=16384).contains(&c.max_side) {
        return Err(bad("max_side", format!("{} must be within 64..=16384", c.max_side)));
    }
    Ok(())
}

/// Decodes one photo, shrinks it to `max_side`, and places its faces. A face
/// whose centre lies outside the photo is an error naming its annotation line.
fn load_photo(
    entry: &Entry,
    rule: BoxRule,
    channels: u32,
    bound: ImageBound,
    crops: &PhotoCrops,
    annotations: &Path,
) -> Result<Photo, InputError> {
    let image = decode(&entry.image, channels, bound)?;
    let faces = faces_in(entry, rule, (image.width, image.height), annotations, crops.unannotated.as_deref())?;
    let longest = image.width.max(image.height);
    if longest <= crops.max_side {
        return Ok(Photo { image, faces });
    }
    let s = crops.max_side as f32 / longest as f32;
    let (w, h) = (((image.width as f32 * s).round() as u32).max(1), ((image.height as f32 * s).round() as u32).max(1));
    let pixels = resize(&image, w, h);
    let (sx, sy) = (w as f32 / image.width as f32, h as f32 / image.height as f32);
    let faces =
        faces.iter().map(|f| FaceBox { x0: f.x0 * sx, y0: f.y0 * sy, x1: f.x1 * sx, y1: f.y1 * sy, ..*f }).collect();
    Ok(Photo { image: Raster { width: w, height: h, channels, pixels }, faces })
}

/// `entry`'s faces in its decoded `(width, height)` photo. With `found`
/// (`crops.unannotated`), its [`Smile::Ignore`] faces came from that file:
/// they are in the photo's pixels whatever the rule, and a bad one is named
/// by that file's line.
pub(super) fn faces_in(
    entry: &Entry,
    rule: BoxRule,
    (width, height): (u32, u32),
    annotations: &Path,
    found: Option<&Path>,
) -> Result<Vec<FaceBox>, InputError> {
    let (w, h) = (width as f32, height as f32);
    entry
        .faces
        .iter()
        .map(|a| {
            let from = found.filter(|_| a.face.smile == Smile::Ignore);
            if rule == BoxRule::CelebaAligned && from.is_none() {
                let [x0, y0, x1, y1] = celeba_aligned_box(width, height);
                return Ok(FaceBox { x0, y0, x1, y1, smile: a.face.smile });
            }
            let f = a.face;
            let (cx, cy) = ((f.x0 + f.x1) / 2.0, (f.y0 + f.y1) / 2.0);
            if !(0.0..=w).contains(&cx) || !(0.0..=h).contains(&cy) {
                return Err(bad_box(
                    from.unwrap_or(annotations),
                    a.line,
                    format!(
                        "face centred at ({cx:.1}, {cy:.1}) lies outside {} ({}x{})",
                        entry.image.display(),
                        width,
                        height
                    ),
                ));
            }
            // Caltech's squares overhang photo edges; what a crop can cut
            // off is measured against the part inside the photo.
            Ok(FaceBox { x0: f.x0.max(0.0), y0: f.y0.max(0.0), x1: f.x1.min(w), y1: f.y1.min(h), ..f })
        })
        .collect()
}

#[cfg(test)]
mod tests;
