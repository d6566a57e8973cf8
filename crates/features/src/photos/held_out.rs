//! Whole held-out photos, letterboxed the way `grin-detect` sees them, for
//! scoring a model on real images rather than on crops.

use super::unannotated::add_unannotated;
use super::{faces_in, parse_source, BoxRule};
use crate::annotations::{letterboxed_sample, AnnotatedSource, BadLines, Entry};
use crate::config::{FeatureConfig, SourceConfig, Split};
use crate::sample::{FaceBox, Sample, Smile};
use crate::source::Source;
use crate::split::keep_split;
use grin_image::{letterbox_photo, BadInputKind, ImageBound, InputError, Letterbox, Raster, SkipCounts};
use std::path::{Component, Path, PathBuf};

/// One source's held-out (test split) photos, for scoring a model on whole
/// real images the way `grin-detect` sees them.
#[derive(Debug)]
pub struct HeldOutPhotos {
    /// `caltech`, `celeba-aligned`, `wider`, ...
    pub name: &'static str,
    /// Portraits hold one face each (CelebA): "found" and detections per
    /// portrait are reported for them.
    pub portraits: bool,
    entries: Vec<Entry>,
    rule: BoxRule,
    annotations: PathBuf,
    bound: ImageBound,
    /// The source's `crops.unannotated`: each entry's [`Smile::Ignore`]
    /// faces are the ones the second detector found, kept apart from the
    /// annotations ([`HeldOutPhotos::letterboxed_with_found`]).
    found: Option<PathBuf>,
    /// What the annotations' reading skipped under `on_bad_sample = "skip"`
    /// ([`SkipCounts::summary`]), for the command to say: eval, calibrate
    /// and mine scored fewer photos without a word (round 24 of issue 90).
    pub skipped: Option<String>,
}

impl HeldOutPhotos {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the source has faces a second detector found (`crops.unannotated`).
    pub fn has_found(&self) -> bool {
        self.found.is_some()
    }

    pub fn image_path(&self, index: usize) -> &Path {
        &self.entries[index].image
    }

    /// The frame photo `index` is searched in: `size` (a camera's frame),
    /// or with `own_size` the one `grin-detect` takes for an image file, its
    /// own size at [`grin_terms::photo::own_size`] (twice its pixels, at most
    /// that many), read from the image's header.
    pub fn frame(&self, index: usize, size: (u32, u32), own_size: Option<u64>) -> Result<(u32, u32), InputError> {
        let Some(max_pixels) = own_size else { return Ok(size) };
        let path = self.image_path(index);
        let (w, h) = image::image_dimensions(path).map_err(|e| {
            InputError::bad(path, None, BadInputKind::CorruptImage, format!("cannot read its size: {e}"))
        })?;
        let (w, h) = grin_terms::photo::own_size(w, h, max_pixels);
        Ok((w as u32, h as u32))
    }

    /// Photo `index` letterboxed to `width` x `height` in `channels` by the
    /// one photo path `grin-detect` takes ([`letterbox_photo`]), with its
    /// annotated faces in the letterboxed pixels (ignore regions included;
    /// faces a second detector found are not: see `letterboxed_with_found`).
    pub fn letterboxed(&self, index: usize, width: u32, height: u32, channels: u32) -> Result<Sample, InputError> {
        self.letterboxed_with_found(index, width, height, channels).map(|photo| photo.sample)
    }

    /// As [`HeldOutPhotos::letterboxed`], with the faces the source's second
    /// detector found (`crops.unannotated`; none without it) in the same
    /// pixels, apart: scoring counts the annotations alone, and reports how
    /// many false detections lie on such a face.
    pub fn letterboxed_with_found(
        &self,
        index: usize,
        width: u32,
        height: u32,
        channels: u32,
    ) -> Result<HeldOutPhoto, InputError> {
        let entry = &self.entries[index];
        let photo = letterbox_photo(&entry.image, channels, width, height, self.bound)?;
        let placement = photo.placement;
        let size = (placement.source_width, placement.source_height);
        let (found, faces): (Vec<FaceBox>, Vec<FaceBox>) =
            faces_in(entry, self.rule, size, &self.annotations, self.found.as_deref())?
                .into_iter()
                .partition(|f| self.found.is_some() && f.smile == Smile::Ignore);
        let found = found
            .iter()
            .map(|f| {
                let [x0, y0, x1, y1] = placement.to_frame(f.corners());
                FaceBox { x0, y0, x1, y1, ..*f }
            })
            .collect();
        Ok(HeldOutPhoto {
            sample: letterboxed_sample(photo.frame, &placement, &faces),
            found,
            source: photo.source,
            placement,
        })
    }
}

/// One held-out photo as scoring reads it.
#[derive(Debug, Clone)]
pub struct HeldOutPhoto {
    /// The letterboxed frame, with the annotated faces in its pixels.
    pub sample: Sample,
    /// The faces the source's second detector found, in the same pixels.
    pub found: Vec<FaceBox>,
    /// The photo in the frame's channels, as decoded and turned upright:
    /// what a second look cuts from.
    pub source: Raster,
    pub placement: Letterbox,
}

/// The held-out photos of every real-photo source in `cfg.source` (looking
/// inside a mix), at most `limit` per source (0 = all), in a fixed order:
/// the test split, which reports are made on.
pub fn held_out_photos(cfg: &FeatureConfig, limit: usize) -> Result<Vec<HeldOutPhotos>, InputError> {
    photos_of_split(cfg, Split::Test, limit)
}

