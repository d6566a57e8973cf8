//! The depthwise 3x3 (padding 1) convolution and its two gradients as plain
//! loops over NCHW `f32` slices, parallel over planes or channels; and, for
//! inference, the same forward loop with a fused bias + ReLU and a dense
//! variant for the stem, so training and the Pi run one kernel.
//!
//! Output `(i, j)` of a plane reads input `(s*i + ky - 1, s*j + kx - 1)` for
//! its nine taps. [`rows`] lists, once per call, every (tap, output row)
//! pair whose input row is inside the image together with the span of
//! columns that is; the three kernels then only walk those spans, so no
//! inner loop tests bounds, and at stride 1 they run over contiguous memory
//! and vectorise.

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

/// Tap `k` (`ky * 3 + kx`) of output row `out_row` reads input row
/// `in_row`; outputs `lo..hi` of that row read inputs `start`, `start + s`, ...
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

fn rows(shape: Shape) -> Vec<Row> {
    let (oh, ow, s) = (shape.out_height(), shape.out_width(), shape.stride);
    let mut rows = Vec::with_capacity(9 * oh);
    for ky in 0..3 {
        let (i_lo, i_hi) = inside(ky, shape.height, oh, s);
        for kx in 0..3 {
            let (lo, hi) = inside(kx, shape.width, ow, s);
            if lo == hi {
                continue;
            }
            for out_row in i_lo..i_hi {
                let start = s * lo + kx - 1;
                rows.push(Row { k: ky * 3 + kx, out_row, in_row: s * out_row + ky - 1, lo, hi, start });
            }
        }
    }
    rows
}

/// The `n` inputs `start, start + stride, ...` of `row`.
fn strided(row: &[f32], start: usize, stride: usize, n: usize) -> impl Iterator<Item = &f32> {
    row[start..].iter().step_by(stride).take(n)
}

/// Eight independent partial sums let the compiler vectorise a float dot
/// product (it may not reorder a single running sum).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a8.remainder().iter().zip(b8.remainder()).map(|(x, y)| x * y).sum();
    for (ca, cb) in a8.zip(b8) {
        for k in 0..8 {
            lanes[k] += ca[k] * cb[k];
        }
    }
    lanes.iter().sum::<f32>() + tail
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
    /// `[channels]` (output channels, for [`dense_forward`]).
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

/// Adds one input plane `xp` convolved with the nine taps `w` to the
/// output plane `y`.
fn accumulate(y: &mut [f32], xp: &[f32], w: &[f32], rows: &[Row], shape: Shape) {
    let (ow, s) = (shape.out_width(), shape.stride);
    for r in rows {
        let input = &xp[r.in_row * shape.width..][..shape.width];
        let output = &mut y[r.out_row * ow..][r.lo..r.hi];
        let wk = w[r.k];
        if s == 1 {
            output.iter_mut().zip(&input[r.start..]).for_each(|(o, v)| *o += wk * v);
        } else {
            output.iter_mut().zip(strided(input, r.start, s, r.hi - r.lo)).for_each(|(o, v)| *o += wk * v);
        }
    }
}

/// The convolution: `[batch, channels, out_height, out_width]` flattened,
/// with `epilogue` (if any) applied.
pub fn forward(x: &[f32], weight: &[f32], shape: Shape, epilogue: Option<Epilogue>) -> Vec<f32> {
    let mut out = vec![0.0f32; shape.batch * shape.channels * shape.out_plane()];
    check(shape, x.len(), weight.len(), out.len());
    let rows = rows(shape);
    out.par_chunks_mut(shape.out_plane()).enumerate().for_each(|(plane, y)| {
        let c = plane % shape.channels;
        accumulate(y, &x[plane * shape.plane()..][..shape.plane()], &weight[c * 9..][..9], &rows, shape);
        if let Some(e) = &epilogue {
            e.apply(y, c);
        }
    });
    out
}

/// The dense 3x3 convolution (padding 1) the stem is, on the same row walk:
/// every one of `out_channels` reads all `shape.channels` inputs; `weight`
/// is `[out_channels, channels, 3, 3]`. Output `[batch, out_channels,
/// out_height, out_width]` flattened, with `epilogue` (if any) applied.
pub fn dense_forward(
    x: &[f32],
    weight: &[f32],
    shape: Shape,
    out_channels: usize,
    epilogue: Option<Epilogue>,
) -> Vec<f32> {
    let cin = shape.channels;
    assert_eq!(x.len(), shape.batch * cin * shape.plane(), "conv input size");
    assert_eq!(weight.len(), out_channels * cin * 9, "conv weight size");
    let mut out = vec![0.0f32; shape.batch * out_channels * shape.out_plane()];
    let rows = rows(shape);
    out.par_chunks_mut(shape.out_plane()).enumerate().for_each(|(plane, y)| {
        let (b, oc) = (plane / out_channels, plane % out_channels);
        for ic in 0..cin {
            let xp = &x[(b * cin + ic) * shape.plane()..][..shape.plane()];
            accumulate(y, xp, &weight[(oc * cin + ic) * 9..][..9], &rows, shape);
        }
        if let Some(e) = &epilogue {
            e.apply(y, oc);
        }
    });
    out
}

