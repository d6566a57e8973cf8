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

use crate::config::{FeatureConfig, OnBadSample, SourceConfig, Split, SplitConfig};
use crate::error::{BadInputKind, FeatureError, SkipCounts};
use crate::sample::{FaceBox, Sample, Smile, MAX_BOXES};
use crate::source::{SampleRng, Source};
use rand::Rng;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Fraction of the ellipse radius over which the mask fades to zero.
pub const FEATHER: f32 = 0.2;
/// Largest share of a face that another face may cover; more is rejected.
const MAX_OVERLAP: f32 = 0.25;
/// Placement attempts per face before it is left out of the scene.
const PLACE_TRIES: usize = 12;
const IMAGE_EXTENSIONS: [&str; 4] = ["jpg", "jpeg", "png", "bmp"];

/// A decoded image: `channels` interleaved u8 planes, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Raster {
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub pixels: Vec<u8>,
}

/// One face crop and its label from the folder it lives in.
#[derive(Debug, Clone)]
pub struct Crop {
    pub image: Raster,
    pub smile: Smile,
}

/// Scenes composited from face-crop folders.
#[derive(Debug)]
pub struct CropsSource {
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
    load_skips: SkipCounts,
}

impl CropsSource {
    pub fn new(cfg: &FeatureConfig, split: Split) -> Result<CropsSource, FeatureError> {
        let SourceConfig::Crops { root, max_faces, min_face, max_face, rotation_deg, backgrounds } = &cfg.source else {
            return Err(FeatureError::Config("CropsSource needs `features.source.kind = \"crops\"`".into()));
        };
        check_split(&cfg.split)?;
        if !(*min_face >= 4.0 && min_face <= max_face) {
            return Err(FeatureError::Config(format!(
                "key `features.source.min_face`/`max_face`: need 4 <= min_face <= max_face, got {min_face}..{max_face}"
            )));
        }
        if !(0.0..=90.0).contains(rotation_deg) {
            return Err(FeatureError::Config(format!(
                "key `features.source.rotation_deg`: {rotation_deg} must be within 0..=90"
            )));
        }
        let channels = cfg.channels;
        let load_skips = SkipCounts::default();
        let mut smiling = Vec::new();
        let mut non_smiling = Vec::new();
        for (folder, smile) in [("smile", Smile::Yes), ("no_smile", Smile::No)] {
            let dir = root.join(folder);
            let files = match list_images(&dir) {
                Ok(files) => files,
                Err(e) => {
                    skip_or_fail(cfg.on_bad_sample, &load_skips, e)?;
                    continue;
                }
            };
            let files: Vec<PathBuf> = files.into_iter().filter(|p| split_of_path(p, &cfg.split) == split).collect();
            let crops = load_all(&files, channels, cfg.on_bad_sample, &load_skips)?;
            let target = if smile == Smile::Yes { &mut smiling } else { &mut non_smiling };
            target.extend(crops.into_iter().map(|image| Crop { image, smile }));
        }
        if smiling.is_empty() && non_smiling.is_empty() {
            return Err(FeatureError::bad(
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
                    Ok(files) => load_all(&files, channels, cfg.on_bad_sample, &load_skips)?,
                    Err(e) => {
                        skip_or_fail(cfg.on_bad_sample, &load_skips, e)?;
                        Vec::new()
                    }
                };
                if images.is_empty() && cfg.on_bad_sample == OnBadSample::Error {
                    return Err(FeatureError::bad(
                        dir,
                        None,
                        BadInputKind::EmptyFolder,
                        "no readable background images",
                    ));
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
            max_faces: (*max_faces).min(MAX_BOXES),
            min_face: *min_face,
            max_face: *max_face,
            rotation_deg: *rotation_deg,
            smiling,
            non_smiling,
            backgrounds,
            colour,
            load_skips,
        })
    }

    /// Inputs skipped while loading (under `on_bad_sample = "skip"`).
    pub fn load_skips(&self) -> &SkipCounts {
        &self.load_skips
    }

    /// (smiling, non-smiling) crops in this split.
    pub fn counts(&self) -> (usize, usize) {
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

    fn len(&self) -> Option<usize> {
        Some(self.smiling.len() + self.non_smiling.len())
    }

    fn scene(&self, _index: u64, rng: &mut SampleRng) -> Result<Sample, FeatureError> {
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

/// Scale and rotation of one pasted crop, and the half extents of its face box.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// Output pixels per crop pixel.
    pub scale: f32,
    pub cos: f32,
    pub sin: f32,
    /// Semi-axes of the face ellipse in output pixels.
    pub axis_x: f32,
    pub axis_y: f32,
    pub half_w: f32,
    pub half_h: f32,
}

impl Placement {
    /// `side` is the face's width in output pixels before rotation.
    pub fn new(crop: &Raster, side: f32, angle: f32) -> Placement {
        let scale = side / crop.width as f32;
        let axis_x = side / 2.0;
        let axis_y = crop.height as f32 * scale / 2.0;
        let (sin, cos) = angle.sin_cos();
        // Bounding box of a rotated ellipse: exact, so the box stays tight.
        let half_w = ((axis_x * cos).powi(2) + (axis_y * sin).powi(2)).sqrt();
        let half_h = ((axis_x * sin).powi(2) + (axis_y * cos).powi(2)).sqrt();
        Placement { scale, cos, sin, axis_x, axis_y, half_w, half_h }
    }

    pub fn face_box(&self, cx: f32, cy: f32, smile: Smile) -> FaceBox {
        FaceBox { x0: cx - self.half_w, y0: cy - self.half_h, x1: cx + self.half_w, y1: cy + self.half_h, smile }
    }
}

/// Blends `crop` into `dst` centred at (cx, cy) through a feathered ellipse.
#[allow(clippy::too_many_arguments)]
pub fn paste_face(
    dst: &mut [u8],
    width: u32,
    height: u32,
    channels: u32,
    crop: &Raster,
    p: &Placement,
    cx: f32,
    cy: f32,
) {
    let c = channels as usize;
    debug_assert_eq!(crop.channels, channels);
    let y_start = (cy - p.half_h).floor().max(0.0) as usize;
    let y_end = ((cy + p.half_h).ceil() as usize).min(height as usize);
    let (cw, ch) = (crop.width as usize, crop.height as usize);
    let inv_scale = 1.0 / p.scale;
    let (ia2, ib2) = (1.0 / (p.axis_x * p.axis_x), 1.0 / (p.axis_y * p.axis_y));
    let half_cw = cw as f32 / 2.0 - 0.5;
    let half_ch = ch as f32 / 2.0 - 0.5;
    let (max_x, max_y) = ((cw - 1) as f32, (ch - 1) as f32);
    let row_stride = width as usize * c;
    let src = &crop.pixels;
    // r^2 of the rotated ellipse is a quadratic in dx for a fixed dy:
    // qa dx^2 + qb dx + qc, so each row's span inside it is solved, not searched.
    let qa = p.cos * p.cos * ia2 + p.sin * p.sin * ib2;
    let qb_per_dy = 2.0 * p.cos * p.sin * (ia2 - ib2);
    let qc_per_dy2 = p.sin * p.sin * ia2 + p.cos * p.cos * ib2;
    for y in y_start..y_end {
        let dy = y as f32 + 0.5 - cy;
        let (qb, qc) = (qb_per_dy * dy, qc_per_dy2 * dy * dy);
        let disc = qb * qb - 4.0 * qa * (qc - 1.0);
        if disc <= 0.0 {
            continue;
        }
        let root = disc.sqrt();
        let left = cx + (-qb - root) / (2.0 * qa);
        let right = cx + (-qb + root) / (2.0 * qa);
        let x_start = (left - 0.5).ceil().max(0.0) as usize;
        let x_end = ((right - 0.5).floor() as isize + 1).clamp(0, width as isize) as usize;
        let row = &mut dst[y * row_stride..(y + 1) * row_stride];
        for x in x_start..x_end {
            let dx = x as f32 + 0.5 - cx;
            // Inverse rotation: output pixel -> face frame.
            let u = p.cos * dx + p.sin * dy;
            let v = -p.sin * dx + p.cos * dy;
            let r2 = u * u * ia2 + v * v * ib2;
            if r2 >= 1.0 {
                continue;
            }
            let alpha = ((1.0 - r2.sqrt()) * (1.0 / FEATHER)).min(1.0);
            let sx = (u * inv_scale + half_cw).clamp(0.0, max_x);
            let sy = (v * inv_scale + half_ch).clamp(0.0, max_y);
            let (x0, y0) = (sx as usize, sy as usize);
            let (x1, y1) = ((x0 + 1).min(cw - 1), (y0 + 1).min(ch - 1));
            let (fx, fy) = (sx - x0 as f32, sy - y0 as f32);
            let (i00, i01, i10, i11) = ((y0 * cw + x0) * c, (y0 * cw + x1) * c, (y1 * cw + x0) * c, (y1 * cw + x1) * c);
            for (k, out) in row[x * c..x * c + c].iter_mut().enumerate() {
                let (p00, p01) = (src[i00 + k] as f32, src[i01 + k] as f32);
                let (p10, p11) = (src[i10 + k] as f32, src[i11 + k] as f32);
                let top = p00 + (p01 - p00) * fx;
                let bottom = p10 + (p11 - p10) * fx;
                let face = top + (bottom - top) * fy;
                let bg = *out as f32;
                *out = (bg + (face - bg) * alpha + 0.5) as u8;
            }
        }
    }
}

/// Two octaves of value noise (a coarse and a finer random grid, bilinearly
/// upsampled with half-pixel centres) around a random mean and contrast.
pub fn procedural_background(width: u32, height: u32, channels: u32, colour: bool, rng: &mut SampleRng) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    let mean = 60.0 + rng.random::<f32>() * 130.0;
    let contrast = 40.0 + rng.random::<f32>() * 80.0;
    // field = mean + 2 contrast (0.7 a + 0.3 b - 0.5): the weights are folded
    // into the grids so that a pixel costs two lerps and an add.
    let coarse = Grid::random(w / 40 + 2, h / 40 + 2, 1.4 * contrast, rng).widened(w);
    let fine = Grid::random(w / 10 + 2, h / 10 + 2, 0.6 * contrast, rng).widened(w);
    let base = mean - contrast;
    let tint: [f32; 3] = if colour { std::array::from_fn(|_| 0.7 + rng.random::<f32>() * 0.6) } else { [1.0; 3] };
    let c = channels as usize;
    let mut out = vec![0u8; w * h * c];
    let mut field = vec![0f32; w];
    let (ys_coarse, ys_fine) = (taps(coarse.rows(), h), taps(fine.rows(), h));
    for y in 0..h {
        let (a0, a1, ta) = coarse.rows_at(&ys_coarse[y]);
        let (b0, b1, tb) = fine.rows_at(&ys_fine[y]);
        for ((((f, a0), a1), b0), b1) in field.iter_mut().zip(a0).zip(a1).zip(b0).zip(b1) {
            *f = base + (a0 + (a1 - a0) * ta) + (b0 + (b1 - b0) * tb);
        }
        let row = &mut out[y * w * c..(y + 1) * w * c];
        if c == 1 {
            for (o, f) in row.iter_mut().zip(&field) {
                *o = f.clamp(0.0, 255.0) as u8;
            }
        } else {
            for (px, f) in row.chunks_exact_mut(c).zip(&field) {
                for (k, o) in px.iter_mut().enumerate() {
                    *o = (f * tint[k.min(2)]).clamp(0.0, 255.0) as u8;
                }
            }
        }
    }
    out
}

/// A random grid of values, row-major.
struct Grid {
    width: usize,
    values: Vec<f32>,
}

/// One output coordinate's two neighbours and weight on a grid axis.
#[derive(Clone, Copy)]
struct Tap {
    i0: usize,
    i1: usize,
    t: f32,
}

impl Grid {
    fn random(width: usize, height: usize, scale: f32, rng: &mut SampleRng) -> Grid {
        Grid { width, values: (0..width * height).map(|_| rng.random::<f32>() * scale).collect() }
    }

    fn rows(&self) -> usize {
        self.values.len() / self.width
    }

    /// Every row upsampled to `out` columns: the horizontal half of the
    /// bilinear upsampling, done once per grid row instead of per pixel.
    fn widened(&self, out: usize) -> Grid {
        let xs = taps(self.width, out);
        let values = self
            .values
            .chunks_exact(self.width)
            .flat_map(|row| xs.iter().map(move |t| row[t.i0] + (row[t.i1] - row[t.i0]) * t.t))
            .collect();
        Grid { width: out, values }
    }

    fn rows_at(&self, tap: &Tap) -> (&[f32], &[f32], f32) {
        let w = self.width;
        (&self.values[tap.i0 * w..tap.i0 * w + w], &self.values[tap.i1 * w..tap.i1 * w + w], tap.t)
    }
}

/// Bilinear taps mapping `out` samples onto `n` source samples (half-pixel centres).
fn taps(n: usize, out: usize) -> Vec<Tap> {
    taps_range(n, 0.0, n as f32, out)
}

/// Bilinear taps for `out` samples covering source span [start, start + len).
fn taps_range(n: usize, start: f32, len: f32, out: usize) -> Vec<Tap> {
    let step = len / out as f32;
    (0..out)
        .map(|i| {
            let s = (start + (i as f32 + 0.5) * step - 0.5).clamp(0.0, (n - 1) as f32);
            let i0 = s as usize;
            Tap { i0, i1: (i0 + 1).min(n - 1), t: s - i0 as f32 }
        })
        .collect()
}

/// Bilinear resample of the source span (x, y, w, h) to `out_w` x `out_h`.
pub fn resample_region(src: &Raster, region: [f32; 4], out_w: u32, out_h: u32) -> Vec<u8> {
    let c = src.channels as usize;
    let [rx, ry, rw, rh] = region;
    let xs = taps_range(src.width as usize, rx, rw, out_w as usize);
    let ys = taps_range(src.height as usize, ry, rh, out_h as usize);
    let sw = src.width as usize * c;
    let mut out = Vec::with_capacity(out_w as usize * out_h as usize * c);
    for ty in &ys {
        let (r0, r1) = (&src.pixels[ty.i0 * sw..ty.i0 * sw + sw], &src.pixels[ty.i1 * sw..ty.i1 * sw + sw]);
        for tx in &xs {
            for k in 0..c {
                let at = |row: &[u8], i: usize| row[i * c + k] as f32;
                let top = at(r0, tx.i0) + (at(r0, tx.i1) - at(r0, tx.i0)) * tx.t;
                let bottom = at(r1, tx.i0) + (at(r1, tx.i1) - at(r1, tx.i0)) * tx.t;
                out.push((top + (bottom - top) * ty.t + 0.5) as u8);
            }
        }
    }
    out
}

/// A random region (half to all of the largest one with the output's aspect)
/// of a face-free image, resampled to the output size.
fn random_region(image: &Raster, width: u32, height: u32, rng: &mut SampleRng) -> Vec<u8> {
    let aspect = width as f32 / height as f32;
    let (iw, ih) = (image.width as f32, image.height as f32);
    let (full_w, full_h) = if iw / ih > aspect { (ih * aspect, ih) } else { (iw, iw / aspect) };
    let f = 0.5 + 0.5 * rng.random::<f32>();
    let (rw, rh) = (full_w * f, full_h * f);
    let rx = rng.random::<f32>() * (iw - rw);
    let ry = rng.random::<f32>() * (ih - rh);
    resample_region(image, [rx, ry, rw, rh], width, height)
}

fn log_uniform(rng: &mut SampleRng, lo: f32, hi: f32) -> f32 {
    (lo.ln() + rng.random::<f32>() * (hi.ln() - lo.ln())).exp()
}

/// Share of the smaller box covered by the intersection.
fn overlap_share(a: &FaceBox, b: &FaceBox) -> f32 {
    let iw = (a.x1.min(b.x1) - a.x0.max(b.x0)).max(0.0);
    let ih = (a.y1.min(b.y1) - a.y0.max(b.y0)).max(0.0);
    let area = |f: &FaceBox| (f.x1 - f.x0) * (f.y1 - f.y0);
    iw * ih / area(a).min(area(b)).max(1e-6)
}

fn has_colour(image: &Raster) -> bool {
    image.channels == 3 && image.pixels.chunks_exact(3).any(|p| p[0] != p[1] || p[1] != p[2])
}

/// The split a file belongs to: xxh3 of its file name (not its folder, so a
/// moved dataset keeps its split) mapped onto the configured ratios.
pub fn split_of_name(name: &str, split: &SplitConfig) -> Split {
    let hash = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
    let u = (hash >> 11) as f64 / (1u64 << 53) as f64;
    let total = (split.train + split.val + split.test) as f64;
    if u < split.train as f64 / total {
        Split::Train
    } else if u < (split.train + split.val) as f64 / total {
        Split::Val
    } else {
        Split::Test
    }
}

pub fn split_of_path(path: &Path, split: &SplitConfig) -> Split {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    split_of_name(&name, split)
}

pub fn check_split(split: &SplitConfig) -> Result<(), FeatureError> {
    let parts = [split.train, split.val, split.test];
    if parts.iter().any(|p| !p.is_finite() || *p < 0.0) || parts.iter().sum::<f32>() <= 0.0 {
        return Err(FeatureError::Config(format!(
            "key `features.split`: train/val/test = {}/{}/{} must be non-negative with a positive sum",
            split.train, split.val, split.test
        )));
    }
    Ok(())
}

/// Image files directly in `dir`, sorted so that every machine sees the same order.
pub fn list_images(dir: &Path) -> Result<Vec<PathBuf>, FeatureError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| FeatureError::bad(dir, None, BadInputKind::UnreadableFile, format!("cannot list folder: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| {
            FeatureError::bad(dir, None, BadInputKind::UnreadableFile, format!("cannot list folder: {e}"))
        })?;
        let path = entry.path();
        let is_image = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        if is_image {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(FeatureError::bad(
            dir,
            None,
            BadInputKind::EmptyFolder,
            "no .jpg/.jpeg/.png/.bmp images in folder",
        ));
    }
    files.sort();
    Ok(files)
}

/// Decodes every file in parallel; bad files are counted and left out under
/// `Skip`, and the first bad file (in file order) is the error under `Error`.
pub fn load_all(
    files: &[PathBuf],
    channels: u32,
    on_bad: OnBadSample,
    skips: &SkipCounts,
) -> Result<Vec<Raster>, FeatureError> {
    let decoded: Vec<Result<Raster, FeatureError>> = files.par_iter().map(|p| decode(p, channels)).collect();
    let mut images = Vec::with_capacity(decoded.len());
    for result in decoded {
        match result {
            Ok(image) => images.push(image),
            Err(e) => skip_or_fail(on_bad, skips, e)?,
        }
    }
    Ok(images)
}

/// Under `Skip`, counts a bad input and carries on; otherwise it is the error.
pub fn skip_or_fail(on_bad: OnBadSample, skips: &SkipCounts, error: FeatureError) -> Result<(), FeatureError> {
    match (&error, on_bad) {
        (FeatureError::BadInput { kind, .. }, OnBadSample::Skip) => {
            skips.record(*kind);
            Ok(())
        }
        _ => Err(error),
    }
}

/// Reads and decodes one image into `channels` (1 = luma, 3 = RGB).
pub fn decode(path: &Path, channels: u32) -> Result<Raster, FeatureError> {
    let bytes = std::fs::read(path)
        .map_err(|e| FeatureError::bad(path, None, BadInputKind::UnreadableFile, format!("cannot read: {e}")))?;
    decode_bytes(path, &bytes, channels)
}

pub fn decode_bytes(path: &Path, bytes: &[u8], channels: u32) -> Result<Raster, FeatureError> {
    let corrupt = |message: String| FeatureError::bad(path, None, BadInputKind::CorruptImage, message);
    let format = image::guess_format(bytes).map_err(|e| corrupt(format!("not an image: {e}")))?;
    // The JPEG decoder fills a truncated scan with grey instead of failing;
    // a missing end-of-image marker is how a cut-off file shows.
    if format == image::ImageFormat::Jpeg && !ends_with_jpeg_eoi(bytes) {
        return Err(corrupt("truncated JPEG: no end-of-image marker".into()));
    }
    let image = image::load_from_memory_with_format(bytes, format)
        .map_err(|e| corrupt(format!("corrupt or truncated image: {e}")))?;
    let (width, height) = (image.width(), image.height());
    if width == 0 || height == 0 {
        return Err(corrupt("image has zero size".into()));
    }
    let pixels = match channels {
        1 => image.into_luma8().into_raw(),
        3 => image.into_rgb8().into_raw(),
        n => return Err(FeatureError::Config(format!("key `features.channels`: {n} must be 1 or 3"))),
    };
    Ok(Raster { width, height, channels, pixels })
}

/// EOI (FF D9) among the last bytes: encoders may pad after it, never before.
fn ends_with_jpeg_eoi(bytes: &[u8]) -> bool {
    let tail = &bytes[bytes.len().saturating_sub(64)..];
    tail.windows(2).any(|w| w == [0xFF, 0xD9])
}