/// As [`held_out_photos`], for any split (the validation split is where a
/// deployment threshold is chosen, so the test split stays unseen).
pub fn photos_of_split(cfg: &FeatureConfig, split: Split, limit: usize) -> Result<Vec<HeldOutPhotos>, InputError> {
    let mut out = Vec::new();
    collect_held_out(&cfg.source, cfg, split, limit, &mut out)?;
    Ok(out)
}

/// Whether `source` holds any held-out photos to score (real photos with
/// faces, or face-free images), as [`photos_of_split`] reads it: a command
/// can refuse a photo-only flag before it scores anything.
pub fn has_held_out_photos(source: &SourceConfig) -> bool {
    match source {
        SourceConfig::Mix { parts, .. } => parts.iter().any(has_held_out_photos),
        SourceConfig::Caltech { .. }
        | SourceConfig::Fddb { .. }
        | SourceConfig::CelebaAligned { .. }
        | SourceConfig::Wider { .. }
        | SourceConfig::Celeba { .. }
        | SourceConfig::Jsonl { .. }
        | SourceConfig::Negatives { images: Some(_), .. } => true,
        SourceConfig::Synthetic { .. } | SourceConfig::Crops { .. } | SourceConfig::Negatives { .. } => false,
    }
}

/// Every photo `cfg`'s annotations name, in any split, that lies outside
/// the folders its source names (a `../` or absolute name): an output must
/// land on none of them, and a check against those folders alone misses
/// them (round 14 of issue 90: `precompute --out`, `bench --json`, `train
/// --overwrite` and `eval --out` wrote over such a photo). Annotations that
/// cannot be read name none here: the command reading them says what is
/// wrong with them.
pub fn photos_named_outside(cfg: &FeatureConfig) -> Vec<PathBuf> {
    let folders: Vec<&Path> = cfg.source.inputs().into_iter().filter(|f| !f.as_os_str().is_empty()).collect();
    let inside = |photo: &Path| {
        !photo.components().any(|c| c == Component::ParentDir) && folders.iter().any(|f| photo.starts_with(f))
    };
    [Split::Train, Split::Val, Split::Test]
        .into_iter()
        .flat_map(|split| photos_of_split(cfg, split, 0).unwrap_or_default())
        .flat_map(|set| set.entries.into_iter().map(|e| e.image))
        .filter(|photo| !inside(photo))
        .collect()
}

fn collect_held_out(
    source: &SourceConfig,
    cfg: &FeatureConfig,
    split: Split,
    limit: usize,
    out: &mut Vec<HeldOutPhotos>,
) -> Result<(), InputError> {
    let skips = SkipCounts::default();
    let mut skipped = None;
    let (name, annotations, entries, rule, portraits, found) = match source {
        SourceConfig::Mix { parts, .. } => {
            for part in parts {
                collect_held_out(part, cfg, split, limit, out)?;
            }
            return Ok(());
        }
        SourceConfig::Caltech { .. } | SourceConfig::Fddb { .. } | SourceConfig::CelebaAligned { .. } => {
            let (name, annotations, mut entries, rule, crops) = parse_source(source, cfg, &skips)?;
            let portraits = rule == BoxRule::CelebaAligned;
            if let Some(file) = &crops.unannotated {
                let problems = BadLines { on_bad: cfg.on_bad_sample, skips: &skips };
                add_unannotated(&mut entries, file, rule, problems)?;
            }
            let entries = keep_split(entries, |e: &Entry| e.image.as_path(), &cfg.split, split);
            (name, annotations, entries, rule, portraits, crops.unannotated)
        }
        SourceConfig::Wider { .. } | SourceConfig::Celeba { .. } | SourceConfig::Jsonl { .. } => {
            let part = FeatureConfig { source: source.clone(), ..cfg.clone() };
            let annotated = match source {
                SourceConfig::Wider { annotations, .. } => (AnnotatedSource::wider(&part, split)?, annotations.clone()),
                SourceConfig::Celeba { bbox, .. } => (AnnotatedSource::celeba(&part, split)?, bbox.clone()),
                SourceConfig::Jsonl { manifest } => (AnnotatedSource::jsonl(&part, split)?, manifest.clone()),
                _ => unreachable!("matched above"),
            };
            let (src, annotations) = annotated;
            skipped = src.load_skips().and_then(SkipCounts::summary);
            let portraits = matches!(source, SourceConfig::Celeba { .. });
            (src.name(), annotations, src.entries().to_vec(), BoxRule::Annotated, portraits, None)
        }
        // Face-free images: every detection on them is false.
        SourceConfig::Negatives { images: Some(dir), .. } => {
            let files = grin_image::list_images(dir)?;
            let entries = files.into_iter().map(|image| Entry { image, faces: vec![] }).collect();
            let entries = keep_split(entries, |e: &Entry| e.image.as_path(), &cfg.split, split);
            ("face-free", dir.clone(), entries, BoxRule::Annotated, false, None)
        }
        SourceConfig::Synthetic { .. } | SourceConfig::Crops { .. } | SourceConfig::Negatives { .. } => return Ok(()),
    };
    let mut entries: Vec<Entry> = entries;
    if limit > 0 && entries.len() > limit {
        // An even spread over the split rather than its first photos.
        let step = entries.len() as f64 / limit as f64;
        entries = (0..limit).map(|i| entries[(i as f64 * step) as usize].clone()).collect();
    }
    let skipped = skipped.or_else(|| skips.summary());
    out.push(HeldOutPhotos { name, portraits, entries, rule, annotations, bound: cfg.image_bound()?, found, skipped });
    Ok(())
}
