//! Photometric stages: pixel values change, boxes stay. Tone changes go
//! through 256-entry lookup tables.

use crate::sample::Sample;
use crate::source::SampleRng;
use grin_image::{to_u8, InputError};
use rand::Rng;
use std::cell::RefCell;

thread_local! {
    /// Float planes for the blur's two passes, reused by each worker thread
    /// so that blurring allocates only on a thread's first sample.
    static SCRATCH_F32: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
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
pub(crate) fn brightness(sample: &mut Sample, delta: f32) {
    apply_lut(sample, &lut_from(|v| v + delta));
}

/// Scales every pixel's distance from the image mean by `factor`.
pub(crate) fn contrast(sample: &mut Sample, factor: f32) {
    let n = sample.pixels.len().max(1) as f64;
    let mean = (sample.pixels.iter().map(|&p| p as u64).sum::<u64>() as f64 / n) as f32;
    apply_lut(sample, &lut_from(|v| mean + (v - mean) * factor));
}

/// `255 * (v / 255)^gamma`.
pub(crate) fn gamma(sample: &mut Sample, gamma: f32) {
    apply_lut(sample, &lut_from(|v| 255.0 * (v / 255.0).powf(gamma)));
}

/// Separable gaussian blur with edge clamping; radius `ceil(3 sigma)`.
///
/// Both passes are written as "add one shifted row times one tap" over whole
/// rows (edges padded by repetition), which the compiler vectorises.
pub(crate) fn blur(sample: &mut Sample, sigma: f32) {
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
pub(crate) fn noise(sample: &mut Sample, sigma: f32, rng: &mut SampleRng) {
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
pub(crate) fn jpeg(sample: &mut Sample, quality: u8) -> Result<(), InputError> {
    use image::codecs::jpeg::{JpegDecoder, JpegEncoder};
    use image::{ExtendedColorType, ImageDecoder};
    let colour = if sample.channels == 1 { ExtendedColorType::L8 } else { ExtendedColorType::Rgb8 };
    let fail = |e: image::ImageError| InputError::Config(format!("jpeg augmentation failed: {e}"));
    let mut encoded = Vec::with_capacity(sample.pixels.len() / 4);
    JpegEncoder::new_with_quality(&mut encoded, quality.clamp(1, 100))
        .encode(&sample.pixels, sample.width, sample.height, colour)
        .map_err(fail)?;
    let decoder = JpegDecoder::new(std::io::Cursor::new(&encoded)).map_err(fail)?;
    if decoder.total_bytes() != sample.pixels.len() as u64 {
        return Err(InputError::Config(format!(
            "jpeg augmentation decoded {} bytes for a {}-byte image",
            decoder.total_bytes(),
            sample.pixels.len()
        )));
    }
    decoder.read_image(&mut sample.pixels).map_err(fail)?;
    Ok(())
}
