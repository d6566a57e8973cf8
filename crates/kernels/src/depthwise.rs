//! The depthwise 3x3 (padding 1) convolution over NCHW slices as plain
//! loops over one plane ([`PlaneConv`]), with a fused bias + ReLU: what
//! the NdArray backend's `DetectorBackend::depthwise3x3` runs for
//! Burn-graph inference and evaluation. The CPU training step runs the SIMD kernels of
//! [`super::plane3x3`] instead.
//!
//! Output `(i, j)` of a plane reads input `(s*i + ky - 1, s*j + kx - 1)` for
//! its nine taps. [`rows`] lists, once per call, every (tap, output row)
//! pair whose input row is inside the image together with the span of
//! columns that is; the kernel then only walks those spans, so no
//! inner loop tests bounds, and each runs over contiguous memory and
//! vectorises (at stride 2, over the input split into even and odd columns).

use rayon::prelude::*;

/// Sizes of the forward input `[batch, channels, height, width]` and stride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub stride: usize,
}

impl Shape {
    pub fn out_height(&self) -> usize {
        self.height.div_ceil(self.stride)
    }

    pub fn out_width(&self) -> usize {
        self.width.div_ceil(self.stride)
    }

    fn plane(&self) -> usize {
        self.height * self.width
    }

    fn out_plane(&self) -> usize {
        self.out_height() * self.out_width()
    }
}

/// Tap `k` (`ky * 3 + kx`) of output row `out_row` reads row `in_row` of
/// the input split into column phases ([`PlaneConv::split`]); outputs
/// `lo..hi` of that row read the split row's `start..start + (hi - lo)`.
#[derive(Debug, Clone, Copy)]
struct Row {
    k: usize,
    out_row: usize,
    in_row: usize,
    lo: usize,
    hi: usize,
    start: usize,
}

/// The outputs `lo..hi` whose tap offset `k` (0..3) lands inside a side of
/// `side` inputs.
fn inside(k: usize, side: usize, out: usize, stride: usize) -> (usize, usize) {
    // Offset 0 reads one before the output's anchor: output 0 reads padding.
    let lo = usize::from(k == 0);
    let hi = if side >= k { ((side - k) / stride + 1).min(out) } else { 0 };
    (lo, hi.max(lo))
}

/// Where each column phase starts in a split row: phase `p` holds columns
/// `p, p + s, p + 2s, ...`.
fn phase_starts(width: usize, stride: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(stride);
    let mut at = 0;
    for p in 0..stride {
        starts.push(at);
        at += width.saturating_sub(p).div_ceil(stride);
    }
    starts
}

fn rows(shape: Shape) -> Vec<Row> {
    let (oh, ow, s) = (shape.out_height(), shape.out_width(), shape.stride);
    let phases = phase_starts(shape.width, s);
    let mut rows = Vec::with_capacity(9 * oh);
    for ky in 0..3 {
        let (i_lo, i_hi) = inside(ky, shape.height, oh, s);
        for kx in 0..3 {
            let (lo, hi) = inside(kx, shape.width, ow, s);
            if lo == hi {
                continue;
            }
            // Output column j reads column s*j + kx - 1: phase (kx - 1) mod s,
            // index j + floor((kx - 1) / s) within it.
            let d = kx as isize - 1;
            let start = phases[d.rem_euclid(s as isize) as usize] as isize + lo as isize + d.div_euclid(s as isize);
            for out_row in i_lo..i_hi {
                rows.push(Row { k: ky * 3 + kx, out_row, in_row: s * out_row + ky - 1, lo, hi, start: start as usize });
            }
        }
    }
    rows
}

fn check(shape: Shape, x: usize, weight: usize, out: usize) {
    let planes = shape.batch * shape.channels;
    assert_eq!(x, planes * shape.plane(), "depthwise input size");
    assert_eq!(weight, shape.channels * 9, "depthwise weight size");
    assert_eq!(out, planes * shape.out_plane(), "depthwise output size");
}

/// What inference runs on each output plane once its sum is done: the
/// per-channel bias of a folded BatchNorm, then ReLU if asked. Fusing it
/// saves a pass over the activations per layer.
#[derive(Debug, Clone, Copy)]
pub struct Epilogue<'a> {
    /// `[channels]`.
    pub bias: &'a [f32],
    pub relu: bool,
}

impl Epilogue<'_> {
    pub fn apply(&self, plane: &mut [f32], channel: usize) {
        let b = self.bias[channel];
        if self.relu {
            plane.iter_mut().for_each(|v| *v = (*v + b).max(0.0));
        } else {
            plane.iter_mut().for_each(|v| *v += b);
        }
    }
}

/// One plane's convolution walk for a (height, width, stride), built once
/// per call: [`forward`] runs every plane through it.
///
/// At stride 2 the taps read every other column, which no loop over the
/// input vectorises; so the input is first split into its even and odd
/// columns ([`PlaneConv::split`], one pass), after which every tap reads a
/// contiguous run, as at stride 1.
#[derive(Debug, Clone)]
pub(crate) struct PlaneConv {
    rows: Vec<Row>,
    shape: Shape,
}

