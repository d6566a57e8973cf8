//! Face-free scenes that teach "not a face" (`kind = "negatives"`): the
//! false detections a detector makes are of a few kinds (a box on dark
//! blobs and textures, on graphic shapes: card suits, drawings, printed
//! text, pairs of dark dots), and a detector trainer has bootstrapped its
//! negatives since Viola-Jones. Three supplies:
//!
//! - `images`: face-free images (photos, textures, wallpapers), split by
//!   file name like every source; a scene is a random region of one;
//! - `mined`: the false detections `grin mine` cut, with their context,
//!   from training photos: training scenes only, whatever their names.
//!   A crop is shown whole, at the scale it was mined: a random region of
//!   it would zoom the false detection up to twice its size, or cut it out;
//! - `graphics`: procedural shapes drawn on a texture or an image region.

use crate::annotations::{keyed, not_also};
use crate::config::{FeatureConfig, SourceConfig, Split};
use crate::crops::background::{procedural_background, random_region, region_of, usual_share};
use crate::sample::Sample;
use crate::source::{SampleRng, Source};
use crate::split::split_of_path;
use grin_image::{list_images, load_all, resample_region, skip_or_fail, InputError, Raster, SkipCounts};
use rand::Rng;
use std::path::{Path, PathBuf};

/// The file `grin mine` keeps in its folder while it writes crops there,
/// removed once its `mined.jsonl` is written: a mining stopped midway left
/// part of its crops, which training read as the whole (round 14 of
/// issue 90). A `mined` folder holding it is refused.
pub const MINING_MARK: &str = "mining-unfinished.txt";

pub(crate) struct NegativesSource {
    width: u32,
    height: u32,
    channels: u32,
    images: Vec<Raster>,
    /// `grin mine`'s crops, each a whole scene.
    mined: Vec<Raster>,
    graphics: f32,
    zoom_in: f32,
    /// The images of this split and the mined crops, as listed.
    files: Vec<PathBuf>,
    load_skips: SkipCounts,
}

impl std::fmt::Debug for NegativesSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NegativesSource")
            .field("images", &self.images.len())
            .field("mined", &self.mined.len())
            .field("graphics", &self.graphics)
            .finish()
    }
}

impl NegativesSource {
    pub(crate) fn new(cfg: &FeatureConfig, split: Split) -> Result<NegativesSource, InputError> {
        cfg.source.validate()?;
        let SourceConfig::Negatives { images, mined, graphics, zoom_in } = &cfg.source else {
            return Err(InputError::Config("NegativesSource needs `kind = \"negatives\"`".into()));
        };
        let load_skips = SkipCounts::default();
        let bound = cfg.image_bound()?;
        let mut files = Vec::new();
        let mut all_images = Vec::new();
        if let Some(dir) = images {
            all_images = list_images(dir)?;
            files.extend(all_images.iter().filter(|p| split_of_path(p, &cfg.split) == split).cloned());
        }
        let mut mined_files = Vec::new();
        // Mined crops come from training photos: they train, and are never held out.
        if let (Some(dir), Split::Train) = (mined, split) {
            let mark = dir.join(MINING_MARK);
            if mark.exists() {
                return Err(InputError::Config(format!(
                    "{}: a grin mine into this folder did not finish (it was stopped, or runs now), so its crops \
                     are not all there: run it again",
                    mark.display()
                )));
            }
            match list_images(dir) {
                // A mined crop trains whatever its name: an image of `images`
                // there (`mined` = `images`, a link) was trained on when held
                // out, and scored as held out (round 27 of issue 90).
                Ok(listed) => {
                    let why = "a file is an image or a mined crop, and mined crops train whatever their split";
                    let images = keyed(&all_images);
                    mined_files = not_also(listed, &images, "the image", why, cfg.on_bad_sample, &load_skips)?;
                }
                Err(e) => skip_or_fail(cfg.on_bad_sample, &load_skips, e)?,
            }
        }
        let images = load_all(&files, cfg.channels, bound, cfg.on_bad_sample, &load_skips)?;
        let mined = load_all(&mined_files, cfg.channels, bound, cfg.on_bad_sample, &load_skips)?;
        files.extend(mined_files);
        Ok(NegativesSource {
            width: cfg.width,
            height: cfg.height,
            channels: cfg.channels,
            images,
            mined,
            graphics: *graphics,
            zoom_in: *zoom_in,
            files,
            load_skips,
        })
    }

    fn background(&self, rng: &mut SampleRng) -> Vec<u8> {
        if self.images.is_empty() && self.mined.is_empty() || rng.random::<f32>() < 0.5 {
            procedural_background(self.width, self.height, self.channels, self.channels == 3, rng)
        } else {
            self.image_region(rng)
        }
    }

