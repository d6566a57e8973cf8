//! The `[features]` table of a grin config: everything that changes what a
//! sample looks like. The store fingerprints this whole struct.

use crate::sample::MAX_BOXES;
use grin_image::{InputError, OnBadSample};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

mod photo_crops;
pub use photo_crops::PhotoCrops;

/// Most feature workers a config may name.
pub const MAX_WORKERS: usize = 1024;
/// Largest face side a source may be asked to draw (px): the largest input side.
const MAX_FACE_SIDE: f32 = 4096.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeatureConfig {
    /// Sample image size in pixels; also the detector's input size.
    pub width: u32,
    pub height: u32,
    /// 1 (grayscale) or 3 (RGB).
    pub channels: u32,
    pub seed: u64,
    /// Generation worker threads; 0 means all cores.
    pub workers: usize,
    pub on_bad_sample: OnBadSample,
    /// Most pixels an image file may have; a larger one is refused before
    /// it is decoded (an error naming it, or a counted skip).
    pub max_image_pixels: u64,
    pub source: SourceConfig,
    pub augment: AugmentConfig,
    pub balance: Option<ClassBalanceConfig>,
    pub split: SplitConfig,
}

impl Default for FeatureConfig {
    fn default() -> Self {
        FeatureConfig {
            width: 320,
            height: 240,
            channels: 1,
            seed: 0,
            workers: 0,
            on_bad_sample: OnBadSample::Error,
            max_image_pixels: grin_image::DEFAULT_MAX_PIXELS,
            source: SourceConfig::default(),
            augment: AugmentConfig::default(),
            balance: None,
            split: SplitConfig::default(),
        }
    }
}

impl FeatureConfig {
    /// The bound every image file of this config is decoded within; an
    /// error names the key when `max_image_pixels` is out of range.
    pub fn image_bound(&self) -> Result<grin_image::ImageBound, InputError> {
        const KEY: &str = "features.max_image_pixels";
        grin_image::ImageBound::new(self.max_image_pixels, KEY)
            .map_err(|e| InputError::Config(format!("key `{KEY}`: {e}")))
    }
}

/// Where samples come from. `kind` selects the variant in TOML.
///
/// Variants repeat their face-size fields rather than share a flattened
/// struct: serde's `flatten` cannot be combined with `deny_unknown_fields`,
/// and a misspelt key must stay an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// Procedural scenes: the embedded default, needs no files.
    Synthetic {
        #[serde(default = "default_max_faces")]
        max_faces: usize,
        #[serde(default = "default_min_face")]
        min_face: f32,
        #[serde(default = "default_max_face")]
        max_face: f32,
        /// Expected number of face-like distractors per scene.
        #[serde(default = "default_hard_negatives")]
        hard_negatives: f32,
    },
    /// Folders `smile/` and `no_smile/` of tight face crops, composited into scenes.
    Crops {
        root: PathBuf,
        #[serde(default = "default_max_faces")]
        max_faces: usize,
        #[serde(default = "default_min_face")]
        min_face: f32,
        #[serde(default = "default_max_face")]
        max_face: f32,
        #[serde(default = "default_rotation")]
        rotation_deg: f32,
        /// A folder of face-free images; procedural textures when absent.
        #[serde(default)]
        backgrounds: Option<PathBuf>,
    },
    /// WIDER FACE: image root plus the `wider_face_bbx_gt.txt` style file.
    Wider { images: PathBuf, annotations: PathBuf },
    /// CelebA: image root, `list_bbox_celeba.txt`, `list_attr_celeba.txt`.
    Celeba { images: PathBuf, bbox: PathBuf, attr: PathBuf },
    /// One JSON object a line: `{"image": ..., "boxes": [[x0,y0,x1,y1],..], "smile": [true,false,null,..]}`.
    Jsonl { manifest: PathBuf },
    /// Caltech 10,000 Web Faces: `root/images/` and `root/WebFaces_GroundThruth.txt`
    /// (five landmarks a face, boxes by `photos::face_box::landmarks_to_box`).
    /// Scenes are random crops of the photos around their faces.
    Caltech {
        root: PathBuf,
        #[serde(default)]
        crops: PhotoCrops,
    },
    /// FDDB's news photos: `root/images/` and the ellipse lists of
    /// `root/FDDB-folds/` (one ellipse a face, its bounding box the face
    /// box). Scenes are random crops, as for Caltech.
    Fddb {
        root: PathBuf,
        #[serde(default)]
        crops: PhotoCrops,
    },
    /// CelebA's aligned portraits and its attribute file (`Smiling`); the
    /// face box comes from the alignment. Scenes are random crops.
    CelebaAligned {
        images: PathBuf,
        attr: PathBuf,
        #[serde(default)]
        crops: PhotoCrops,
    },
    /// Several sources: each scene is drawn from one part, with these weights.
    Mix { weights: Vec<f32>, parts: Vec<SourceConfig> },
    /// Face-free scenes that teach "not a face": random regions of
    /// face-free images (split by file name like every source), of false
    /// detections `grin mine` cut with their context from training photos
    /// (training only), and procedural graphics (card suits, dot pairs,
    /// rings, bars, glyph rows) drawn on a texture. At least one of the three.
    Negatives {
        #[serde(default)]
        images: Option<PathBuf>,
        #[serde(default)]
        mined: Option<PathBuf>,
        /// Share of scenes that are procedural graphics (all of them when
        /// there are no images for the split).
        #[serde(default)]
        graphics: f32,
        /// Share of image scenes cut close: a region from half the scene's
        /// size (shown at twice its pixels) up to half the image, each
        /// scale as likely. The usual region, half the image or more,
        /// shows a large image shrunk several times, while a photo's
        /// default in grin-detect (twice its pixels) shows a drawing's
        /// strokes and a texture's grain at their own size or larger.
        /// Absent from serialised configs when 0, so that earlier stores
        /// keep their fingerprint.
        #[serde(default, skip_serializing_if = "is_zero")]
        zoom_in: f32,
    },
}

