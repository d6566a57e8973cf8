//! Scene backgrounds for the crops source: a random region of a face-free
//! photo, or procedural value noise when there are none.

use crate::noise::NoiseGrid;
use crate::source::SampleRng;
use grin_image::{resample_region, Raster};
use rand::Rng;

/// Two octaves of value noise (a coarse and a finer grid) around a random
/// mean and contrast, tinted when the crops have colour.
pub(crate) fn procedural_background(
    width: u32,
    height: u32,
    channels: u32,
    colour: bool,
    rng: &mut SampleRng,
) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    let mean = 60.0 + rng.random::<f32>() * 130.0;
    let contrast = 40.0 + rng.random::<f32>() * 80.0;
    // field = mean + 2 contrast (0.7 a + 0.3 b - 0.5), with a and b in 0..1.
    let coarse = NoiseGrid::new(w, h, 40.0, rng);
    let fine = NoiseGrid::new(w, h, 10.0, rng);
    let base = mean - contrast;
    let tint: [f32; 3] = if colour { std::array::from_fn(|_| 0.7 + rng.random::<f32>() * 0.6) } else { [1.0; 3] };
    let c = channels as usize;
    let mut out = vec![0u8; w * h * c];
    let mut field = vec![0f32; w];
    let mut scratch = Vec::new();
    for (y, row) in out.chunks_exact_mut(w * c).enumerate() {
        coarse.row(y, &mut field, 1.4 * contrast, false, &mut scratch);
        fine.row(y, &mut field, 0.6 * contrast, true, &mut scratch);
        field.iter_mut().for_each(|f| *f += base);
        if c == 1 {
            for (o, f) in row.iter_mut().zip(&field) {
                *o = f.clamp(0.0, 255.0) as u8;
            }
        } else {
            for (px, f) in row.chunks_exact_mut(3).zip(&field) {
                for (o, t) in px.iter_mut().zip(tint) {
                    *o = (f * t).clamp(0.0, 255.0) as u8;
                }
            }
        }
    }
    out
}

/// A random region (half to all of the largest one with the output's aspect)
/// of a face-free image, resampled to the output size.
pub(crate) fn random_region(image: &Raster, width: u32, height: u32, rng: &mut SampleRng) -> Vec<u8> {
    region_of(image, width, height, rng, |_, rng| usual_share(rng))
}

/// The usual region's share of the largest one: half to all of it.
pub(crate) fn usual_share(rng: &mut SampleRng) -> f32 {
    0.5 + 0.5 * rng.random::<f32>()
}

/// A region of `image` with the output's aspect at a random place, `share`
/// giving its part of the largest such region from that region's width,
/// resampled to the output size.
pub(crate) fn region_of(
    image: &Raster,
    width: u32,
    height: u32,
    rng: &mut SampleRng,
    share: impl FnOnce(f32, &mut SampleRng) -> f32,
) -> Vec<u8> {
    let aspect = width as f32 / height as f32;
    let (iw, ih) = (image.width as f32, image.height as f32);
    let (full_w, full_h) = if iw / ih > aspect { (ih * aspect, ih) } else { (iw, iw / aspect) };
    let f = share(full_w, rng);
    let (rw, rh) = (full_w * f, full_h * f);
    let rx = rng.random::<f32>() * (iw - rw);
    let ry = rng.random::<f32>() * (ih - rh);
    resample_region(image, [rx, ry, rw, rh], width, height)
}

pub(super) fn has_colour(image: &Raster) -> bool {
    image.channels == 3 && image.pixels.chunks_exact(3).any(|p| p[0] != p[1] || p[1] != p[2])
}