    /// One of the images or mined crops (there is at least one), drawn
    /// uniformly over both: a random region of an image (a close one at
    /// `zoom_in`), a mined crop whole (resampled only if it was mined at
    /// another size).
    fn image_region(&self, rng: &mut SampleRng) -> Vec<u8> {
        let i = rng.random_range(0..self.images.len() + self.mined.len());
        match self.images.get(i) {
            // No draw when off: configs without `zoom_in` keep their random stream, scene for scene.
            Some(image) if self.zoom_in > 0.0 && rng.random::<f32>() < self.zoom_in => {
                close_region(image, self.width, self.height, rng)
            }
            Some(image) => random_region(image, self.width, self.height, rng),
            None => {
                let crop = &self.mined[i - self.images.len()];
                let whole = [0.0, 0.0, crop.width as f32, crop.height as f32];
                resample_region(crop, whole, self.width, self.height)
            }
        }
    }
}

/// A region of `image` from half the scene's size up to half the image
/// (where the usual regions start), log-uniform (each scale as likely), so
/// that a small image is enlarged too, as grin-detect enlarges it; a usual
/// region where the image is too small for that range.
fn close_region(image: &Raster, width: u32, height: u32, rng: &mut SampleRng) -> Vec<u8> {
    region_of(image, width, height, rng, |full_w, rng| {
        let smallest = width as f32 / 2.0 / full_w;
        if smallest >= 0.5 {
            usual_share(rng)
        } else {
            smallest * (0.5 / smallest).powf(rng.random::<f32>())
        }
    })
}

impl Source for NegativesSource {
    fn name(&self) -> &'static str {
        "negatives"
    }

    fn files(&self) -> Vec<&Path> {
        self.files.iter().map(PathBuf::as_path).collect()
    }

    fn len(&self) -> Option<usize> {
        None
    }

    fn scene(&self, _index: u64, rng: &mut SampleRng) -> Result<Sample, InputError> {
        let drawn = self.images.is_empty() && self.mined.is_empty() || rng.random::<f32>() < self.graphics;
        let pixels = if drawn {
            let mut pixels = self.background(rng);
            draw_graphics(&mut pixels, self.width as usize, self.height as usize, self.channels as usize, rng);
            pixels
        } else {
            self.image_region(rng)
        };
        Ok(Sample { width: self.width, height: self.height, channels: self.channels, pixels, boxes: vec![] })
    }

    fn load_skips(&self) -> Option<&SkipCounts> {
        Some(&self.load_skips)
    }
}

/// The shapes behind graphic false detections.
#[derive(Debug, Clone, Copy)]
enum Shape {
    Heart,
    Diamond,
    Club,
    Spade,
    /// Two dots side by side: the "eyes" a detector sees everywhere.
    DotPair,
    /// A die's pips.
    Pips,
    Ring,
    Ellipse,
    Bar,
    /// A row of glyph-like strokes, as printed text.
    Glyphs,
}

const SHAPES: [Shape; 10] = [
    Shape::Heart,
    Shape::Diamond,
    Shape::Club,
    Shape::Spade,
    Shape::DotPair,
    Shape::Pips,
    Shape::Ring,
    Shape::Ellipse,
    Shape::Bar,
    Shape::Glyphs,
];

fn circle(x: f32, y: f32, cx: f32, cy: f32, r: f32) -> f32 {
    ((x - cx).powi(2) + (y - cy).powi(2)).sqrt() - r
}

fn rect(x: f32, y: f32, cx: f32, cy: f32, hw: f32, hh: f32) -> f32 {
    let (dx, dy) = ((x - cx).abs() - hw, (y - cy).abs() - hh);
    dx.max(dy).min(0.0) + (dx.max(0.0).powi(2) + dy.max(0.0).powi(2)).sqrt()
}

