//! The 1x1 convolutions, forward and both gradients: products over
//! channels.
//!
//! Layout `[batch, channels, points]`, contiguous, f32. Forward and input
//! gradient are one thread per point and block of channels; the weight
//! gradient is a sum over batch and points per (out, in) pair, split over
//! the points into barrier-free threads and the splits added by a second
//! kernel.

use super::{row_grid, Cube, Dev, Flat, Target};
use cubecl::prelude::*;

/// A 1x1 conv's shape. Its output may be a band of points of a wider map:
/// channel `o`'s row of image `b` starts at `(b * cout + o) * row + start`.
#[derive(CubeLaunch, CubeType, Clone, Copy, Debug)]
pub(crate) struct Shape1x1 {
    pub batch: usize,
    pub cin: usize,
    pub cout: usize,
    pub points: usize,
    /// The output's row length and this band's first point in it.
    pub row: usize,
    pub start: usize,
}

impl Shape1x1 {
    fn arg<R: Runtime>(self) -> Shape1x1Launch<R> {
        Shape1x1Launch::new(self.batch, self.cin, self.cout, self.points, self.row, self.start)
    }
}

/// Channels a thread of a 1x1 kernel computes together: each value it
/// loads serves `BLOCK` products (a CPU driver gathers each load lane by
/// lane; a GPU's loads are the scarce part too).
const BLOCK: usize = 4;

/// Grid: x along the batch's points, y over blocks of `BLOCK` out channels.
#[cube(launch_unchecked)]
fn pointwise_forward(
    x: &Array<f32>,
    w: &Array<f32>,
    bias: &Array<f32>,
    z: &mut Array<f32>,
    s: Shape1x1,
    #[comptime] with_bias: bool,
) {
    let n = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if n >= s.batch * s.points {
        terminate!();
    }
    let b = n / s.points;
    let p = n % s.points;
    let block = comptime!(BLOCK);
    let o0 = CUBE_POS_Y as usize * block;
    let mut acc = Array::<f32>::new(comptime!(BLOCK));
    #[unroll]
    for k in 0..block {
        // A block past the last channel reads the last one's weights and writes nothing.
        let o = usize::min(o0 + k, s.cout - 1);
        acc[k] = if with_bias { bias[o] } else { f32::new(0.0) };
    }
    let base = b * s.cin * s.points + p;
    for i in 0..s.cin {
        let v = x[base + i * s.points];
        #[unroll]
        for k in 0..block {
            let o = usize::min(o0 + k, s.cout - 1);
            acc[k] += w[o * s.cin + i] * v;
        }
    }
    #[unroll]
    for k in 0..block {
        let o = o0 + k;
        if o < s.cout {
            z[(b * s.cout + o) * s.row + s.start + p] = acc[k];
        }
    }
}

/// Grid: x along the batch's points, y over blocks of `BLOCK` in channels.
#[cube(launch_unchecked)]
fn pointwise_backward_input(
    w: &Array<f32>,
    dz: &Array<f32>,
    dx: &mut Array<f32>,
    s: Shape1x1,
    #[comptime] accumulate: bool,
) {
    let n = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if n >= s.batch * s.points {
        terminate!();
    }
    let b = n / s.points;
    let p = n % s.points;
    let block = comptime!(BLOCK);
    let i0 = CUBE_POS_Y as usize * block;
    let mut acc = Array::<f32>::new(comptime!(BLOCK));
    #[unroll]
    for k in 0..block {
        acc[k] = 0.0;
    }
    let base = b * s.cout * s.row + s.start + p;
    for o in 0..s.cout {
        let g = dz[base + o * s.row];
        #[unroll]
        for k in 0..block {
            let i = usize::min(i0 + k, s.cin - 1);
            acc[k] += w[o * s.cin + i] * g;
        }
    }
    #[unroll]
    for k in 0..block {
        let i = i0 + k;
        if i < s.cin {
            let at = (b * s.cin + i) * s.points + p;
            if accumulate {
                dx[at] += acc[k];
            } else {
                dx[at] = acc[k];
            }
        }
    }
}

