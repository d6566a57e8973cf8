//! Value noise: one generator for every procedural texture (synthetic scene
//! backgrounds and the crops source's backgrounds).

use crate::source::SampleRng;
use rand::Rng;

/// Lattice of random values, bilinearly interpolated with a smoothstep.
pub(crate) struct NoiseGrid {
    values: Vec<f32>,
    cols: usize,
    inv_cell: f32,
    /// Runs of output columns inside one lattice cell, as (cell, start, end):
    /// a run interpolates between the same two lattice values, so its inner
    /// loop reads no table and vectorises.
    runs: Vec<(usize, usize, usize)>,
    /// Per output column: its smoothed weight within its cell.
    weights: Vec<f32>,
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
        let mut runs: Vec<(usize, usize, usize)> = Vec::new();
        let mut weights = Vec::with_capacity(w);
        for x in 0..w {
            let f = x as f32 * inv_cell;
            let ix = f as usize;
            weights.push(smooth(f - f.floor()));
            match runs.last_mut() {
                Some((cell, _, end)) if *cell == ix => *end = x + 1,
                _ => runs.push((ix, x, x + 1)),
            }
        }
        NoiseGrid { values, cols, inv_cell, runs, weights }
    }

    /// `out = weight * noise(row y)`, or `out += ...` when `add`.
    pub(crate) fn row(&self, y: usize, out: &mut [f32], weight: f32, add: bool, scratch: &mut Vec<f32>) {
        let f = y as f32 * self.inv_cell;
        let (iy, sy) = (f as usize, smooth(f - f.floor()));
        let (top, bottom) = (&self.values[iy * self.cols..], &self.values[(iy + 1) * self.cols..]);
        scratch.clear();
        scratch.extend((0..self.cols).map(|j| weight * (top[j] + (bottom[j] - top[j]) * sy)));
        for &(ix, start, end) in &self.runs {
            let (a, b) = (scratch[ix], scratch[ix + 1]);
            let span = out[start..end].iter_mut().zip(&self.weights[start..end]);
            if add {
                span.for_each(|(v, sx)| *v += a + (b - a) * sx);
            } else {
                span.for_each(|(v, sx)| *v = a + (b - a) * sx);
            }
        }
    }
}
