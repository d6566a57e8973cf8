//! Face-crop folders (`root/smile/*`, `root/no_smile/*`, the SMILEsmileD
//! layout) composited into detection scenes.
//!
//! Every crop of the split is decoded once, in parallel, when the source is
//! built; a scene is then pure arithmetic: a background (procedural texture or
//! a random region of a face-free image), and 0..=`max_faces` crops pasted at a
//! log-uniform size, a random position and a small rotation, each through a
//! feathered elliptical mask so no square crop border is left for the model
//! to key on. The face box is the bounding box of that ellipse after rotation:
//! SMILEsmileD crops are tight faces, so the inscribed ellipse is the face.

pub(crate) mod background;
mod paste;

pub(crate) use paste::{paste_face, Placement};

use crate::annotations::{keyed, not_also, PhotoKey};
use crate::config::{FeatureConfig, SourceConfig, Split};
use crate::sample::{FaceBox, Sample, Smile};
use crate::source::{log_uniform, SampleRng, Source};
use crate::split::{check_split, keep_split};
use background::{has_colour, procedural_background, random_region};
use grin_image::{list_images, load_all, skip_or_fail, BadInputKind, InputError, OnBadSample, Raster, SkipCounts};
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A crop under both `smile/` and `no_smile/` (a hard link, or one folder
/// a link to the other) has two labels: an error naming it, or under `skip`
/// left out of both, counted (issue 90, round 23: one file trained as
/// smiling and as not).
fn one_label_a_crop(
    listed: Vec<(Vec<PathBuf>, Smile)>,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<(Vec<PathBuf>, Smile)>, InputError> {
    if listed.len() < 2 {
        return Ok(listed);
    }
    let first: HashMap<PhotoKey, &PathBuf> = listed[0].0.iter().map(|f| (PhotoKey::of(f), f)).collect();
    let mut both = HashSet::new();
    for file in &listed[1].0 {
        let key = PhotoKey::of(file);
        if let Some(other) = first.get(&key) {
            let why = format!("is also {}: one crop under smile/ and no_smile/ has two labels", other.display());
            skip_or_fail(on_bad, skips, InputError::bad(file, None, BadInputKind::MalformedAnnotation, why))?;
            both.insert(key);
        }
    }
    if both.is_empty() {
        return Ok(listed);
    }
    let keep = |(files, smile): (Vec<PathBuf>, Smile)| {
        (files.into_iter().filter(|f| !both.contains(&PhotoKey::of(f))).collect(), smile)
    };
    Ok(listed.into_iter().map(keep).collect())
}

/// Largest share of a face that another face may cover; more is rejected.
const MAX_OVERLAP: f32 = 0.25;
/// Placement attempts per face before it is left out of the scene.
const PLACE_TRIES: usize = 12;

/// One face crop and its label from the folder it lives in.
#[derive(Debug, Clone)]
struct Crop {
    image: Raster,
    smile: Smile,
}

/// Scenes composited from face-crop folders.
#[derive(Debug)]
pub(crate) struct CropsSource {
    width: u32,
    height: u32,
    channels: u32,
    max_faces: usize,
    min_face: f32,
    max_face: f32,
    rotation_deg: f32,
    smiling: Vec<Crop>,
    non_smiling: Vec<Crop>,
    backgrounds: Vec<Raster>,
    /// Colour backgrounds only when some crop has colour: a grey face on a
    /// colour scene would be a give-away.
    colour: bool,
    /// The crops of this split and the backgrounds, as listed.
    files: Vec<PathBuf>,
    load_skips: SkipCounts,
}

impl CropsSource {
    pub(crate) fn new(cfg: &FeatureConfig, split: Split) -> Result<CropsSource, InputError> {
        let SourceConfig::Crops { root, max_faces, min_face, max_face, rotation_deg, backgrounds } = &cfg.source else {
            return Err(InputError::Config("CropsSource needs `features.source.kind = \"crops\"`".into()));
        };
        check_split(&cfg.split)?;
        cfg.source.validate()?;
        let channels = cfg.channels;
        let bound = cfg.image_bound()?;
        let load_skips = SkipCounts::default();
        let mut smiling = Vec::new();
        let mut non_smiling = Vec::new();
        let mut listed = Vec::new();
        let mut shown = Vec::new();
        for (folder, smile) in [("smile", Smile::Yes), ("no_smile", Smile::No)] {
            match list_images(&root.join(folder)) {
                Ok(files) => listed.push((files, smile)),
                Err(e) => skip_or_fail(cfg.on_bad_sample, &load_skips, e)?,
            }
        }
        // Looked up (a stat a crop) only when there are backgrounds to compare.
        let crop_files =
            if backgrounds.is_some() { keyed(listed.iter().flat_map(|(files, _)| files)) } else { HashMap::new() };
        for (files, smile) in one_label_a_crop(listed, cfg.on_bad_sample, &load_skips)? {
            let files = keep_split(files, |p| p.as_path(), &cfg.split, split);
            let crops = load_all(&files, channels, bound, cfg.on_bad_sample, &load_skips)?;
            shown.extend(files);
            let target = if smile == Smile::Yes { &mut smiling } else { &mut non_smiling };
            target.extend(crops.into_iter().map(|image| Crop { image, smile }));
        }
        if smiling.is_empty() && non_smiling.is_empty() {
            return Err(InputError::bad(
                root,
                None,
                BadInputKind::EmptyFolder,
                format!("no readable face crops for the {split:?} split under smile/ or no_smile/"),
            ));
        }
        // Under Skip, a background folder with nothing usable is counted and
        // the procedural textures stand in for it.
        let backgrounds = match backgrounds {
            Some(dir) => {
                let images = match list_images(dir) {
                    Ok(files) => {
                        // A background is face-free: a face crop of the source
                        // there (its own `smile/`, a link) taught a face as
                        // background, without a word (round 26).
                        let (role, why) = ("the face crop", "a background holds no face");
                        let files = not_also(files, &crop_files, role, why, cfg.on_bad_sample, &load_skips)?;
                        let images = load_all(&files, channels, bound, cfg.on_bad_sample, &load_skips)?;
                        shown.extend(files);
                        images
                    }
                    Err(e) => {
                        skip_or_fail(cfg.on_bad_sample, &load_skips, e)?;
                        Vec::new()
                    }
                };
                if images.is_empty() && cfg.on_bad_sample == OnBadSample::Error {
                    return Err(InputError::bad(dir, None, BadInputKind::EmptyFolder, "no readable background images"));
                }
                images
            }
            None => Vec::new(),
        };
        let colour = channels == 3 && smiling.iter().chain(&non_smiling).any(|c| has_colour(&c.image));
        Ok(CropsSource {
            width: cfg.width,
            height: cfg.height,
            channels,
            max_faces: *max_faces,
            min_face: *min_face,
            max_face: *max_face,
            rotation_deg: *rotation_deg,
            smiling,
            non_smiling,
            backgrounds,
            colour,
            files: shown,
            load_skips,
        })
    }

    /// (smiling, non-smiling) crops in this split.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.smiling.len(), self.non_smiling.len())
    }

    fn background(&self, rng: &mut SampleRng) -> Vec<u8> {
        if self.backgrounds.is_empty() {
            procedural_background(self.width, self.height, self.channels, self.colour, rng)
        } else {
            let image = &self.backgrounds[rng.random_range(0..self.backgrounds.len())];
            random_region(image, self.width, self.height, rng)
        }
    }

    fn pick_crop(&self, rng: &mut SampleRng) -> &Crop {
        // Half smiling, half not, whatever the folder sizes (SMILEsmileD is
        // 28% smiling): the smile head then sees both labels equally often.
        let smile = if self.smiling.is_empty() {
            false
        } else if self.non_smiling.is_empty() {
            true
        } else {
            rng.random::<bool>()
        };
        let pool = if smile { &self.smiling } else { &self.non_smiling };
        &pool[rng.random_range(0..pool.len())]
    }
}

impl Source for CropsSource {
    fn load_skips(&self) -> Option<&SkipCounts> {
        Some(&self.load_skips)
    }

    fn name(&self) -> &'static str {
        "crops"
    }

    fn files(&self) -> Vec<&Path> {
        self.files.iter().map(PathBuf::as_path).collect()
    }

    fn len(&self) -> Option<usize> {
        Some(self.smiling.len() + self.non_smiling.len())
    }

    fn scene(&self, _index: u64, rng: &mut SampleRng) -> Result<Sample, InputError> {
        let (w, h) = (self.width as f32, self.height as f32);
        let mut pixels = self.background(rng);
        let faces = rng.random_range(0..=self.max_faces);
        let mut boxes: Vec<FaceBox> = Vec::with_capacity(faces);
        // The largest face must fit in the frame even when rotated.
        let max_side = self.max_face.min(0.9 * w.min(h));
        let min_side = self.min_face.min(max_side);
        for _ in 0..faces {
            let crop = self.pick_crop(rng);
            let side = log_uniform(rng, min_side, max_side);
            let angle = (rng.random::<f32>() * 2.0 - 1.0) * self.rotation_deg.to_radians();
            let placement = Placement::new(&crop.image, side, angle);
            for _ in 0..PLACE_TRIES {
                let cx = placement.half_w + rng.random::<f32>() * (w - 2.0 * placement.half_w).max(0.0);
                let cy = placement.half_h + rng.random::<f32>() * (h - 2.0 * placement.half_h).max(0.0);
                let face = placement.face_box(cx, cy, crop.smile);
                if boxes.iter().all(|b| overlap_share(b, &face) <= MAX_OVERLAP) {
                    paste_face(&mut pixels, self.width, self.height, self.channels, &crop.image, &placement, cx, cy);
                    boxes.push(face);
                    break;
                }
            }
        }
        Ok(Sample { width: self.width, height: self.height, channels: self.channels, pixels, boxes })
    }
}

/// Share of the smaller box covered by the intersection.
fn overlap_share(a: &FaceBox, b: &FaceBox) -> f32 {
    let iw = (a.x1.min(b.x1) - a.x0.max(b.x0)).max(0.0);
    let ih = (a.y1.min(b.y1) - a.y0.max(b.y0)).max(0.0);
    let area = |f: &FaceBox| (f.x1 - f.x0) * (f.y1 - f.y0);
    iw * ih / area(a).min(area(b)).max(1e-6)
}

#[cfg(test)]
mod tests;
