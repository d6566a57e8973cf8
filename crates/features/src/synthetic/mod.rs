//! Procedural scenes: the embedded default source, needing no files.
//!
//! A scene is a textured background, a few face-like distractors (hard
//! negatives) and 0..N cartoon faces. Faces carry the cues a detector must
//! learn (eyes, brows, nose, a mouth) and the smile cue is the mouth's shape,
//! drawn large enough (about 45% of the face width) to survive at 16 px.
//! Everything is drawn with float loops over bounding boxes only, straight
//! into the sample's pixel buffer.

mod canvas;
mod faces;
mod textures;

use crate::config::{check_size, FeatureConfig, SourceConfig};
use crate::sample::{FaceBox, Sample, Smile};
use crate::source::{log_uniform, uniform as uni, SampleRng, Source};
use canvas::{Canvas, Ellipse};
use faces::{draw_face, draw_negative, draw_occluder, FaceSpec};
use grin_image::InputError;
use grin_terms::boxes::{area, intersection, iou};
use rand::Rng;
use textures::render_background;

/// Knobs of the synthetic generator; the first four come from the config.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticParams {
    pub max_faces: usize,
    pub min_face: f32,
    pub max_face: f32,
    /// Expected number of face-like distractors per scene.
    pub hard_negatives: f32,
    /// Probability that a scene has no face at all.
    pub face_free: f32,
    /// Probability that a face is partly covered by an occluder.
    pub occlusion: f32,
}

impl Default for SyntheticParams {
    fn default() -> Self {
        SyntheticParams {
            max_faces: 4,
            min_face: 16.0,
            max_face: 160.0,
            hard_negatives: 1.0,
            face_free: 0.15,
            occlusion: 0.2,
        }
    }
}

/// Procedural face scenes at a fixed output size.
#[derive(Debug, Clone)]
pub struct SyntheticSource {
    width: u32,
    height: u32,
    channels: u32,
    params: SyntheticParams,
}

impl SyntheticSource {
    /// Builds the source from `cfg.source` when it is `synthetic`, else from
    /// the default parameters (so that other sources can borrow its scenes).
    pub(crate) fn new(cfg: &FeatureConfig) -> Result<Self, InputError> {
        let params = match &cfg.source {
            SourceConfig::Synthetic { max_faces, min_face, max_face, hard_negatives } => SyntheticParams {
                max_faces: *max_faces,
                min_face: *min_face,
                max_face: *max_face,
                hard_negatives: *hard_negatives,
                ..SyntheticParams::default()
            },
            _ => SyntheticParams::default(),
        };
        Self::with_params(cfg.width, cfg.height, cfg.channels, params)
    }

    pub fn with_params(width: u32, height: u32, channels: u32, params: SyntheticParams) -> Result<Self, InputError> {
        check_size(width, height, channels)?;
        let p = &params;
        SourceConfig::Synthetic {
            max_faces: p.max_faces,
            min_face: p.min_face,
            max_face: p.max_face,
            hard_negatives: p.hard_negatives,
        }
        .validate()?;
        Ok(SyntheticSource { width, height, channels, params })
    }

    /// One scene drawn from `rng` alone.
    pub(crate) fn generate(&self, rng: &mut SampleRng) -> Sample {
        let (w, h, c) = (self.width as usize, self.height as usize, self.channels as usize);
        let mut pixels = vec![0u8; w * h * c];
        let mut canvas = Canvas { px: &mut pixels, w, h, c };
        render_background(&mut canvas, rng);

        let faces = self.place_faces(rng);
        let negatives = self.place_negatives(rng, &faces);
        for n in &negatives {
            draw_negative(&mut canvas, n, rng);
        }
        for f in &faces {
            draw_face(&mut canvas, f);
            if let Some(o) = &f.occluder {
                draw_occluder(&mut canvas, o);
            }
        }
        let boxes = faces
            .iter()
            .map(|f| {
                let [x0, y0, x1, y1] = f.ell.bbox();
                FaceBox {
                    x0: x0.max(0.0),
                    y0: y0.max(0.0),
                    x1: x1.min(w as f32),
                    y1: y1.min(h as f32),
                    smile: if f.smiling { Smile::Yes } else { Smile::No },
                }
            })
            .collect();
        Sample { width: self.width, height: self.height, channels: self.channels, pixels, boxes }
    }