/// The 1x1 weight gradient `Σ dz[b, o, p] · x[b, i, p]` of a `BLOCK x
/// BLOCK` block of (o, i) pairs (x = 1 at `i == cin` with a bias) over
/// points `split * per_split ..` of the batch's `batch * points`: one
/// thread per (block, split), x over the blocks and y over the splits,
/// each walking its points in order, no thread waiting on another (a CPU
/// driver runs a cube's threads as coroutines around each barrier).
/// Written at `out[split * cout * columns + o * columns + i]`.
#[cube(launch_unchecked)]
fn pointwise_weight_split(
    x: &Array<f32>,
    dz: &Array<f32>,
    out: &mut Array<f32>,
    s: Shape1x1,
    per_split: usize,
    #[comptime] with_bias: bool,
) {
    let block = comptime!(BLOCK);
    let columns = if with_bias { s.cin + 1 } else { s.cin };
    let blocks_in = columns.div_ceil(block);
    let blocks = s.cout.div_ceil(block) * blocks_in;
    let at = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if at >= blocks {
        terminate!();
    }
    let o0 = (at / blocks_in) * block;
    let i0 = (at % blocks_in) * block;
    let split = CUBE_POS_Y as usize;
    let first = split * per_split;
    let last = usize::min(first + per_split, s.batch * s.points);
    let mut acc = Array::<f32>::new(comptime!(BLOCK * BLOCK));
    #[unroll]
    for k in 0..comptime!(BLOCK * BLOCK) {
        acc[k] = 0.0;
    }
    let mut g = Array::<f32>::new(comptime!(BLOCK));
    let mut v = Array::<f32>::new(comptime!(BLOCK));
    let mut b = first / s.points;
    let mut p = first % s.points;
    let mut n = first;
    while n < last {
        #[unroll]
        for k in 0..block {
            // Past the last channel: the last one's values, never written.
            let o = usize::min(o0 + k, s.cout - 1);
            g[k] = dz[(b * s.cout + o) * s.row + s.start + p];
            let i = i0 + k;
            v[k] = 1.0;
            if i < s.cin {
                v[k] = x[(b * s.cin + i) * s.points + p];
            }
        }
        #[unroll]
        for ko in 0..block {
            #[unroll]
            for ki in 0..block {
                acc[ko * block + ki] += g[ko] * v[ki];
            }
        }
        n += 1;
        p += 1;
        if p == s.points {
            p = 0;
            b += 1;
        }
    }
    let base = split * s.cout * columns;
    #[unroll]
    for ko in 0..block {
        #[unroll]
        for ki in 0..block {
            let (o, i) = (o0 + ko, i0 + ki);
            if o < s.cout && i < columns {
                out[base + o * columns + i] = acc[ko * block + ki];
            }
        }
    }
}

/// Adds the splits of a 1x1 weight gradient (`[splits, cout, columns]`)
/// and writes weight and bias gradient into the flat buffer, with the
/// parameters beside them in `values`.
#[cube(launch_unchecked)]
fn pointwise_weight_finish(
    partial: &Array<f32>,
    w: &Array<f32>,
    bias: &Array<f32>,
    grads: &mut Array<f32>,
    values: &mut Array<f32>,
    cout: usize,
    cin: usize,
    splits: usize,
    weight_at: usize,
    bias_at: usize,
    #[comptime] with_bias: bool,
) {
    let columns = if with_bias { cin + 1 } else { cin };
    let e = ABSOLUTE_POS;
    if e >= cout * columns {
        terminate!();
    }
    let mut sum = 0.0f32;
    for split in 0..splits {
        sum += partial[split * cout * columns + e];
    }
    let o = e / columns;
    let i = e % columns;
    if i < cin {
        grads[weight_at + o * cin + i] = sum;
        values[weight_at + o * cin + i] = w[o * cin + i];
    } else {
        grads[bias_at + o] = sum;
        values[bias_at + o] = bias[o];
    }
}

/// The 1x1 conv of `x` by `w` (plus `bias`), written into `out`'s band
/// (`s.row`, `s.start`), or into a new tensor when `out` is `None`.
pub(crate) fn forward<R: Cube>(
    x: &Dev<R>,
    w: &Dev<R>,
    bias: Option<&Dev<R>>,
    out: Option<&Dev<R>>,
    s: Shape1x1,
) -> Dev<R> {
    let z = match out {
        Some(out) => Dev::clone(out),
        None => super::empty(x, [s.batch, s.cout, s.points]),
    };
    let (count, dim) = row_grid(x, s.batch * s.points, s.cout.div_ceil(BLOCK), 1);
    // SAFETY: (b, p) below (batch, points) (checked), every channel read
    // clamped below cout and written only below it; x read at (b *
    // cin + i) * points + p, w at o * cin + i, the bias at o;
    // z written at (b * cout + o) * row + start + p, inside z because the
    // band fits its rows (start + points <= row, the caller's layout).
    unsafe {
        pointwise_forward::launch_unchecked::<R>(
            &x.client,
            count,
            dim,
            x.clone().into_array_arg(),
            w.clone().into_array_arg(),
            bias.unwrap_or(w).clone().into_array_arg(),
            z.clone().into_array_arg(),
            s.arg::<R>(),
            bias.is_some(),
        )
    };
    z
}