thread_local! {
    /// A split plane, per thread, for the methods that take an unsplit input.
    static SPLIT: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl PlaneConv {
    pub(crate) fn new(height: usize, width: usize, stride: usize) -> PlaneConv {
        let shape = Shape { batch: 1, channels: 1, height, width, stride };
        PlaneConv { rows: rows(shape), shape }
    }

    /// Whether inputs are read split into column phases (stride > 1); at
    /// stride 1 a split plane is the plane itself.
    pub(crate) fn splits(&self) -> bool {
        self.shape.stride > 1
    }

    /// Writes plane `x` with each row's columns regrouped by phase (`0, s,
    /// 2s, ..`, then `1, s + 1, ..`) into `out`.
    pub(crate) fn split(&self, x: &[f32], out: &mut [f32]) {
        let (w, s) = (self.shape.width, self.shape.stride);
        for (row, split) in x.chunks_exact(w).zip(out.chunks_exact_mut(w)) {
            if s == 2 {
                // Pairs to two runs: a deinterleave the compiler vectorises.
                let (even, odd) = split.split_at_mut(w.div_ceil(2));
                for (pair, (e, o)) in row.chunks_exact(2).zip(even.iter_mut().zip(odd.iter_mut())) {
                    (*e, *o) = (pair[0], pair[1]);
                }
                if w % 2 == 1 {
                    even[w / 2] = row[w - 1];
                }
                continue;
            }
            let mut at = 0;
            for p in 0..s {
                for &v in row[p..].iter().step_by(s) {
                    split[at] = v;
                    at += 1;
                }
            }
        }
    }

    /// Runs `f` on `x` split (or on `x` itself at stride 1).
    fn with_split<R>(&self, x: &[f32], f: impl FnOnce(&[f32]) -> R) -> R {
        if !self.splits() {
            return f(x);
        }
        SPLIT.with_borrow_mut(|buffer| {
            buffer.resize(x.len(), 0.0);
            self.split(x, buffer);
            f(buffer)
        })
    }

    /// `y += conv(x)` with the nine taps `w`; `xs` is the input split.
    pub(crate) fn forward_split(&self, y: &mut [f32], xs: &[f32], w: &[f32]) {
        let (ow, width) = (self.shape.out_width(), self.shape.width);
        for r in &self.rows {
            let output = &mut y[r.out_row * ow..][r.lo..r.hi];
            let input = &xs[r.in_row * width + r.start..][..output.len()];
            let wk = w[r.k];
            output.iter_mut().zip(input).for_each(|(o, v)| *o += wk * v);
        }
    }

    /// `y += conv(x)` with the nine taps `w`.
    pub(crate) fn forward(&self, y: &mut [f32], x: &[f32], w: &[f32]) {
        self.with_split(x, |xs| self.forward_split(y, xs, w));
    }
}

/// The convolution: `[batch, channels, out_height, out_width]` flattened,
/// with `epilogue` (if any) applied.
pub fn forward(x: &[f32], weight: &[f32], shape: Shape, epilogue: Option<Epilogue>) -> Vec<f32> {
    let mut out = vec![0.0f32; shape.batch * shape.channels * shape.out_plane()];
    check(shape, x.len(), weight.len(), out.len());
    let conv = PlaneConv::new(shape.height, shape.width, shape.stride);
    out.par_chunks_mut(shape.out_plane()).enumerate().for_each(|(plane, y)| {
        let c = plane % shape.channels;
        conv.forward(y, &x[plane * shape.plane()..][..shape.plane()], &weight[c * 9..][..9]);
        if let Some(e) = &epilogue {
            e.apply(y, c);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, one multiply at a time.
    fn reference(x: &[f32], w: &[f32], s: Shape) -> Vec<f32> {
        let (oh, ow) = (s.out_height(), s.out_width());
        let mut y = vec![0.0; s.batch * s.channels * oh * ow];
        for b in 0..s.batch {
            for c in 0..s.channels {
                let plane = b * s.channels + c;
                for i in 0..oh {
                    for j in 0..ow {
                        let out = (plane * oh + i) * ow + j;
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (r, q) = ((s.stride * i + ky) as isize - 1, (s.stride * j + kx) as isize - 1);
                                if r < 0 || q < 0 || r >= s.height as isize || q >= s.width as isize {
                                    continue;
                                }
                                let at = (plane * s.height + r as usize) * s.width + q as usize;
                                let k = c * 9 + ky * 3 + kx;
                                y[out] += w[k] * x[at];
                            }
                        }
                    }
                }
            }
        }
        y
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect()
    }

    #[test]
    fn forward_matches_the_definition_at_every_edge_case() {
        // Odd and even sides, stride 1 and 2, sides down to 1, and rows
        // longer than the 8-lane dot product.
        for (height, width) in [(1, 1), (2, 3), (5, 4), (7, 19), (6, 17)] {
            for stride in [1, 2] {
                let s = Shape { batch: 2, channels: 3, height, width, stride };
                let x = values(2 * 3 * height * width, 1);
                let w = values(27, 2);
                let y = reference(&x, &w, s);
                let close =
                    |a: &[f32], b: &[f32]| a.len() == b.len() && a.iter().zip(b).all(|(p, q)| (p - q).abs() < 1e-4);
                assert!(close(&forward(&x, &w, s, None), &y), "forward {s:?}");
            }
        }
    }

    #[test]
    fn the_epilogue_adds_the_bias_then_clamps() {
        // One 1x1 plane: only the centre tap reads inside the image.
        let s = Shape { batch: 1, channels: 2, height: 1, width: 1, stride: 1 };
        let mut w = [0.0; 18];
        (w[4], w[13]) = (2.0, -3.0);
        let x = [1.5, 2.0];
        let relu = Epilogue { bias: &[1.0, 1.0], relu: true };
        // 2 * 1.5 + 1 = 4; -3 * 2 + 1 = -5, clamped to 0.
        assert_eq!(forward(&x, &w, s, Some(relu)), [4.0, 0.0]);
        assert_eq!(forward(&x, &w, s, Some(Epilogue { relu: false, ..relu })), [4.0, -5.0]);
    }
}
