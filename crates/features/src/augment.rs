//! Train-time augmentations, each with its own probability from
//! [`AugmentConfig`]. Geometric stages keep the boxes consistent with the
//! pixels; photometric stages go through 256-entry lookup tables.
//!
//! Every stage is a small function over a [`Sample`] so that a bench can time
//! stages one by one through [`apply_stage`].

use crate::config::AugmentConfig;
use crate::error::FeatureError;
use crate::sample::{FaceBox, Sample};
use crate::source::SampleRng;
use crate::synthetic::to_u8;
use rand::Rng;
use std::cell::RefCell;

/// Stage names in the order [`augment`] applies them.
pub const STAGES: &[&str] = &["crop", "rotate", "flip", "brightness", "contrast", "gamma", "blur", "noise", "jpeg"];

/// Boxes narrower or shorter than this (px) after a geometric stage are dropped:
/// nothing below it is a learnable face.
pub const MIN_BOX_SIDE: f32 = 2.0;

thread_local! {
    /// A pixel buffer per worker thread, swapped with the sample's so that
    /// resampling stages allocate only on a thread's first sample.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Float planes for the blur's two passes, reused the same way.
    static SCRATCH_F32: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Checks ranges, naming the offending key.
pub fn validate(cfg: &AugmentConfig) -> Result<(), FeatureError> {
    let probabilities = [
        ("flip", cfg.flip),
        ("crop", cfg.crop),
        ("rotate", cfg.rotate),
        ("brightness", cfg.brightness),
        ("contrast", cfg.contrast),
        ("gamma", cfg.gamma),
        ("blur", cfg.blur),
        ("noise", cfg.noise),
        ("jpeg", cfg.jpeg),
    ];
    for (key, p) in probabilities {
        if !(0.0..=1.0).contains(&p) {
            return Err(bad_key(key, format!("must be a probability in 0..=1, got {p}")));
        }
    }
    let ranges = [
        ("crop_scale", cfg.crop_scale, 0.1, 4.0),
        ("contrast_range", cfg.contrast_range, 0.0, 10.0),
        ("gamma_range", cfg.gamma_range, 0.05, 10.0),
        ("blur_sigma", cfg.blur_sigma, 0.0, 20.0),
    ];
    for (key, (lo, hi), min, max) in ranges {
        if !(lo.is_finite() && hi.is_finite() && min <= lo && lo <= hi && hi <= max) {
            return Err(bad_key(key, format!("must be [lo, hi] with {min} <= lo <= hi <= {max}, got [{lo}, {hi}]")));
        }
    }
    let scalars = [
        ("crop_drop_fraction", cfg.crop_drop_fraction, 0.0, 1.0),
        ("rotate_deg", cfg.rotate_deg, 0.0, 90.0),
        ("brightness_delta", cfg.brightness_delta, 0.0, 1.0),
        ("noise_sigma", cfg.noise_sigma, 0.0, 128.0),
    ];
    for (key, v, min, max) in scalars {
        if !(v.is_finite() && (min..=max).contains(&v)) {
            return Err(bad_key(key, format!("must be in {min}..={max}, got {v}")));
        }
    }
    let (qlo, qhi) = cfg.jpeg_quality;
    if !(1 <= qlo && qlo <= qhi && qhi <= 100) {
        return Err(bad_key("jpeg_quality", format!("must be [lo, hi] with 1 <= lo <= hi <= 100, got [{qlo}, {qhi}]")));
    }
    Ok(())
}

fn bad_key(key: &str, message: String) -> FeatureError {
    FeatureError::Config(format!("features.augment.{key} {message}"))
}

fn probability(cfg: &AugmentConfig, stage: &str) -> f32 {
    match stage {
        "crop" => cfg.crop,
        "rotate" => cfg.rotate,
        "flip" => cfg.flip,
        "brightness" => cfg.brightness,
        "contrast" => cfg.contrast,
        "gamma" => cfg.gamma,
        "blur" => cfg.blur,
        "noise" => cfg.noise,
        "jpeg" => cfg.jpeg,
        _ => 0.0,
    }
}

/// Applies every stage with its probability, in [`STAGES`] order.
///
/// One coin is drawn per stage whether or not it fires, so that changing one
/// probability does not reshuffle the other stages' randomness.
pub fn augment(sample: &mut Sample, cfg: &AugmentConfig, rng: &mut SampleRng) -> Result<(), FeatureError> {
    for stage in STAGES {
        let coin: f32 = rng.random();
        if coin < probability(cfg, stage) {
            apply_stage(stage, sample, cfg, rng)?;
        }
    }
    Ok(())
}

/// Runs one stage unconditionally (its probability is not consulted), so a
/// bench can time each stage's real cost.
pub fn apply_stage(
    name: &str,
    sample: &mut Sample,
    cfg: &AugmentConfig,
    rng: &mut SampleRng,
) -> Result<(), FeatureError> {
    match name {
        "crop" => {
            let s = uniform(rng, cfg.crop_scale.0, cfg.crop_scale.1);
            let (w, h) = (sample.width as f32, sample.height as f32);
            let (cw, ch) = (s * w, s * h);
            // When zooming out (s > 1) the window starts left of / above the image.
            let ox = uniform(rng, 0.0f32.min(w - cw), 0.0f32.max(w - cw));
            let oy = uniform(rng, 0.0f32.min(h - ch), 0.0f32.max(h - ch));
            crop(sample, [ox, oy, ox + cw, oy + ch], cfg.crop_drop_fraction);
        }
        "rotate" => {
            let deg = uniform(rng, -cfg.rotate_deg, cfg.rotate_deg);
            rotate(sample, deg, cfg.crop_drop_fraction);
        }
        "flip" => flip(sample),
        "brightness" => {
            let delta = uniform(rng, -cfg.brightness_delta, cfg.brightness_delta) * 255.0;
            brightness(sample, delta);
        }
        "contrast" => contrast(sample, uniform(rng, cfg.contrast_range.0, cfg.contrast_range.1)),
        "gamma" => gamma(sample, uniform(rng, cfg.gamma_range.0, cfg.gamma_range.1)),
        "blur" => blur(sample, uniform(rng, cfg.blur_sigma.0, cfg.blur_sigma.1)),
        "noise" => {
            // Sensor noise level varies between shots, up to the configured sigma.
            let sigma = uniform(rng, 0.3, 1.0) * cfg.noise_sigma;
            noise(sample, sigma, rng);
        }
        "jpeg" => {
            let q = rng.random_range(cfg.jpeg_quality.0..=cfg.jpeg_quality.1);
            jpeg(sample, q)?;
        }
        other => {
            return Err(FeatureError::Config(format!(
                "unknown augmentation stage '{other}' (known: {})",
                STAGES.join(", ")
            )))
        }
    }
    Ok(())
}

fn uniform(rng: &mut SampleRng, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * rng.random::<f32>()
}

/// Mirrors the image left to right; a box `[x0, x1)` becomes `[W - x1, W - x0)`.
pub fn flip(sample: &mut Sample) {
    let (w, c) = (sample.width as usize, sample.channels as usize);
    for row in sample.pixels.chunks_exact_mut(w * c) {
        if c == 1 {
            row.reverse();
        } else {
            for x in 0..w / 2 {
                let (l, r) = (x * c, (w - 1 - x) * c);
                for k in 0..c {
                    row.swap(l + k, r + k);
                }
            }
        }
    }
    let wf = sample.width as f32;
    for b in &mut sample.boxes {
        let (x0, x1) = (wf - b.x1, wf - b.x0);
        b.x0 = x0;
        b.x1 = x1;
    }
}

/// Cuts `window` (`[x0, y0, x1, y1]` in pixels, may reach outside the image,
/// where edge pixels repeat) and scales it back to the sample size with
/// bilinear sampling. Boxes follow; a box losing more than `drop_fraction` of
/// its area to the window edge is dropped, the others are clipped.
pub fn crop(sample: &mut Sample, window: [f32; 4], drop_fraction: f32) {
    let (w, h) = (sample.width as f32, sample.height as f32);
    let sx = (window[2] - window[0]) / w;
    let sy = (window[3] - window[1]) / h;
    resample_axis_aligned(sample, window[0], window[1], sx, sy);
    let map = |b: &FaceBox| FaceBox {
        x0: (b.x0 - window[0]) / sx,
        y0: (b.y0 - window[1]) / sy,
        x1: (b.x1 - window[0]) / sx,
        y1: (b.y1 - window[1]) / sy,
        smile: b.smile,
    };
    let boxes: Vec<FaceBox> = sample.boxes.iter().map(map).collect();
    sample.boxes = keep_visible(boxes, w, h, drop_fraction);
}

/// Rotates the image by `degrees` (counter-clockwise on screen) about its
/// centre; uncovered corners repeat the edge pixels.
///
/// Face boxes are tight boxes of roughly elliptical faces, so the new box is
/// the bounding box of the rotated inscribed ellipse: rotating the corners
/// would inflate every box by up to `sin(angle)` of the other side.
pub fn rotate(sample: &mut Sample, degrees: f32, drop_fraction: f32) {
    let (w, h) = (sample.width as f32, sample.height as f32);
    let (cx, cy) = (w / 2.0, h / 2.0);
    let (sin, cos) = degrees.to_radians().sin_cos();
    // Output pixel p comes from R(-angle) (p - c) + c; on screen (y down) a
    // positive angle turns the content counter-clockwise.
    resample(sample, |x, y| {
        let (dx, dy) = (x - cx, y - cy);
        (cx + dx * cos - dy * sin, cy + dx * sin + dy * cos)
    });
    let boxes: Vec<FaceBox> = sample
        .boxes
        .iter()
        .map(|b| {
            let (bx, by) = ((b.x0 + b.x1) / 2.0 - cx, (b.y0 + b.y1) / 2.0 - cy);
            // Forward map is the inverse of the sampling map above.
            let (nx, ny) = (cx + bx * cos + by * sin, cy - bx * sin + by * cos);
            let (a, e) = ((b.x1 - b.x0) / 2.0, (b.y1 - b.y0) / 2.0);
            let hx = (a * a * cos * cos + e * e * sin * sin).sqrt();
            let hy = (a * a * sin * sin + e * e * cos * cos).sqrt();
            FaceBox { x0: nx - hx, y0: ny - hy, x1: nx + hx, y1: ny + hy, smile: b.smile }
        })
        .collect();
    sample.boxes = keep_visible(boxes, w, h, drop_fraction);
}

/// Clips boxes to the image, dropping those that lose more than
/// `drop_fraction` of their area or end up thinner than [`MIN_BOX_SIDE`].
fn keep_visible(boxes: Vec<FaceBox>, w: f32, h: f32, drop_fraction: f32) -> Vec<FaceBox> {
    boxes
        .into_iter()
        .filter_map(|b| {
            let area = (b.x1 - b.x0) * (b.y1 - b.y0);
            let c = FaceBox { x0: b.x0.max(0.0), y0: b.y0.max(0.0), x1: b.x1.min(w), y1: b.y1.min(h), smile: b.smile };
            let (cw, ch) = (c.x1 - c.x0, c.y1 - c.y0);
            if cw < MIN_BOX_SIDE || ch < MIN_BOX_SIDE || area <= 0.0 {
                return None;
            }
            let lost = 1.0 - cw * ch / area;
            (lost <= drop_fraction).then_some(c)
        })
        .collect()
}

/// Bilinear taps along one axis for output coordinate `o`: source position
/// `start + (o + 0.5) * step - 0.5`, clamped to the edge.
fn axis_taps(n_out: usize, n_src: usize, start: f32, step: f32) -> impl Iterator<Item = (usize, usize, f32)> {
    let max = (n_src - 1) as f32;
    (0..n_out).map(move |o| {
        let f = (start + (o as f32 + 0.5) * step - 0.5).clamp(0.0, max);
        let i0 = f as usize;
        (i0, (i0 + 1).min(n_src - 1), f - i0 as f32)
    })
}

/// Axis-aligned resampling of the window starting at `(x0, y0)` with
/// `(sx, sy)` source pixels per output pixel: the taps are computed once per
/// column and once per row instead of once per pixel.
fn resample_axis_aligned(sample: &mut Sample, x0: f32, y0: f32, sx: f32, sy: f32) {
    // A compile-time channel count lets the inner loop unroll.
    if sample.channels == 1 {
        resample_axis_aligned_c::<1>(sample, x0, y0, sx, sy)
    } else {
        resample_axis_aligned_c::<3>(sample, x0, y0, sx, sy)
    }
}

fn resample_axis_aligned_c<const C: usize>(sample: &mut Sample, x0: f32, y0: f32, sx: f32, sy: f32) {
    let (w, h, c) = (sample.width as usize, sample.height as usize, C);
    let cols: Vec<(usize, usize, f32)> = axis_taps(w, w, x0, sx).collect();
    SCRATCH.with(|scratch| {
        let mut out = scratch.borrow_mut();
        out.clear();
        out.resize(w * h * c, 0);
        let src = &sample.pixels;
        for ((ya, yb, ty), dst) in axis_taps(h, h, y0, sy).zip(out.chunks_exact_mut(w * c)) {
            let (ra, rb) = (&src[ya * w * c..(ya + 1) * w * c], &src[yb * w * c..(yb + 1) * w * c]);
            for (x, &(xa, xb, tx)) in cols.iter().enumerate() {
                for k in 0..c {
                    let (a0, a1) = (ra[xa * c + k] as f32, ra[xb * c + k] as f32);
                    let (b0, b1) = (rb[xa * c + k] as f32, rb[xb * c + k] as f32);
                    let top = a0 + (a1 - a0) * tx;
                    let bottom = b0 + (b1 - b0) * tx;
                    dst[x * c + k] = to_u8(top + (bottom - top) * ty);
                }
            }
        }
        std::mem::swap(&mut *out, &mut sample.pixels);
    });
}

/// Rebuilds every output pixel from the source position `map(x, y)` (pixel
/// centres, in pixels) with bilinear sampling and edge clamping.
fn resample(sample: &mut Sample, map: impl Fn(f32, f32) -> (f32, f32)) {
    if sample.channels == 1 {
        resample_c::<1>(sample, map)
    } else {
        resample_c::<3>(sample, map)
    }
}

fn resample_c<const C: usize>(sample: &mut Sample, map: impl Fn(f32, f32) -> (f32, f32)) {
    let (w, h, c) = (sample.width as usize, sample.height as usize, C);
    SCRATCH.with(|scratch| {
        let mut out = scratch.borrow_mut();
        out.clear();
        out.resize(w * h * c, 0);
        let src = &sample.pixels;
        let (maxx, maxy) = ((w - 1) as f32, (h - 1) as f32);
        for y in 0..h {
            for x in 0..w {
                let (fx, fy) = map(x as f32 + 0.5, y as f32 + 0.5);
                let fx = (fx - 0.5).clamp(0.0, maxx);
                let fy = (fy - 0.5).clamp(0.0, maxy);
                let (x0, y0) = (fx as usize, fy as usize);
                let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
                let (tx, ty) = (fx - x0 as f32, fy - y0 as f32);
                let (i00, i01) = ((y0 * w + x0) * c, (y0 * w + x1) * c);
                let (i10, i11) = ((y1 * w + x0) * c, (y1 * w + x1) * c);
                let o = (y * w + x) * c;
                for k in 0..c {
                    let top = src[i00 + k] as f32 + (src[i01 + k] as f32 - src[i00 + k] as f32) * tx;
                    let bottom = src[i10 + k] as f32 + (src[i11 + k] as f32 - src[i10 + k] as f32) * tx;
                    out[o + k] = to_u8(top + (bottom - top) * ty);
                }
            }
        }
        std::mem::swap(&mut *out, &mut sample.pixels);
    });
}

fn apply_lut(sample: &mut Sample, lut: &[u8; 256]) {
    for p in &mut sample.pixels {
        *p = lut[*p as usize];
    }
}

fn lut_from(f: impl Fn(f32) -> f32) -> [u8; 256] {
    let mut lut = [0u8; 256];
    for (i, v) in lut.iter_mut().enumerate() {
        *v = f(i as f32).round().clamp(0.0, 255.0) as u8;
    }
    lut
}

/// Adds `delta` (in 0..255 units) to every pixel.
pub fn brightness(sample: &mut Sample, delta: f32) {
    apply_lut(sample, &lut_from(|v| v + delta));
}

/// Scales every pixel's distance from the image mean by `factor`.
pub fn contrast(sample: &mut Sample, factor: f32) {
    let n = sample.pixels.len().max(1) as f64;
    let mean = (sample.pixels.iter().map(|&p| p as u64).sum::<u64>() as f64 / n) as f32;
    apply_lut(sample, &lut_from(|v| mean + (v - mean) * factor));
}

/// `255 * (v / 255)^gamma`.
pub fn gamma(sample: &mut Sample, gamma: f32) {
    apply_lut(sample, &lut_from(|v| 255.0 * (v / 255.0).powf(gamma)));
}

/// Separable gaussian blur with edge clamping; radius `ceil(3 sigma)`.
///
/// Both passes are written as "add one shifted row times one tap" over whole
/// rows (edges padded by repetition), which the compiler vectorises.
pub fn blur(sample: &mut Sample, sigma: f32) {
    if sigma < 0.05 {
        return;
    }
    let (w, h, c) = (sample.width as usize, sample.height as usize, sample.channels as usize);
    let radius = (3.0 * sigma).ceil() as usize;
    let mut kernel: Vec<f32> = (0..=2 * radius)
        .map(|i| {
            let d = i as f32 - radius as f32;
            (-(d * d) / (2.0 * sigma * sigma)).exp()
        })
        .collect();
    let sum: f32 = kernel.iter().sum();
    kernel.iter_mut().for_each(|k| *k /= sum);
    let row_len = w * c;
    let pad = radius * c;
    SCRATCH_F32.with(|scratch| {
        let (padded, plane) = &mut *scratch.borrow_mut();
        padded.clear();
        padded.resize(row_len + 2 * pad, 0.0);
        plane.clear();
        plane.resize(h * row_len, 0.0);
        for (src, out) in sample.pixels.chunks_exact(row_len).zip(plane.chunks_exact_mut(row_len)) {
            for x in 0..radius {
                for k in 0..c {
                    padded[x * c + k] = src[k] as f32;
                    padded[pad + row_len + x * c + k] = src[row_len - c + k] as f32;
                }
            }
            for (d, s) in padded[pad..pad + row_len].iter_mut().zip(src) {
                *d = *s as f32;
            }
            for (j, kv) in kernel.iter().enumerate() {
                for (o, s) in out.iter_mut().zip(&padded[j * c..j * c + row_len]) {
                    *o += kv * s;
                }
            }
        }
        let acc = &mut padded[..row_len];
        for (y, dst) in sample.pixels.chunks_exact_mut(row_len).enumerate() {
            acc.fill(0.0);
            for (j, kv) in kernel.iter().enumerate() {
                let sy = (y + j).saturating_sub(radius).min(h - 1);
                for (a, s) in acc.iter_mut().zip(&plane[sy * row_len..(sy + 1) * row_len]) {
                    *a += kv * s;
                }
            }
            for (d, a) in dst.iter_mut().zip(acc.iter()) {
                *d = to_u8(*a);
            }
        }
    });
}

/// Adds zero-mean gaussian noise of `sigma` to every pixel value.
///
/// The normal deviate is the Irwin–Hall sum of four 16-bit uniforms cut from
/// one `u64`: one rng call per pixel instead of a log, a root and a cosine,
/// and visually indistinguishable from true gaussian noise.
pub fn noise(sample: &mut Sample, sigma: f32, rng: &mut SampleRng) {
    // Sum of 4 U(0,1) has mean 2 and variance 1/3.
    let k = sigma * 3f32.sqrt() / 65536.0;
    let centre = 2.0 * 65536.0;
    for p in &mut sample.pixels {
        let r: u64 = rng.random();
        let s = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
        let n = (s as f32 - centre) * k;
        *p = to_u8(*p as f32 + n);
    }
}

/// Re-compresses the image as a JPEG of `quality` (1..=100) and decodes it back.
pub fn jpeg(sample: &mut Sample, quality: u8) -> Result<(), FeatureError> {
    use image::codecs::jpeg::{JpegDecoder, JpegEncoder};
    use image::{ExtendedColorType, ImageDecoder};
    let colour = if sample.channels == 1 { ExtendedColorType::L8 } else { ExtendedColorType::Rgb8 };
    let fail = |e: image::ImageError| FeatureError::Config(format!("jpeg augmentation failed: {e}"));
    let mut encoded = Vec::with_capacity(sample.pixels.len() / 4);
    JpegEncoder::new_with_quality(&mut encoded, quality.clamp(1, 100))
        .encode(&sample.pixels, sample.width, sample.height, colour)
        .map_err(fail)?;
    let decoder = JpegDecoder::new(std::io::Cursor::new(&encoded)).map_err(fail)?;
    if decoder.total_bytes() != sample.pixels.len() as u64 {
        return Err(FeatureError::Config(format!(
            "jpeg augmentation decoded {} bytes for a {}-byte image",
            decoder.total_bytes(),
            sample.pixels.len()
        )));
    }
    decoder.read_image(&mut sample.pixels).map_err(fail)?;
    Ok(())
}