    /// Face height range that fits this image, log-uniform between the bounds.
    fn size_range(&self) -> (f32, f32) {
        let fit = 0.9 * self.width.min(self.height) as f32;
        let hi = self.params.max_face.min(fit);
        let lo = self.params.min_face.min(hi);
        (lo, hi)
    }

    fn random_ellipse(&self, rng: &mut SampleRng, aspect: (f32, f32), max_angle: f32) -> Ellipse {
        let (lo, hi) = self.size_range();
        let height = log_uniform(rng, lo, hi);
        let b = height / 2.0;
        let a = b * uni(rng, aspect.0, aspect.1);
        let angle = uni(rng, -max_angle, max_angle).to_radians();
        let mut e = Ellipse { cx: 0.0, cy: 0.0, a, b, sin: angle.sin(), cos: angle.cos() };
        let (ex, ey) = e.half_extent();
        let (w, h) = (self.width as f32, self.height as f32);
        e.cx = uni(rng, ex, (w - ex).max(ex));
        e.cy = uni(rng, ey, (h - ey).max(ey));
        e
    }

    fn place_faces(&self, rng: &mut SampleRng) -> Vec<FaceSpec> {
        let p = &self.params;
        let mut faces: Vec<FaceSpec> = Vec::new();
        if p.max_faces == 0 || rng.random::<f32>() < p.face_free {
            return faces;
        }
        let n = rng.random_range(1..=p.max_faces);
        for _ in 0..n {
            for _attempt in 0..12 {
                let ell = self.random_ellipse(rng, (0.7, 0.9), 15.0);
                let bb = ell.bbox();
                // Beyond the IoU rule, a small face must not sit on a big one's features.
                if faces.iter().all(|f| iou(bb, f.ell.bbox()) <= 0.3 && cover_fraction(bb, f.ell.bbox()) <= 0.3) {
                    faces.push(FaceSpec::random(ell, p.occlusion, rng));
                    break;
                }
            }
        }
        faces
    }

    fn place_negatives(&self, rng: &mut SampleRng, faces: &[FaceSpec]) -> Vec<Ellipse> {
        let n = poisson(rng, self.params.hard_negatives);
        let mut out: Vec<Ellipse> = Vec::with_capacity(n);
        for _ in 0..n {
            for _attempt in 0..8 {
                let ell = self.random_ellipse(rng, (0.6, 1.1), 40.0);
                let bb = ell.bbox();
                // Distractors must not hide or reshape a labelled face.
                if faces.iter().all(|f| iou(bb, f.ell.bbox()) == 0.0) {
                    out.push(ell);
                    break;
                }
            }
        }
        out
    }
}

impl Source for SyntheticSource {
    fn name(&self) -> &'static str {
        "synthetic"
    }

    fn len(&self) -> Option<usize> {
        None
    }

    fn scene(&self, _index: u64, rng: &mut SampleRng) -> Result<Sample, InputError> {
        Ok(self.generate(rng))
    }
}

fn poisson(rng: &mut SampleRng, mean: f32) -> usize {
    // Knuth's method: means here are a handful at most.
    let limit = (-mean).exp();
    let mut k = 0;
    let mut p = rng.random::<f32>();
    while p > limit && k < 64 {
        k += 1;
        p *= rng.random::<f32>();
    }
    k
}

/// Intersection over the smaller box's area.
fn cover_fraction(a: [f32; 4], b: [f32; 4]) -> f32 {
    let smaller = area(a).min(area(b));
    if smaller <= 0.0 {
        0.0
    } else {
        intersection(a, b) / smaller
    }
}

#[cfg(test)]
mod tests;
