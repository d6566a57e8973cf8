//! Scene backgrounds: a procedural texture (gradient, value noise, stripes
//! or checker) with random rectangles and lines over it.

use super::canvas::{cover, random_color, segment_distance, Canvas, Rgb};
use crate::noise::NoiseGrid;
use crate::source::{uniform as uni, SampleRng};
use rand::Rng;

/// Fills the whole canvas with a procedural texture (gradient, value noise,
/// stripes or checker) plus random rectangles and lines.
pub(super) fn render_background(canvas: &mut Canvas, rng: &mut SampleRng) {
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
