//! A decoded image and the resampling every source shares.

/// A decoded image: `channels` interleaved u8 planes, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Raster {
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub pixels: Vec<u8>,
}

/// A buffer the process could not have: an image or frame too large for
/// the memory left, reported instead of aborting (issue 90, round 7: a
/// 36 MP photo under a 200 MB limit decoded, then its grey copy aborted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory {
    pub bytes: usize,
}

impl std::fmt::Display for OutOfMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "needs {:.1} MB more, past the memory this process may take", self.bytes as f64 / 1e6)
    }
}

impl std::error::Error for OutOfMemory {}

/// An empty buffer with room for `len` values, asked for rather than
/// assumed: what every buffer sized by an input goes through (drop it at
/// once to ask for memory a library will take).
pub fn reserved<T>(len: usize) -> Result<Vec<T>, OutOfMemory> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| OutOfMemory { bytes: len.saturating_mul(std::mem::size_of::<T>()) })?;
    Ok(v)
}

/// A zeroed buffer of `len` bytes, asked for rather than assumed.
fn zeroed(len: usize) -> Result<Vec<u8>, OutOfMemory> {
    let mut v = reserved(len)?;
    v.resize(len, 0);
    Ok(v)
}

impl Raster {
    /// A decoded image as `channels` (1: luma, 3: RGB) interleaved u8
    /// planes; luma is Rec. 709's, for every reader alike. Its buffer is
    /// asked for, so an image past the memory left is an error.
    ///
    /// # Panics
    /// On another channel count: configs and model headers are checked for
    /// 1 or 3 when they are loaded, long before an image is read.
    pub fn from_image(image: &image::DynamicImage, channels: u32) -> Result<Raster, OutOfMemory> {
        use image::DynamicImage::{ImageLuma8, ImageRgb8};
        let (width, height) = (image.width(), image.height());
        let len = width as usize * height as usize * channels as usize;
        let pixels = match (channels, image) {
            (1, ImageRgb8(rgb)) => luma_of_rgb(rgb.as_raw())?,
            (1, ImageLuma8(grey)) => copied(grey.as_raw())?,
            (3, ImageRgb8(rgb)) => copied(rgb.as_raw())?,
            (1 | 3, _) => {
                // The image crate's conversion allocates itself: ask first.
                // (Other pixel types come from image files only, whose
                // decoding already asked for their buffer.)
                drop(zeroed(len)?);
                if channels == 1 {
                    image.to_luma8().into_raw()
                } else {
                    image.to_rgb8().into_raw()
                }
            }
            (n, _) => panic!("{n} channels: images become 1 (luma) or 3 (RGB)"),
        };
        Ok(Raster { width, height, channels, pixels })
    }
}

fn copied(pixels: &[u8]) -> Result<Vec<u8>, OutOfMemory> {
    let mut v = reserved(pixels.len())?;
    v.extend_from_slice(pixels);
    Ok(v)
}

/// Rec. 709 luma of RGB pixels, (2126 R + 7152 G + 722 B) / 10000 rounded,
/// as 16-bit fixed point (the weights times 65536, summing to 65536) in one
/// loop the compiler vectorises: `image`'s `to_luma8` (the same weights,
/// through f32 colour-space code, pixel by pixel) took most of a frame's
/// scaling time, and a camera frame or a decoded JPEG is RGB. Within one
/// level of `to_luma8`, and equal for over 99% of colours (test).
fn luma_of_rgb(rgb: &[u8]) -> Result<Vec<u8>, OutOfMemory> {
    let mut out = zeroed(rgb.len() / 3)?;
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        let done = simd.vectorize(|| luma_avx2(simd, rgb, &mut out));
        luma_into(&rgb[3 * done..], &mut out[done..]);
        return Ok(out);
    }
    // AArch64's NEON splits the channels in its loads (`ld3`): the plain
    // loop vectorises there.
    luma_into(rgb, &mut out);
    Ok(out)
}

/// Where pixel `d` of 16 finds channel `channel` in the 16-byte part `part`
/// of their 48 interleaved bytes: a `pshufb` mask (0x80: not in this part).
#[cfg(target_arch = "x86_64")]
const fn split_mask(channel: usize, part: usize) -> [u8; 16] {
    let mut mask = [0x80u8; 16];
    let mut d = 0;
    while d < 16 {
        let at = 3 * d + channel;
        if at / 16 == part {
            mask[d] = (at % 16) as u8;
        }
        d += 1;
    }
    mask
}