/// dL/dx, `[batch, channels, height, width]` flattened, from the weight and
/// the output gradient `grad`.
pub fn input_grad(grad: &[f32], weight: &[f32], shape: Shape) -> Vec<f32> {
    let (ow, s) = (shape.out_width(), shape.stride);
    let mut out = vec![0.0f32; shape.batch * shape.channels * shape.plane()];
    check(shape, out.len(), weight.len(), grad.len());
    let rows = rows(shape);
    out.par_chunks_mut(shape.plane()).enumerate().for_each(|(plane, dx)| {
        let w = &weight[(plane % shape.channels) * 9..][..9];
        let gp = &grad[plane * shape.out_plane()..][..shape.out_plane()];
        for r in &rows {
            let g = &gp[r.out_row * ow..][r.lo..r.hi];
            let row = &mut dx[r.in_row * shape.width..][..shape.width];
            let wk = w[r.k];
            if s == 1 {
                row[r.start..].iter_mut().zip(g).for_each(|(d, gv)| *d += wk * gv);
            } else {
                row[r.start..].iter_mut().step_by(s).zip(g).for_each(|(d, gv)| *d += wk * gv);
            }
        }
    });
    out
}

/// dL/dweight, `[channels, 1, 3, 3]` flattened, from the forward input `x`
/// and the output gradient `grad`.
pub fn weight_grad(x: &[f32], grad: &[f32], shape: Shape) -> Vec<f32> {
    let (ow, s) = (shape.out_width(), shape.stride);
    let mut out = vec![0.0f32; shape.channels * 9];
    check(shape, x.len(), out.len(), grad.len());
    let rows = rows(shape);
    out.par_chunks_mut(9).enumerate().for_each(|(c, taps)| {
        for b in 0..shape.batch {
            let plane = b * shape.channels + c;
            let xp = &x[plane * shape.plane()..][..shape.plane()];
            let gp = &grad[plane * shape.out_plane()..][..shape.out_plane()];
            for r in &rows {
                let g = &gp[r.out_row * ow..][r.lo..r.hi];
                let input = &xp[r.in_row * shape.width..][..shape.width];
                taps[r.k] += if s == 1 {
                    dot(g, &input[r.start..r.start + g.len()])
                } else {
                    g.iter().zip(strided(input, r.start, s, g.len())).map(|(a, v)| a * v).sum()
                };
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, one multiply at a time: (y, dL/dx, dL/dw).
    fn reference(x: &[f32], w: &[f32], grad: &[f32], s: Shape) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let (oh, ow) = (s.out_height(), s.out_width());
        let mut y = vec![0.0; grad.len()];
        let mut dx = vec![0.0; x.len()];
        let mut dw = vec![0.0; w.len()];
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
                                dx[at] += grad[out] * w[k];
                                dw[k] += grad[out] * x[at];
                            }
                        }
                    }
                }
            }
        }
        (y, dx, dw)
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32).map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect()
    }

    #[test]
    fn kernels_match_the_definition_at_every_edge_case() {
        // Odd and even sides, stride 1 and 2, sides down to 1, and rows
        // longer than the 8-lane dot product.
        for (height, width) in [(1, 1), (2, 3), (5, 4), (7, 19), (6, 17)] {
            for stride in [1, 2] {
                let s = Shape { batch: 2, channels: 3, height, width, stride };
                let x = values(2 * 3 * height * width, 1);
                let w = values(27, 2);
                let grad = values(2 * 3 * s.out_height() * s.out_width(), 3);
                let (y, dx, dw) = reference(&x, &w, &grad, s);
                let close =
                    |a: &[f32], b: &[f32]| a.len() == b.len() && a.iter().zip(b).all(|(p, q)| (p - q).abs() < 1e-4);
                assert!(close(&forward(&x, &w, s, None), &y), "forward {s:?}");
                assert!(close(&input_grad(&grad, &w, s), &dx), "input grad {s:?}");
                assert!(close(&weight_grad(&x, &grad, s), &dw), "weight grad {s:?}");
            }
        }
    }

    #[test]
    fn the_epilogue_adds_the_bias_then_clamps_and_dense_sums_over_inputs() {
        // One 1x1 plane: only the centre tap reads inside the image.
        let s = Shape { batch: 1, channels: 2, height: 1, width: 1, stride: 1 };
        let mut w = [0.0; 18];
        (w[4], w[13]) = (2.0, -3.0);
        let x = [1.5, 2.0];
        let relu = Epilogue { bias: &[1.0, 1.0], relu: true };
        // 2 * 1.5 + 1 = 4; -3 * 2 + 1 = -5, clamped to 0.
        assert_eq!(forward(&x, &w, s, Some(relu)), [4.0, 0.0]);
        assert_eq!(forward(&x, &w, s, Some(Epilogue { relu: false, ..relu })), [4.0, -5.0]);
        // Dense, 2 inputs -> 1 output: 2 * 1.5 - 3 * 2 + 0.5.
        assert_eq!(dense_forward(&x, &w, s, 1, Some(Epilogue { bias: &[0.5], relu: false })), [-2.5]);
    }

    #[test]
    fn dense_forward_is_the_sum_of_per_input_depthwise_convs() {
        for stride in [1, 2] {
            let (cin, cout) = (3, 2);
            let s = Shape { batch: 2, channels: cin, height: 5, width: 7, stride };
            let x = values(2 * cin * 35, 4);
            let w = values(cout * cin * 9, 5);
            let dense = dense_forward(&x, &w, s, cout, None);
            let plane = s.out_height() * s.out_width();
            for oc in 0..cout {
                // Output channel oc is a depthwise conv with its row of weights, summed over channels.
                let per_input = forward(&x, &w[oc * cin * 9..][..cin * 9], s, None);
                for b in 0..2 {
                    for i in 0..plane {
                        let sum: f32 = (0..cin).map(|c| per_input[(b * cin + c) * plane + i]).sum();
                        assert!((dense[(b * cout + oc) * plane + i] - sum).abs() < 1e-5, "stride {stride}");
                    }
                }
            }
        }
    }
}