fn is_zero(share: &f32) -> bool {
    *share == 0.0
}

fn default_max_faces() -> usize {
    4
}
fn default_min_face() -> f32 {
    16.0
}
fn default_max_face() -> f32 {
    160.0
}
fn default_hard_negatives() -> f32 {
    1.0
}
fn default_rotation() -> f32 {
    15.0
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig::Synthetic {
            max_faces: default_max_faces(),
            min_face: default_min_face(),
            max_face: default_max_face(),
            hard_negatives: default_hard_negatives(),
        }
    }
}

/// Each augmentation's probability (0 disables it) and strength.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AugmentConfig {
    pub flip: f32,
    pub crop: f32,
    /// Scale range of the random crop, as a fraction of the image side.
    pub crop_scale: (f32, f32),
    /// A box cut off by more than this fraction of its area is dropped.
    pub crop_drop_fraction: f32,
    pub rotate: f32,
    pub rotate_deg: f32,
    pub brightness: f32,
    pub brightness_delta: f32,
    pub contrast: f32,
    pub contrast_range: (f32, f32),
    pub gamma: f32,
    pub gamma_range: (f32, f32),
    pub blur: f32,
    pub blur_sigma: (f32, f32),
    pub noise: f32,
    pub noise_sigma: f32,
    pub jpeg: f32,
    pub jpeg_quality: (u8, u8),
}

impl AugmentConfig {
    /// Every augmentation off (strengths at their defaults): what held-out
    /// samples get, and the baseline one stage is measured against.
    pub fn off() -> AugmentConfig {
        AugmentConfig {
            flip: 0.0,
            crop: 0.0,
            rotate: 0.0,
            brightness: 0.0,
            contrast: 0.0,
            gamma: 0.0,
            blur: 0.0,
            noise: 0.0,
            jpeg: 0.0,
            ..AugmentConfig::default()
        }
    }
}

impl Default for AugmentConfig {
    fn default() -> Self {
        AugmentConfig {
            flip: 0.5,
            crop: 0.3,
            crop_scale: (0.6, 1.0),
            crop_drop_fraction: 0.5,
            rotate: 0.0,
            rotate_deg: 10.0,
            brightness: 0.5,
            brightness_delta: 0.2,
            contrast: 0.5,
            contrast_range: (0.7, 1.3),
            gamma: 0.0,
            gamma_range: (0.7, 1.4),
            blur: 0.2,
            blur_sigma: (0.5, 1.5),
            noise: 0.3,
            noise_sigma: 6.0,
            jpeg: 0.0,
            jpeg_quality: (40, 90),
        }
    }
}

/// Target fraction of each scene class in every batch (rejection resampling).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassBalanceConfig {
    pub smiling: f32,
    pub non_smiling: f32,
    pub face_free: f32,
}

impl ClassBalanceConfig {
    /// The fractions as given (not normalised), in `SceneClass::ALL` order.
    pub fn fractions(&self) -> [f32; 3] {
        [self.smiling, self.non_smiling, self.face_free]
    }
}

/// Deterministic train/val/test split ratios (by a hash of the file name, or
/// of the sample index for generated sources). Weights, normalised by their
/// sum: `train = 8, val = 1, test = 1` is the default 0.8 / 0.1 / 0.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SplitConfig {
    pub train: f32,
    pub val: f32,
    pub test: f32,
}

