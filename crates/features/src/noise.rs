//! Value noise: one generator for every procedural texture (synthetic scene
//! backgrounds and the crops source's backgrounds).

use crate::source::SampleRng;
use rand::Rng;

/// Lattice of random values, bilinearly interpolated with a smoothstep.
pub(crate) struct NoiseGrid {
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
    pub(crate) fn new(w: usize, h: usize, cell: f32, rng: &mut SampleRng) -> NoiseGrid {
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
    pub(crate) fn row(&self, y: usize, out: &mut [f32], weight: f32, add: bool, scratch: &mut Vec<f32>) {
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