/// The input gradient of [`forward`].
pub(crate) fn input_grad<R: Cube>(w: &Dev<R>, dz: &Dev<R>, into: Target<R>, s: Shape1x1) -> Dev<R> {
    let (dx, accumulate) = into.tensor(dz, [s.batch, s.cin, s.points]);
    let (count, dim) = row_grid(dz, s.batch * s.points, s.cin.div_ceil(BLOCK), 1);
    // SAFETY: (b, p) below (batch, points) (checked), every channel read
    // clamped below cin and written only below it; dz is read in its
    // band as the forward pass writes it, w at o * cin + i.
    unsafe {
        pointwise_backward_input::launch_unchecked::<R>(
            &dz.client,
            count,
            dim,
            w.clone().into_array_arg(),
            dz.clone().into_array_arg(),
            dx.clone().into_array_arg(),
            s.arg::<R>(),
            accumulate,
        )
    };
    dx
}

/// Threads (blocks times splits) the 1x1 weight gradient aims for, at
/// least (a GPU's worth), and points each sums, at least (so a split is
/// worth its partial sum).
const PAIR_THREADS: usize = 16_384;
const MIN_SPAN: usize = 256;

/// The weight gradient of [`forward`] by `w` (and `bias`) into
/// `flat.grads[weight_at..]` (and `[bias_at..]`), the parameters at the
/// same places of `flat.values`: two launches, the split sums and their
/// total.
#[allow(clippy::too_many_arguments)]
pub(crate) fn weight_grad<R: Cube>(
    x: &Dev<R>,
    dz: &Dev<R>,
    w: &Dev<R>,
    bias: Option<&Dev<R>>,
    flat: &Flat<R>,
    weight_at: usize,
    bias_at: Option<usize>,
    s: Shape1x1,
) {
    debug_assert_eq!(bias.is_some(), bias_at.is_some(), "a bias has a slot");
    let columns = s.cin + usize::from(bias.is_some());
    let pairs = s.cout * columns;
    let blocks = s.cout.div_ceil(BLOCK) * columns.div_ceil(BLOCK);
    let total = s.batch * s.points;
    let splits = PAIR_THREADS.div_ceil(blocks).min(total.div_ceil(MIN_SPAN)).max(1);
    let per_split = total.div_ceil(splits);
    let splits = total.div_ceil(per_split);
    let partial = super::empty(dz, [splits, s.cout, columns]);
    let (count, dim) = row_grid(dz, blocks, splits, 1);
    // SAFETY: block < blocks (checked), split < splits (the grid); a
    // thread's points run from split * per_split to at most batch * points,
    // as (b, p) below (batch, points); channels read clamped below cout and
    // cin; the partial written at split * pairs + o * columns + i only for
    // o < cout and i < columns.
    unsafe {
        pointwise_weight_split::launch_unchecked::<R>(
            &dz.client,
            count,
            dim,
            x.clone().into_array_arg(),
            dz.clone().into_array_arg(),
            partial.clone().into_array_arg(),
            s.arg::<R>(),
            per_split,
            bias.is_some(),
        )
    };
    let (count, dim) = super::elementwise(dz, pairs);
    // SAFETY: e < cout * columns (checked); partial read at split * pairs +
    // e; the flat buffers written at weight_at + o * cin + i and bias_at +
    // o, inside them by the caller's layout.
    unsafe {
        pointwise_weight_finish::launch_unchecked::<R>(
            &dz.client,
            count,
            dim,
            partial.into_array_arg(),
            w.clone().into_array_arg(),
            bias.unwrap_or(w).clone().into_array_arg(),
            flat.grads.clone().into_array_arg(),
            flat.values.clone().into_array_arg(),
            s.cout,
            s.cin,
            splits,
            weight_at,
            bias_at.unwrap_or(0),
            bias.is_some(),
        )
    };
}