impl Default for SplitConfig {
    fn default() -> Self {
        SplitConfig { train: 0.8, val: 0.1, test: 0.1 }
    }
}

/// `--split` takes these values itself (clap's `ValueEnum`, with the
/// `cli` feature), as configs do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum Split {
    Train,
    Val,
    Test,
}

impl Split {
    /// The split as people say it: "training", "validation", "test".
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "training",
            Split::Val => "validation",
            Split::Test => "test",
        }
    }
}

impl SourceConfig {
    /// Whether the source holds real photos with annotated faces, the
    /// ones held-out photo figures (AP, recall) are measured on.
    pub fn has_annotated_photos(&self) -> bool {
        match self {
            SourceConfig::Mix { parts, .. } => parts.iter().any(SourceConfig::has_annotated_photos),
            SourceConfig::Caltech { .. }
            | SourceConfig::Fddb { .. }
            | SourceConfig::CelebaAligned { .. }
            | SourceConfig::Wider { .. }
            | SourceConfig::Celeba { .. }
            | SourceConfig::Jsonl { .. } => true,
            SourceConfig::Synthetic { .. } | SourceConfig::Crops { .. } | SourceConfig::Negatives { .. } => false,
        }
    }

    /// Every file and folder the source reads, for an output to keep out
    /// of (a folder stands for everything under it; a JSONL manifest for
    /// the folder its images are named from).
    pub fn inputs(&self) -> Vec<&Path> {
        fn paths<'a>(list: &[Option<&'a PathBuf>]) -> Vec<&'a Path> {
            list.iter().flatten().map(|p| p.as_path()).collect()
        }
        match self {
            SourceConfig::Synthetic { .. } => vec![],
            SourceConfig::Crops { root, backgrounds, .. } => paths(&[Some(root), backgrounds.as_ref()]),
            SourceConfig::Wider { images, annotations } => paths(&[Some(images), Some(annotations)]),
            SourceConfig::Celeba { images, bbox, attr } => paths(&[Some(images), Some(bbox), Some(attr)]),
            SourceConfig::Jsonl { manifest } => manifest.parent().into_iter().chain([manifest.as_path()]).collect(),
            SourceConfig::Caltech { root, .. } | SourceConfig::Fddb { root, .. } => vec![root.as_path()],
            SourceConfig::CelebaAligned { images, attr, .. } => paths(&[Some(images), Some(attr)]),
            SourceConfig::Mix { parts, .. } => parts.iter().flat_map(SourceConfig::inputs).collect(),
            SourceConfig::Negatives { images, mined, .. } => paths(&[images.as_ref(), mined.as_ref()]),
        }
    }
}

/// Faces a scene may hold and the range of their sides (synthetic and
/// composited scenes). NaN fails every comparison, so it is refused too.
pub(crate) fn check_faces(max_faces: usize, min_face: f32, max_face: f32) -> Result<(), InputError> {
    if max_faces > MAX_BOXES {
        return Err(InputError::Config(format!(
            "key `features.source.max_faces`: {max_faces} must be at most {MAX_BOXES} (the boxes a record holds)"
        )));
    }
    if !(4.0 <= min_face && min_face <= max_face && max_face <= MAX_FACE_SIDE) {
        return Err(InputError::Config(format!(
            "key `features.source.min_face`/`max_face`: need 4 <= min_face <= max_face <= {MAX_FACE_SIDE}, got {min_face}..{max_face}"
        )));
    }
    Ok(())
}

/// A worker count past [`MAX_WORKERS`] is a typo. Below it, a count past
/// the cores is clamped when a pool starts (`pipeline::worker_count`).
pub(crate) fn check_workers(workers: usize) -> Result<(), InputError> {
    if workers > MAX_WORKERS {
        return Err(InputError::Config(format!(
            "key `features.workers`: {workers} must be within 0..={MAX_WORKERS} (0 = all cores)"
        )));
    }
    Ok(())
}

/// Sizes every source accepts: 1 or 3 channels, and a side the network
/// runs on (`grin_terms`' bounds, the one owner of them: this check once
/// allowed 16..=8192 where the model refused anything outside 32..=4096).
pub(crate) fn check_size(width: u32, height: u32, channels: u32) -> Result<(), InputError> {
    use grin_terms::{MAX_SIDE, MIN_SIDE};
    if channels != 1 && channels != 3 {
        return Err(InputError::Config(format!("key `features.channels`: {channels} must be 1 or 3")));
    }
    for (key, side) in [("width", width), ("height", height)] {
        if !(MIN_SIDE as u32..=MAX_SIDE as u32).contains(&side) {
            return Err(InputError::Config(format!(
                "key `features.{key}`: {side} must be within {MIN_SIDE}..={MAX_SIDE}"
            )));
        }
    }
    Ok(())
}
