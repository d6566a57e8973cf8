//! Procedural scenes: the embedded default source, needing no files.
//!
//! A scene is a textured background, a few face-like distractors (hard
//! negatives) and 0..N cartoon faces. Faces carry the cues a detector must
//! learn (eyes, brows, nose, a mouth) and the smile cue is the mouth's shape,
//! drawn large enough (about 45% of the face width) to survive at 16 px.
//! Everything is drawn with float loops over bounding boxes only, straight
//! into the sample's pixel buffer.

use crate::config::{FeatureConfig, SourceConfig};
use crate::error::FeatureError;
use crate::sample::{FaceBox, Sample, Smile, MAX_BOXES};
use crate::source::{SampleRng, Source};
use rand::Rng;

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
    pub fn new(cfg: &FeatureConfig) -> Result<Self, FeatureError> {
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

    pub fn with_params(width: u32, height: u32, channels: u32, params: SyntheticParams) -> Result<Self, FeatureError> {
        check_size(width, height, channels)?;
        let p = &params;
        if !(p.min_face.is_finite() && p.min_face >= 4.0) {
            return Err(FeatureError::Config(format!(
                "features.source.min_face must be at least 4 px, got {}",
                p.min_face
            )));
        }
        if !(p.max_face.is_finite() && p.max_face >= p.min_face) {
            return Err(FeatureError::Config(format!(
                "features.source.max_face must be at least min_face ({}), got {}",
                p.min_face, p.max_face
            )));
        }
        if !(p.hard_negatives.is_finite() && (0.0..=64.0).contains(&p.hard_negatives)) {
            return Err(FeatureError::Config(format!(
                "features.source.hard_negatives must be in 0..=64, got {}",
                p.hard_negatives
            )));
        }
        if p.max_faces > MAX_BOXES {
            return Err(FeatureError::Config(format!(
                "features.source.max_faces must be at most {MAX_BOXES}, got {}",
                p.max_faces
            )));
        }
        Ok(SyntheticSource { width, height, channels, params })
    }

    pub fn params(&self) -> &SyntheticParams {
        &self.params
    }

    /// One scene drawn from `rng` alone.
    pub fn generate(&self, rng: &mut SampleRng) -> Sample {
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
                let (x0, y0, x1, y1) = f.ell.bbox();
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
        let height = (uni(rng, lo.ln(), hi.ln())).exp();
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

    fn scene(&self, _index: u64, rng: &mut SampleRng) -> Result<Sample, FeatureError> {
        Ok(self.generate(rng))
    }
}

/// Sizes every source accepts: 1 or 3 channels and room for the smallest face.
pub fn check_size(width: u32, height: u32, channels: u32) -> Result<(), FeatureError> {
    if channels != 1 && channels != 3 {
        return Err(FeatureError::Config(format!("features.channels must be 1 or 3, got {channels}")));
    }
    if !(16..=8192).contains(&width) {
        return Err(FeatureError::Config(format!("features.width must be in 16..=8192, got {width}")));
    }
    if !(16..=8192).contains(&height) {
        return Err(FeatureError::Config(format!("features.height must be in 16..=8192, got {height}")));
    }
    Ok(())
}

fn uni(rng: &mut SampleRng, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * rng.random::<f32>()
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

fn iou(a: (f32, f32, f32, f32), b: (f32, f32, f32, f32)) -> f32 {
    let iw = (a.2.min(b.2) - a.0.max(b.0)).max(0.0);
    let ih = (a.3.min(b.3) - a.1.max(b.1)).max(0.0);
    let inter = iw * ih;
    let union = (a.2 - a.0) * (a.3 - a.1) + (b.2 - b.0) * (b.3 - b.1) - inter;
    if union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// Intersection over the smaller box's area.
fn cover_fraction(a: (f32, f32, f32, f32), b: (f32, f32, f32, f32)) -> f32 {
    let iw = (a.2.min(b.2) - a.0.max(b.0)).max(0.0);
    let ih = (a.3.min(b.3) - a.1.max(b.1)).max(0.0);
    let smaller = ((a.2 - a.0) * (a.3 - a.1)).min((b.2 - b.0) * (b.3 - b.1));
    if smaller <= 0.0 {
        0.0
    } else {
        iw * ih / smaller
    }
}

type Rgb = [f32; 3];

fn scale(c: Rgb, k: f32) -> Rgb {
    [c[0] * k, c[1] * k, c[2] * k]
}

fn mix(a: Rgb, b: Rgb, t: f32) -> Rgb {
    [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t]
}

fn random_color(rng: &mut SampleRng) -> Rgb {
    [uni(rng, 0.0, 255.0), uni(rng, 0.0, 255.0), uni(rng, 0.0, 255.0)]
}

/// Skin tones from dark brown to pale, with a little hue jitter.
fn skin_color(rng: &mut SampleRng) -> Rgb {
    let t = rng.random::<f32>();
    let base = mix([70.0, 45.0, 32.0], [245.0, 210.0, 185.0], t);
    let j = uni(rng, 0.9, 1.1);
    [(base[0] * j).min(255.0), base[1], (base[2] / j).min(255.0)]
}

/// Rounds to the nearest byte. `as u8` saturates (and maps NaN to 0), so no
/// clamp is needed, and it avoids `f32::round`, a libm call on baseline x86-64.
#[inline]
pub fn to_u8(v: f32) -> u8 {
    (v + 0.5) as u8
}

/// Coverage of a pixel whose centre is `d` px outside a shape edge (negative inside).
#[inline]
fn cover(d: f32) -> f32 {
    (0.5 - d).clamp(0.0, 1.0)
}

#[inline]
fn segment_distance(px: f32, py: f32, ax: f32, ay: f32, bx: f32, by: f32) -> f32 {
    let (dx, dy) = (bx - ax, by - ay);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 { (((px - ax) * dx + (py - ay) * dy) / len2).clamp(0.0, 1.0) } else { 0.0 };
    let (qx, qy) = (ax + t * dx - px, ay + t * dy - py);
    (qx * qx + qy * qy).sqrt()
}

/// The sample's pixels seen as a drawing surface.
pub struct Canvas<'a> {
    pub px: &'a mut [u8],
    pub w: usize,
    pub h: usize,
    pub c: usize,
}

impl Canvas<'_> {
    #[inline]
    fn blend(&mut self, x: usize, y: usize, col: Rgb, alpha: f32) {
        let i = (y * self.w + x) * self.c;
        if self.c == 1 {
            let l = 0.299 * col[0] + 0.587 * col[1] + 0.114 * col[2];
            let p = &mut self.px[i];
            *p = to_u8(*p as f32 + (l - *p as f32) * alpha);
        } else {
            for (k, v) in col.iter().enumerate() {
                let p = &mut self.px[i + k];
                *p = to_u8(*p as f32 + (v - *p as f32) * alpha);
            }
        }
    }

    /// Clipped integer pixel range covering `[x0, x1) x [y0, y1)`.
    fn clip(&self, x0: f32, y0: f32, x1: f32, y1: f32) -> (usize, usize, usize, usize) {
        let cx = |v: f32| (v.max(0.0) as usize).min(self.w);
        let cy = |v: f32| (v.max(0.0) as usize).min(self.h);
        (cx(x0.floor()), cy(y0.floor()), cx(x1.ceil()), cy(y1.ceil()))
    }
}

/// A rotated ellipse: centre, half axes (px) and rotation.
#[derive(Debug, Clone, Copy)]
struct Ellipse {
    cx: f32,
    cy: f32,
    a: f32,
    b: f32,
    sin: f32,
    cos: f32,
}

impl Ellipse {
    fn half_extent(&self) -> (f32, f32) {
        let (a2, b2) = (self.a * self.a, self.b * self.b);
        let (s2, c2) = (self.sin * self.sin, self.cos * self.cos);
        ((a2 * c2 + b2 * s2).sqrt(), (a2 * s2 + b2 * c2).sqrt())
    }

    fn bbox(&self) -> (f32, f32, f32, f32) {
        let (ex, ey) = self.half_extent();
        (self.cx - ex, self.cy - ey, self.cx + ex, self.cy + ey)
    }

    /// Pixel centre (x, y) in the ellipse's own frame, px.
    #[inline]
    fn local(&self, x: usize, y: usize) -> (f32, f32) {
        let dx = x as f32 + 0.5 - self.cx;
        let dy = y as f32 + 0.5 - self.cy;
        (dx * self.cos + dy * self.sin, -dx * self.sin + dy * self.cos)
    }
}

/// How a mouth is drawn, in the face's frame (px), centred on `(ox, my)`.
#[derive(Debug, Clone, Copy)]
enum Mouth {
    /// A stroke along `y = my + depth * (1 - (x/hw)^2) - depth/2`: corners up when depth > 0.
    Arc { hw: f32, depth: f32, thick: f32 },
    /// A filled open smile between two such curves.
    Open { hw: f32, depth: f32, thick: f32 },
    /// A small round open mouth (not smiling).
    Oval { rx: f32, ry: f32 },
}

#[derive(Debug, Clone, Copy)]
struct Occluder {
    x0: f32,
    y0: f32,
    x1: f32,
    y1: f32,
    c0: Rgb,
    c1: Rgb,
    period: f32,
}

#[derive(Debug, Clone)]
struct FaceSpec {
    ell: Ellipse,
    smiling: bool,
    skin: Rgb,
    dark: Rgb,
    lips: Rgb,
    hair: Option<(f32, Rgb)>,
    rim: f32,
    yaw: f32,
    eye: (f32, f32),
    brow_tilt: f32,
    mouth: Mouth,
    my: f32,
    occluder: Option<Occluder>,
}

impl FaceSpec {
    fn random(ell: Ellipse, occlusion: f32, rng: &mut SampleRng) -> FaceSpec {
        let (a, b) = (ell.a, ell.b);
        let skin = skin_color(rng);
        let smiling = rng.random::<f32>() < 0.5;
        let stroke = (0.055 * b * 2.0).max(1.0);
        let mouth = if smiling {
            let hw = 0.45 * a * uni(rng, 0.95, 1.15);
            let depth = hw * uni(rng, 0.45, 0.65);
            if rng.random::<f32>() < 0.5 {
                Mouth::Arc { hw, depth, thick: stroke }
            } else {
                Mouth::Open { hw, depth: depth * 1.2, thick: stroke }
            }
        } else {
            let r = rng.random::<f32>();
            if r < 0.15 {
                Mouth::Oval { rx: (0.14 * a).max(1.0), ry: (0.1 * b).max(1.0) }
            } else {
                let hw = 0.45 * a * uni(rng, 0.7, 1.0);
                // Flat to slightly frowning: well away from the smile's curvature.
                let depth = -hw * uni(rng, -0.05, 0.25);
                Mouth::Arc { hw, depth, thick: stroke }
            }
        };
        let hair = if rng.random::<f32>() < 0.6 {
            Some((uni(rng, -0.7, -0.45), scale(random_color(rng), uni(rng, 0.2, 0.6))))
        } else {
            None
        };
        let occluder = if rng.random::<f32>() < occlusion { Some(random_occluder(&ell, rng)) } else { None };
        FaceSpec {
            ell,
            smiling,
            skin,
            dark: scale(skin, uni(rng, 0.15, 0.3)),
            lips: mix(scale(skin, 0.3), [120.0, 20.0, 30.0], uni(rng, 0.0, 0.5)),
            hair,
            rim: (0.06 * b).max(0.8),
            yaw: uni(rng, -0.12, 0.12) * a,
            eye: ((0.15 * a).max(0.9), (0.1 * b).max(0.8)),
            brow_tilt: uni(rng, -0.05, 0.05) * b,
            mouth,
            my: uni(rng, 0.42, 0.5) * b,
            occluder,
        }
    }
}

/// A textured rectangle over one side or the top of the face, at most ~30% of its box.
fn random_occluder(ell: &Ellipse, rng: &mut SampleRng) -> Occluder {
    let (x0, y0, x1, y1) = ell.bbox();
    let (bw, bh) = (x1 - x0, y1 - y0);
    let frac = uni(rng, 0.15, 0.3);
    let (ox0, oy0, ox1, oy1) = match rng.random_range(0..3) {
        0 => (x0 - 0.1 * bw, y0 + 0.05 * bh, x0 + frac * bw, y1 - 0.05 * bh),
        1 => (x1 - frac * bw, y0 + 0.05 * bh, x1 + 0.1 * bw, y1 - 0.05 * bh),
        _ => (x0 + 0.05 * bw, y0 - 0.1 * bh, x1 - 0.05 * bw, y0 + frac * bh),
    };
    Occluder {
        x0: ox0,
        y0: oy0,
        x1: ox1,
        y1: oy1,
        c0: random_color(rng),
        c1: random_color(rng),
        period: uni(rng, 2.0, 8.0),
    }
}

fn draw_occluder(canvas: &mut Canvas, o: &Occluder) {
    let (x0, y0, x1, y1) = canvas.clip(o.x0, o.y0, o.x1, o.y1);
    let inv = 1.0 / o.period;
    for y in y0..y1 {
        for x in x0..x1 {
            let f = ((x + y) as f32 * inv).fract();
            let col = if f < 0.5 { o.c0 } else { o.c1 };
            canvas.blend(x, y, col, 1.0);
        }
    }
}

/// Mouth curve height at `x` (px from the mouth centre), relative to `my`.
#[inline]
fn mouth_curve(x: f32, hw: f32, depth: f32) -> f32 {
    let u = x / hw;
    depth * (1.0 - u * u) - 0.5 * depth
}

/// Distance (px) from (x, y) to the mouth curve stroke's centre line.
#[inline]
fn curve_distance(x: f32, y: f32, hw: f32, depth: f32) -> f32 {
    let xc = x.clamp(-hw, hw);
    let dy = y - mouth_curve(xc, hw, depth);
    let ex = x - xc;
    if ex != 0.0 {
        (ex * ex + dy * dy).sqrt()
    } else {
        let slope = -2.0 * depth * xc / (hw * hw);
        dy.abs() / (1.0 + slope * slope).sqrt()
    }
}

fn draw_face(canvas: &mut Canvas, f: &FaceSpec) {
    let e = &f.ell;
    let (bx0, by0, bx1, by1) = e.bbox();
    let (x0, y0, x1, y1) = canvas.clip(bx0 - 1.0, by0 - 1.0, bx1 + 1.0, by1 + 1.0);
    let (a, b) = (e.a, e.b);
    let minab = a.min(b);
    let (erx, ery) = f.eye;
    let eye_x = 0.38 * a;
    let eye_y = -0.12 * b;
    let brow_y = -0.32 * b;
    let brow_hw = 0.2 * a;
    let brow_t = (0.05 * b).max(0.6);
    let nose_t = (0.035 * b).max(0.5);
    let brow_reach = f.brow_tilt.abs() + brow_t + 1.0;
    let (nose_y0, nose_y1) = (-0.02 * b - nose_t - 1.0, 0.2 * b + nose_t + 1.0);
    let nose_reach = 0.04 * a + nose_t + 1.0;
    let mouth_reach = match f.mouth {
        Mouth::Arc { hw, depth, thick } | Mouth::Open { hw, depth, thick } => {
            (hw + thick + 1.0, depth.abs() + thick + 1.0)
        }
        Mouth::Oval { rx, ry } => (rx + 1.0, ry + 1.0),
    };
    for y in y0..y1 {
        for x in x0..x1 {
            let (lx, ly) = e.local(x, y);
            let (nx, ny) = (lx / a, ly / b);
            let r2 = nx * nx + ny * ny;
            let r = r2.sqrt();
            let edge = (r - 1.0) * minab;
            let alpha = cover(edge);
            if alpha <= 0.0 {
                continue;
            }
            let mut col = scale(f.skin, 1.0 - 0.25 * r2);
            if let Some((hairline, hair)) = f.hair {
                if ny < hairline - 0.2 * nx * nx {
                    col = hair;
                }
            }
            col = mix(col, scale(col, 0.55), cover(-(edge + f.rim)));
            let fx = lx - f.yaw;
            // Each feature is evaluated only near its own rows: most face pixels are plain skin.
            let sx = fx.abs() - eye_x;
            if (ly - eye_y).abs() < ery + 1.0 {
                let ed = ((sx / erx).powi(2) + ((ly - eye_y) / ery).powi(2)).sqrt();
                col = mix(col, f.dark, cover((ed - 1.0) * erx.min(ery)));
            }
            if (ly - brow_y).abs() < brow_reach {
                let bd = segment_distance(sx, ly, -brow_hw, brow_y + f.brow_tilt, brow_hw, brow_y - f.brow_tilt);
                col = mix(col, f.dark, cover(bd - brow_t));
            }
            if ly > nose_y0 && ly < nose_y1 && fx.abs() < nose_reach {
                let nd = segment_distance(fx, ly, 0.0, -0.02 * b, 0.04 * a, 0.2 * b);
                col = mix(col, scale(f.skin, 0.6), 0.7 * cover(nd - nose_t));
            }
            let my = ly - f.my;
            if my.abs() < mouth_reach.1 && fx.abs() < mouth_reach.0 {
                match f.mouth {
                    Mouth::Arc { hw, depth, thick } => {
                        let d = curve_distance(fx, my, hw, depth);
                        col = mix(col, f.lips, cover(d - 0.5 * thick));
                    }
                    Mouth::Open { hw, depth, thick } => {
                        let lower = curve_distance(fx, my, hw, depth);
                        let upper_depth = 0.3 * depth;
                        let inside = fx.abs() < hw
                            && my > mouth_curve(fx, hw, upper_depth) + 0.2 * depth
                            && my < mouth_curve(fx, hw, depth);
                        let m = if inside { 1.0 } else { cover(lower - 0.5 * thick) };
                        col = mix(col, scale(f.lips, 0.6), m);
                    }
                    Mouth::Oval { rx, ry } => {
                        let od = ((fx / rx).powi(2) + (my / ry).powi(2)).sqrt();
                        col = mix(col, scale(f.lips, 0.6), cover((od - 1.0) * rx.min(ry)));
                    }
                }
            }
            canvas.blend(x, y, col, alpha);
        }
    }
}

/// A round or face-coloured thing that is not a face.
fn draw_negative(canvas: &mut Canvas, e: &Ellipse, rng: &mut SampleRng) {
    let kind = rng.random_range(0..3);
    let base = if kind == 1 { random_color(rng) } else { skin_color(rng) };
    let rim = if rng.random::<f32>() < 0.5 { (0.06 * e.b).max(0.8) } else { 0.0 };
    // Ball highlight position in the normalised frame.
    let (hx, hy, hr) = (uni(rng, -0.5, 0.5), uni(rng, -0.6, -0.2), uni(rng, 0.12, 0.3));
    let mut marks = [(0.0f32, 0.0f32, 0.0f32); 3];
    let n_marks = if kind == 2 { rng.random_range(1..=3) } else { 0 };
    for m in marks.iter_mut().take(n_marks) {
        *m = (uni(rng, -0.6, 0.6), uni(rng, -0.6, 0.6), uni(rng, 0.06, 0.18));
    }
    let mark_col = scale(base, uni(rng, 0.2, 0.5));
    let (bx0, by0, bx1, by1) = e.bbox();
    let (x0, y0, x1, y1) = canvas.clip(bx0 - 1.0, by0 - 1.0, bx1 + 1.0, by1 + 1.0);
    let minab = e.a.min(e.b);
    for y in y0..y1 {
        for x in x0..x1 {
            let (lx, ly) = e.local(x, y);
            let (nx, ny) = (lx / e.a, ly / e.b);
            let r2 = nx * nx + ny * ny;
            let edge = (r2.sqrt() - 1.0) * minab;
            let alpha = cover(edge);
            if alpha <= 0.0 {
                continue;
            }
            let mut col = scale(base, 1.0 - 0.3 * r2);
            if rim > 0.0 {
                col = mix(col, scale(col, 0.55), cover(-(edge + rim)));
            }
            if kind == 1 {
                let (dx, dy) = (nx - hx, ny - hy);
                let hd = (dx * dx + dy * dy).sqrt() / hr;
                col = mix(col, [250.0, 250.0, 250.0], (1.0 - hd).clamp(0.0, 1.0));
            }
            for &(mx, my, mr) in marks.iter().take(n_marks) {
                let md = (((nx - mx).powi(2) + (ny - my).powi(2)).sqrt() - mr) * minab;
                col = mix(col, mark_col, cover(md));
            }
            canvas.blend(x, y, col, alpha);
        }
    }
}

/// Fills the whole canvas with a procedural texture (gradient, value noise,
/// stripes or checker) plus random rectangles and lines. Public so that
/// compositing sources can reuse it for their backgrounds.
pub fn render_background(canvas: &mut Canvas, rng: &mut SampleRng) {
    let (w, h) = (canvas.w, canvas.h);
    let c0 = random_color(rng);
    let mut c1 = random_color(rng);
    // Keep some texture contrast, but leave faces the strongest edges.
    if (c0[0] - c1[0]).abs() + (c0[1] - c1[1]).abs() + (c0[2] - c1[2]).abs() < 60.0 {
        c1 = [255.0 - c0[0], 255.0 - c0[1], 255.0 - c0[2]];
    }
    let texture = match rng.random_range(0..5) {
        kind @ (0 | 1) => {
            // Value noise, two octaves; kind 1 adds a gradient.
            let cell = uni(rng, 8.0, 48.0);
            let coarse = NoiseGrid::new(w, h, cell, rng);
            let fine = NoiseGrid::new(w, h, cell / 3.0, rng);
            let (gx, gy) =
                if kind == 1 { (uni(rng, -1.0, 1.0) / w as f32, uni(rng, -1.0, 1.0) / h as f32) } else { (0.0, 0.0) };
            Texture::Noise { coarse, fine, gx, gy }
        }
        2 => {
            let ang = uni(rng, 0.0, std::f32::consts::PI);
            let span = w.max(h) as f32;
            Texture::Gradient { dx: ang.cos() / span, dy: ang.sin() / span, off: 0.5 + uni(rng, -0.5, 0.5) }
        }
        3 => {
            let period = uni(rng, 4.0, 40.0);
            let ang = uni(rng, 0.0, std::f32::consts::PI);
            Texture::Stripes { dx: ang.cos() / period, dy: ang.sin() / period }
        }
        _ => Texture::Checker { cell: rng.random_range(4..32usize) },
    };
    fill(canvas, c0, c1, &texture);
    let n = rng.random_range(0..=6);
    for _ in 0..n {
        let col = random_color(rng);
        let (x0, y0) = (uni(rng, 0.0, w as f32), uni(rng, 0.0, h as f32));
        if rng.random::<f32>() < 0.5 {
            let (rw, rh) = (uni(rng, 4.0, w as f32 / 3.0), uni(rng, 4.0, h as f32 / 3.0));
            let (px0, py0, px1, py1) = canvas.clip(x0, y0, x0 + rw, y0 + rh);
            for y in py0..py1 {
                for x in px0..px1 {
                    canvas.blend(x, y, col, 1.0);
                }
            }
        } else {
            let (x1, y1) = (uni(rng, 0.0, w as f32), uni(rng, 0.0, h as f32));
            let t = uni(rng, 0.5, 3.0);
            let (px0, py0, px1, py1) = canvas.clip(x0.min(x1) - t, y0.min(y1) - t, x0.max(x1) + t, y0.max(y1) + t);
            for y in py0..py1 {
                for x in px0..px1 {
                    let d = segment_distance(x as f32 + 0.5, y as f32 + 0.5, x0, y0, x1, y1);
                    let alpha = cover(d - t * 0.5);
                    if alpha > 0.0 {
                        canvas.blend(x, y, col, alpha);
                    }
                }
            }
        }
    }
}

enum Texture {
    Noise { coarse: NoiseGrid, fine: NoiseGrid, gx: f32, gy: f32 },
    Gradient { dx: f32, dy: f32, off: f32 },
    Stripes { dx: f32, dy: f32 },
    Checker { cell: usize },
}

impl Texture {
    /// The texture value in 0..=1 for every pixel of row `y`.
    fn row(&self, y: usize, out: &mut [f32], scratch: &mut Vec<f32>) {
        let yf = y as f32;
        match self {
            Texture::Noise { coarse, fine, gx, gy } => {
                coarse.row(y, out, 0.7, false, scratch);
                fine.row(y, out, 0.3, true, scratch);
                for (x, v) in out.iter_mut().enumerate() {
                    *v = (*v + gx * x as f32 + gy * yf).clamp(0.0, 1.0);
                }
            }
            Texture::Gradient { dx, dy, off } => {
                for (x, v) in out.iter_mut().enumerate() {
                    *v = (off + dx * x as f32 + dy * yf).clamp(0.0, 1.0);
                }
            }
            Texture::Stripes { dx, dy } => {
                for (x, v) in out.iter_mut().enumerate() {
                    let f = (dx * x as f32 + dy * yf).rem_euclid(1.0);
                    *v = (2.0 * f - 1.0).abs();
                }
            }
            Texture::Checker { cell } => {
                for (x, v) in out.iter_mut().enumerate() {
                    *v = ((x / cell + y / cell) & 1) as f32;
                }
            }
        }
    }
}

/// Writes `mix(c0, c1, texture)` everywhere.
fn fill(canvas: &mut Canvas, c0: Rgb, c1: Rgb, texture: &Texture) {
    let (w, c) = (canvas.w, canvas.c);
    let g0 = 0.299 * c0[0] + 0.587 * c0[1] + 0.114 * c0[2];
    let g1 = 0.299 * c1[0] + 0.587 * c1[1] + 0.114 * c1[2];
    let mut t = vec![0f32; w];
    let mut scratch = Vec::new();
    for (y, row) in canvas.px.chunks_exact_mut(w * c).enumerate() {
        texture.row(y, &mut t, &mut scratch);
        if c == 1 {
            for (p, v) in row.iter_mut().zip(&t) {
                *p = (g0 + (g1 - g0) * v) as u8;
            }
        } else {
            for (p, v) in row.chunks_exact_mut(3).zip(&t) {
                for k in 0..3 {
                    p[k] = (c0[k] + (c1[k] - c0[k]) * v) as u8;
                }
            }
        }
    }
}

/// Lattice of random values, bilinearly interpolated with a smoothstep.
struct NoiseGrid {
    values: Vec<f32>,
    cols: usize,
    inv_cell: f32,
    /// Per column: lattice column and smoothed weight, computed once.
    xs: Vec<(usize, f32)>,
}

fn smooth(t: f32) -> f32 {
    t * t * (3.0 - 2.0 * t)
}

impl NoiseGrid {
    fn new(w: usize, h: usize, cell: f32, rng: &mut SampleRng) -> NoiseGrid {
        let cell = cell.max(2.0);
        let inv_cell = 1.0 / cell;
        let cols = (w as f32 * inv_cell) as usize + 2;
        let rows = (h as f32 * inv_cell) as usize + 2;
        let values = (0..cols * rows).map(|_| rng.random::<f32>()).collect();
        let xs = (0..w)
            .map(|x| {
                let f = x as f32 * inv_cell;
                (f as usize, smooth(f - f.floor()))
            })
            .collect();
        NoiseGrid { values, cols, inv_cell, xs }
    }

    /// `out = weight * noise(row y)`, or `out += ...` when `add`.
    fn row(&self, y: usize, out: &mut [f32], weight: f32, add: bool, scratch: &mut Vec<f32>) {
        let f = y as f32 * self.inv_cell;
        let (iy, sy) = (f as usize, smooth(f - f.floor()));
        let (top, bottom) = (&self.values[iy * self.cols..], &self.values[(iy + 1) * self.cols..]);
        scratch.clear();
        scratch.extend((0..self.cols).map(|j| weight * (top[j] + (bottom[j] - top[j]) * sy)));
        for (v, &(ix, sx)) in out.iter_mut().zip(&self.xs) {
            let n = scratch[ix] + (scratch[ix + 1] - scratch[ix]) * sx;
            *v = if add { *v + n } else { n };
        }
    }
}