/// [`luma_into`]'s integer formula, sixteen pixels at a time, in AVX2:
/// three byte shuffles per channel split the interleaved RGB (baseline
/// x86-64 has no byte shuffle, and the compiler split them pixel by pixel:
/// perf put this loop at 0.34 of a 640x480 frame's 0.77 ms scaling), then
/// 32-bit products, so every pixel is the one [`luma_into`] gives. Returns
/// the pixels done (a multiple of 16).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn luma_avx2(simd: pulp::x86::V3, rgb: &[u8], out: &mut [u8]) -> usize {
    use pulp::bytemuck::cast;
    use std::arch::x86_64::{__m128i, __m256i};
    const MASKS: [[[u8; 16]; 3]; 3] = {
        let mut m = [[[0u8; 16]; 3]; 3];
        let mut c = 0;
        while c < 3 {
            let mut part = 0;
            while part < 3 {
                m[c][part] = split_mask(c, part);
                part += 1;
            }
            c += 1;
        }
        m
    };
    let masks: [[__m128i; 3]; 3] = MASKS.map(|c| c.map(cast));
    let weights = LUMA_WEIGHTS.map(|w| simd.avx._mm256_set1_epi32(w as i32));
    let half = simd.avx._mm256_set1_epi32(1 << 15);
    let mut done = 0;
    for (o, p) in out.chunks_exact_mut(16).zip(rgb.chunks_exact(48)) {
        let parts: [__m128i; 3] =
            [0, 1, 2].map(|k| cast::<[u8; 16], __m128i>(p[16 * k..16 * k + 16].try_into().expect("16 bytes")));
        let channel = |c: usize| {
            let shuffled = |k: usize| simd.ssse3._mm_shuffle_epi8(parts[k], masks[c][k]);
            simd.sse2._mm_or_si128(simd.sse2._mm_or_si128(shuffled(0), shuffled(1)), shuffled(2))
        };
        let rgb16 = [channel(0), channel(1), channel(2)];
        // Pixels 0..8 and 8..16 as 32-bit lanes: sum of weight x value, rounded.
        let half_luma = |upper: bool| -> __m256i {
            let mut sum = half;
            for (c, &v) in rgb16.iter().enumerate() {
                let v = if upper { simd.sse2._mm_srli_si128::<8>(v) } else { v };
                let wide = simd.avx2._mm256_cvtepu8_epi32(v);
                sum = simd.avx2._mm256_add_epi32(sum, simd.avx2._mm256_mullo_epi32(wide, weights[c]));
            }
            simd.avx2._mm256_srli_epi32::<16>(sum)
        };
        // packus interleaves the two halves' 128-bit lanes: 0-3, 8-11, 4-7, 12-15; the permute restores the order.
        let words = simd.avx2._mm256_packus_epi32(half_luma(false), half_luma(true));
        let words = simd.avx2._mm256_permute4x64_epi64::<0b11_01_10_00>(words);
        let (low, high) = (simd.avx._mm256_castsi256_si128(words), simd.avx2._mm256_extracti128_si256::<1>(words));
        o.copy_from_slice(&cast::<__m128i, [u8; 16]>(simd.sse2._mm_packus_epi16(low, high)));
        done += 16;
    }
    done
}

/// Rec. 709's weights times 65536 (they sum to 65536).
const LUMA_WEIGHTS: [u32; 3] = [13_933, 46_871, 4_732];

/// Each of R, G and B's share of the luma a grey model reads: how a grey
/// model's first conv splits into a colour one that computes the same on a
/// grey photo, and within a level of it on a colour one.
pub const LUMA_SHARES: [f32; 3] =
    [LUMA_WEIGHTS[0] as f32 / 65_536.0, LUMA_WEIGHTS[1] as f32 / 65_536.0, LUMA_WEIGHTS[2] as f32 / 65_536.0];

/// The luma of each RGB pixel of `rgb` into `out` (a third of its length).
#[inline(always)]
fn luma_into(rgb: &[u8], out: &mut [u8]) {
    let [r, g, b] = LUMA_WEIGHTS;
    let luma = |p: &[u8]| ((r * p[0] as u32 + g * p[1] as u32 + b * p[2] as u32 + 32_768) >> 16) as u8;
    // Sixteen pixels at a time from fixed-size arrays: the shape the
    // compiler turns into shuffles and wide multiplies.
    let mut outs = out.chunks_exact_mut(16);
    let mut ins = rgb.chunks_exact(48);
    for (o, p) in (&mut outs).zip(&mut ins) {
        let o: &mut [u8; 16] = o.try_into().expect("16 pixels");
        let p: &[u8; 48] = p.try_into().expect("16 pixels");
        for k in 0..16 {
            o[k] = luma(&p[3 * k..3 * k + 3]);
        }
    }
    for (o, p) in outs.into_remainder().iter_mut().zip(ins.remainder().chunks_exact(3)) {
        *o = luma(p);
    }
}

/// Rounds to the nearest byte. `as u8` saturates (and maps NaN to 0), so no
/// clamp is needed, and it avoids `f32::round`, a libm call on baseline x86-64.
#[inline]
pub fn to_u8(v: f32) -> u8 {
    (v + 0.5) as u8
}

/// One output coordinate's two source neighbours and the weight of the second.
#[derive(Debug, Clone, Copy)]
pub struct Tap {
    pub i0: usize,
    pub i1: usize,
    pub t: f32,
}

