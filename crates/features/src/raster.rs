//! A decoded image and the resampling every source shares.

/// A decoded image: `channels` interleaved u8 planes, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Raster {
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub pixels: Vec<u8>,
}

impl Raster {
    /// A decoded image as `channels` (1: luma, 3: RGB) interleaved u8
    /// planes; luma is the image crate's conversion, for every reader alike.
    ///
    /// # Panics
    /// On another channel count: configs and model headers are checked for
    /// 1 or 3 when they are loaded, long before an image is read.
    pub fn from_image(image: &image::DynamicImage, channels: u32) -> Raster {
        let (width, height) = (image.width(), image.height());
        let pixels = match channels {
            1 => image.to_luma8().into_raw(),
            3 => image.to_rgb8().into_raw(),
            n => panic!("{n} channels: images become 1 (luma) or 3 (RGB)"),
        };
        Raster { width, height, channels, pixels }
    }
}

/// Rounds to the nearest byte. `as u8` saturates (and maps NaN to 0), so no
/// clamp is needed, and it avoids `f32::round`, a libm call on baseline x86-64.
#[inline]
pub(crate) fn to_u8(v: f32) -> u8 {
    (v + 0.5) as u8
}

/// One output coordinate's two source neighbours and the weight of the second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tap {
    pub(crate) i0: usize,
    pub(crate) i1: usize,
    pub(crate) t: f32,
}

/// Bilinear taps along one axis: output coordinate `o` reads source position
/// `start + (o + 0.5) * step - 0.5`, clamped to the `n_src` samples there are.
pub(crate) fn taps(n_src: usize, n_out: usize, start: f32, step: f32) -> impl Iterator<Item = Tap> {
    let max = (n_src - 1) as f32;
    (0..n_out).map(move |o| {
        let s = (start + (o as f32 + 0.5) * step - 0.5).clamp(0.0, max);
        let i0 = s as usize;
        Tap { i0, i1: (i0 + 1).min(n_src - 1), t: s - i0 as f32 }
    })
}

/// Bilinear resample of the source span `[x, y, w, h]` to `out_w` x `out_h`.
pub fn resample_region(src: &Raster, region: [f32; 4], out_w: u32, out_h: u32) -> Vec<u8> {
    let c = src.channels as usize;
    let [rx, ry, rw, rh] = region;
    let xs: Vec<Tap> = taps(src.width as usize, out_w as usize, rx, rw / out_w as f32).collect();
    let sw = src.width as usize * c;
    let mut out = Vec::with_capacity(out_w as usize * out_h as usize * c);
    for ty in taps(src.height as usize, out_h as usize, ry, rh / out_h as f32) {
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

/// Area-aware (triangle filter) resize, so big photos do not alias when shrunk.
pub(crate) fn resize(image: &Raster, width: u32, height: u32) -> Vec<u8> {
    use image::imageops::{resize, FilterType};
    if (image.width, image.height) == (width, height) {
        return image.pixels.clone();
    }
    let (w, h) = (image.width, image.height);
    if image.channels == 1 {
        let buf = image::GrayImage::from_raw(w, h, image.pixels.clone()).expect("raster size matches");
        resize(&buf, width, height, FilterType::Triangle).into_raw()
    } else {
        let buf = image::RgbImage::from_raw(w, h, image.pixels.clone()).expect("raster size matches");
        resize(&buf, width, height, FilterType::Triangle).into_raw()
    }
}

/// The `w` x `h` block of `image` at `(x, y)`.
pub(crate) fn sub_raster(image: &Raster, x: u32, y: u32, w: u32, h: u32) -> Raster {
    if (x, y, w, h) == (0, 0, image.width, image.height) {
        return image.clone();
    }
    let c = image.channels as usize;
    let mut pixels = Vec::with_capacity((w * h) as usize * c);
    for row in y..y + h {
        let at = (row as usize * image.width as usize + x as usize) * c;
        pixels.extend_from_slice(&image.pixels[at..at + w as usize * c]);
    }
    Raster { width: w, height: h, channels: image.channels, pixels }
}