/// Signed distance (in units of the shape's half size, negative inside) at
/// `(x, y)` in the shape's own frame; `seed` varies glyphs and pips.
fn distance(shape: Shape, x: f32, y: f32, seed: u32) -> f32 {
    match shape {
        Shape::Heart => {
            let lobes = circle(x, y, -0.45, -0.3, 0.5).min(circle(x, y, 0.45, -0.3, 0.5));
            lobes.min((x.abs() + (y + 0.05) * 0.95 - 0.85) * 0.7).max(y - 0.9)
        }
        Shape::Diamond => (x.abs() * 1.4 + y.abs() - 1.0) * 0.58,
        Shape::Club => {
            let lobes =
                circle(x, y, 0.0, -0.45, 0.38).min(circle(x, y, -0.42, 0.1, 0.38)).min(circle(x, y, 0.42, 0.1, 0.38));
            lobes.min(rect(x, y, 0.0, 0.6, 0.1, 0.35))
        }
        Shape::Spade => {
            let lobes = circle(x, y, -0.42, 0.2, 0.45).min(circle(x, y, 0.42, 0.2, 0.45));
            let top = ((x.abs() - (y + 0.1) * -0.95 - 0.85) * 0.7).max(-y - 0.95);
            lobes.min(top).min(rect(x, y, 0.0, 0.7, 0.1, 0.3))
        }
        Shape::DotPair => circle(x.abs(), y, 0.45, 0.0, 0.22 + 0.1 * (seed % 3) as f32),
        Shape::Pips => {
            let n = 2 + seed % 5;
            let spots: &[(f32, f32)] = match n {
                2 => &[(-0.5, -0.5), (0.5, 0.5)],
                3 => &[(-0.5, -0.5), (0.0, 0.0), (0.5, 0.5)],
                4 => &[(-0.5, -0.5), (0.5, -0.5), (-0.5, 0.5), (0.5, 0.5)],
                5 => &[(-0.5, -0.5), (0.5, -0.5), (0.0, 0.0), (-0.5, 0.5), (0.5, 0.5)],
                _ => &[(-0.5, -0.6), (0.5, -0.6), (-0.5, 0.0), (0.5, 0.0), (-0.5, 0.6), (0.5, 0.6)],
            };
            spots.iter().map(|&(cx, cy)| circle(x, y, cx, cy, 0.2)).fold(f32::INFINITY, f32::min)
        }
        Shape::Ring => circle(x, y, 0.0, 0.0, 0.75).abs() - 0.12,
        Shape::Ellipse => (((x / 1.0).powi(2) + (y / 0.6).powi(2)).sqrt() - 1.0) * 0.6,
        Shape::Bar => rect(x, y, 0.0, 0.0, 1.0, 0.18),
        Shape::Glyphs => {
            // Six strokes of seeded widths and heights along a line.
            (0..6u32)
                .map(|k| {
                    let h = (seed.wrapping_mul(2654435761).wrapping_add(k * 40503) >> 7) % 100;
                    let cx = -0.85 + 0.34 * k as f32;
                    rect(x, y, cx, 0.0, 0.06 + 0.06 * (h % 3) as f32, 0.2 + 0.25 * (h as f32 / 100.0))
                })
                .fold(f32::INFINITY, f32::min)
        }
    }
}

/// Draws one to five shapes, each at a random place, size (8 px to 60% of
/// the shorter side), angle and ink (dark or light, any contrast), with
/// anti-aliased edges.
fn draw_graphics(pixels: &mut [u8], width: usize, height: usize, channels: usize, rng: &mut SampleRng) {
    let shapes = rng.random_range(1..=5);
    for _ in 0..shapes {
        let shape = SHAPES[rng.random_range(0..SHAPES.len())];
        let half = rng.random_range(4.0..(0.3 * width.min(height) as f32).max(5.0));
        let (cx, cy) = (rng.random::<f32>() * width as f32, rng.random::<f32>() * height as f32);
        let angle = rng.random_range(-0.5f32..0.5);
        let (sin, cos) = angle.sin_cos();
        let dark = rng.random::<bool>();
        let ink: [f32; 3] =
            std::array::from_fn(|_| if dark { rng.random_range(0.0..70.0) } else { rng.random_range(180.0..255.0) });
        let grey = ink.iter().sum::<f32>() / 3.0;
        let opacity = rng.random_range(0.6f32..1.0);
        let seed = rng.random::<u32>();
        let reach = half * 1.5;
        let (x0, x1) = ((cx - reach).max(0.0) as usize, ((cx + reach).ceil() as usize).min(width));
        let (y0, y1) = ((cy - reach).max(0.0) as usize, ((cy + reach).ceil() as usize).min(height));
        for y in y0..y1 {
            for x in x0..x1 {
                let (dx, dy) = ((x as f32 + 0.5 - cx) / half, (y as f32 + 0.5 - cy) / half);
                let (lx, ly) = (cos * dx + sin * dy, -sin * dx + cos * dy);
                // The distance in pixels, then a one-pixel ramp for the edge.
                let d = distance(shape, lx, ly, seed) * half;
                let alpha = (0.5 - d).clamp(0.0, 1.0) * opacity;
                if alpha <= 0.0 {
                    continue;
                }
                let at = (y * width + x) * channels;
                for (c, p) in pixels[at..at + channels].iter_mut().enumerate() {
                    let target = if channels == 1 { grey } else { ink[c] };
                    *p = (*p as f32 * (1.0 - alpha) + target * alpha).round().clamp(0.0, 255.0) as u8;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