/// Bilinear taps along one axis: output coordinate `o` reads source position
/// `start + (o + 0.5) * step - 0.5`, clamped to the `n_src` samples there are.
pub fn taps(n_src: usize, n_out: usize, start: f32, step: f32) -> impl Iterator<Item = Tap> {
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
pub fn resize(image: &Raster, width: u32, height: u32) -> Vec<u8> {
    use fast_image_resize::pixels::{U8x3, U8};
    if (image.width, image.height) == (width, height) {
        return image.pixels.clone();
    }
    if image.channels == 1 && (2 * width, 2 * height) == (image.width, image.height) {
        return halve_grey(&image.pixels, image.width as usize, image.height as usize);
    }
    let mut out = vec![0u8; (width * height * image.channels) as usize];
    if image.channels == 1 {
        resize_as::<U8>(image, width, height, &mut out);
    } else {
        resize_as::<U8x3>(image, width, height, &mut out);
    }
    out
}

/// [`resize`] through `fast_image_resize` for one pixel type: its typed
/// entry point, because the untyped one (a pixel type chosen at run time)
/// compiles the resizer for all thirteen of its pixel types, and that was
/// most of this crate's build time.
fn resize_as<P: fast_image_resize::PixelTrait>(image: &Raster, width: u32, height: u32, out: &mut [u8]) {
    use fast_image_resize::images::{TypedImage, TypedImageRef};
    use fast_image_resize::{FilterType, ResizeAlg, ResizeOptions, Resizer};
    let src = TypedImageRef::<P>::from_buffer(image.width, image.height, &image.pixels).expect("raster size matches");
    let mut dst = TypedImage::<P>::from_buffer(width, height, out).expect("buffer size matches");
    // The triangle (bilinear) filter, widened with the downscale factor, in
    // integer SIMD (AVX2, SSE4.1, NEON) on whatever the host has; one
    // resizer per thread keeps its buffers between frames.
    thread_local! {
        static RESIZER: std::cell::RefCell<Resizer> = std::cell::RefCell::new(Resizer::new());
    }
    let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    RESIZER.with(|r| r.borrow_mut().resize_typed(&src, &mut dst, &options)).expect("non-empty sizes");
}

/// The triangle filter at exactly half size, for one grey plane: a camera
/// frame (640x480) into the run size (320x240). Widened by the factor 2, the
/// filter's taps are source lines 2o-1, 2o, 2o+1, 2o+2 with weights 1, 3, 3,
/// 1 (renormalised where a tap falls outside, as `fast_image_resize` and
/// `image` do), so both passes are fixed adds the compiler vectorises.
/// `fast_image_resize` runs a 4-tap horizontal kernel one pixel at a time
/// (its AVX2 path takes 8 taps or more): perf put that at about 0.16 of the
/// 0.35 ms a 640x480 frame's scaling took. Exact sums, one rounding: within
/// one level of both (test).
fn halve_grey(src: &[u8], w: usize, h: usize) -> Vec<u8> {
    let mut out = vec![0u8; (w / 2) * (h / 2)];
    pulp::Arch::new().dispatch(Halve { src, w, h, out: &mut out });
    out
}

/// The taps of output line `o` of `n / 2`: (source line, weight) in range.
fn half_taps(o: usize, n: usize) -> impl Iterator<Item = (usize, u16)> {
    [(1, 1u16), (2, 3), (3, 3), (4, 1)]
        .into_iter()
        .filter_map(move |(k, weight)| (2 * o + k).checked_sub(2).filter(|&i| i < n).map(|i| (i, weight)))
}

/// [`halve_grey`]'s loops, compiled for the host's SIMD level by pulp.
struct Halve<'a> {
    src: &'a [u8],
    w: usize,
    h: usize,
    out: &'a mut [u8],
}

impl pulp::WithSimd for Halve<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let Halve { src, w, h, out } = self;
        let ow = w / 2;
        let mut column = vec![0u16; w];
        for (o, line) in out.chunks_exact_mut(ow).enumerate() {
            // Vertical: the weighted sum of up to four source rows, kept exact.
            column.fill(0);
            let mut vertical = 0u16;
            for (row, weight) in half_taps(o, h) {
                vertical += weight;
                for (c, &p) in column.iter_mut().zip(&src[row * w..(row + 1) * w]) {
                    *c += weight * p as u16;
                }
            }
            // Horizontal: interior pixels have all four taps (weight 8).
            let scale = 1.0 / (8 * vertical) as f32;
            let interior = |x: usize| {
                let sum = column[2 * x - 1] as u32
                    + 3 * (column[2 * x] as u32 + column[2 * x + 1] as u32)
                    + column[2 * x + 2] as u32;
                to_u8(sum as f32 * scale)
            };
            if ow > 2 {
                for (x, o) in line.iter_mut().enumerate().take(ow - 1).skip(1) {
                    *o = interior(x);
                }
            }
            for x in [0, ow - 1] {
                let (mut sum, mut weight) = (0u32, 0u32);
                for (i, wt) in half_taps(x, w) {
                    sum += wt as u32 * column[i] as u32;
                    weight += wt as u32;
                }
                line[x] = to_u8(sum as f32 / (weight * vertical as u32) as f32);
            }
        }
    }
}

/// The `w` x `h` block of `image` at `(x, y)`.
pub fn sub_raster(image: &Raster, x: u32, y: u32, w: u32, h: u32) -> Raster {
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

#[cfg(test)]
mod tests;
