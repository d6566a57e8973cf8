//! The 3x3 convolutions (padding 1), dense (the stem) and depthwise,
//! forward and both gradients.
//!
//! Layout `[batch, channels, height * width]`, contiguous, f32; a
//! depthwise conv reads input channel `o` for output channel `o`. The
//! forward pass and the input gradient are one thread per value, x along
//! the batch's points and y over the channels: a thread divides once to
//! find its place, never in its loops (integer division has no vector
//! instruction on a CPU driver, and costs a GPU too). The weight gradient
//! sums a row's nine taps over batch and points in one cube per row,
//! reduced in shared memory.

use super::{row_grid, tree_sum, Cube, Dev, Flat, Target, REDUCE_THREADS};
use cubecl::prelude::*;

/// A 3x3 conv's shape: input `[batch, cin, height, width]`, output
/// `[batch, cout, out_height, out_width]`.
#[derive(CubeLaunch, CubeType, Clone, Copy, Debug)]
pub(crate) struct Shape3x3 {
    pub batch: usize,
    pub cin: usize,
    pub cout: usize,
    pub height: usize,
    pub width: usize,
    pub out_height: usize,
    pub out_width: usize,
    pub stride: usize,
}

impl Shape3x3 {
    /// The conv over `[batch, cin, height, width]` into `cout` channels at
    /// `stride`: the output's size as every 3x3 conv of grin's has it
    /// ([`grin_model::backend::Geometry::out_size`]).
    pub(crate) fn new(batch: usize, cin: usize, cout: usize, height: usize, width: usize, stride: usize) -> Self {
        let (out_height, out_width) = grin_model::backend::Geometry { height, width, stride }.out_size();
        Shape3x3 { batch, cin, cout, height, width, out_height, out_width, stride }
    }

    fn arg<R: Runtime>(self) -> Shape3x3Launch<R> {
        Shape3x3Launch::new(
            self.batch,
            self.cin,
            self.cout,
            self.height,
            self.width,
            self.out_height,
            self.out_width,
            self.stride,
        )
    }
}

/// Input row `o * stride + k - 1` (tap `k` of a side), and whether it is
/// inside `0..side` (padding 1).
#[cube]
fn tap(o: usize, k: usize, stride: usize, side: usize) -> (bool, usize) {
    let at = o * stride + k;
    let inside = at >= 1 && at <= side;
    (inside, at - select(inside, 1, 0))
}

/// Grid: x along the batch's output points, y the out channels.
#[cube(launch_unchecked)]
fn conv3x3_forward(x: &Array<f32>, w: &Array<f32>, z: &mut Array<f32>, s: Shape3x3, #[comptime] depthwise: bool) {
    let out_plane = s.out_height * s.out_width;
    let n = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if n >= s.batch * out_plane {
        terminate!();
    }
    let o = CUBE_POS_Y as usize;
    let b = n / out_plane;
    let q = n % out_plane;
    let oy = q / s.out_width;
    let ox = q % s.out_width;
    let plane = s.height * s.width;
    let mut acc = 0.0f32;
    let (first, count) = if depthwise { (o, 1usize) } else { (0usize, s.cin) };
    for n in 0..count {
        let i = first + n;
        let wrow = if depthwise { o * 9 } else { (o * s.cin + i) * 9 };
        let base = (b * s.cin + i) * plane;
        #[unroll]
        for ky in 0..3usize {
            let (in_y, iy) = tap(oy, ky, s.stride, s.height);
            #[unroll]
            for kx in 0..3usize {
                let (in_x, ix) = tap(ox, kx, s.stride, s.width);
                if in_y && in_x {
                    acc += x[base + iy * s.width + ix] * w[wrow + ky * 3 + kx];
                }
            }
        }
    }
    z[((b * s.cout + o) * s.out_height + oy) * s.out_width + ox] = acc;
}

/// Output index `(i + 1 - k) / stride` reading input `i` through tap `k`,
/// and whether there is one (divisible and inside `0..out`).
// `%` is the kernel language's remainder; it has no `is_multiple_of`.
#[allow(clippy::manual_is_multiple_of)]
#[cube]
fn reader(i: usize, k: usize, stride: usize, out: usize) -> (bool, usize) {
    let t = i + 1;
    let ok = t >= k;
    let d = t - select(ok, k, 0);
    let o = d / stride;
    (ok && d % stride == 0 && o < out, o)
}

/// The input gradient of a 3x3 conv: one thread per input value, summing
/// the outputs whose taps read it (added to `dx` with `accumulate`). Grid:
/// x along the batch's input points, y the in channels.
#[cube(launch_unchecked)]
fn conv3x3_backward_input(
    w: &Array<f32>,
    dz: &Array<f32>,
    dx: &mut Array<f32>,
    s: Shape3x3,
    #[comptime] depthwise: bool,
    #[comptime] accumulate: bool,
) {
    let plane = s.height * s.width;
    let n = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if n >= s.batch * plane {
        terminate!();
    }
    let i = CUBE_POS_Y as usize;
    let b = n / plane;
    let q = n % plane;
    let iy = q / s.width;
    let ix = q % s.width;
    let out_plane = s.out_height * s.out_width;
    let mut acc = 0.0f32;
    let (first, count) = if depthwise { (i, 1usize) } else { (0usize, s.cout) };
    for n in 0..count {
        let o = first + n;
        let wrow = if depthwise { o * 9 } else { (o * s.cin + i) * 9 };
        let base = (b * s.cout + o) * out_plane;
        #[unroll]
        for ky in 0..3usize {
            let (hit_y, oy) = reader(iy, ky, s.stride, s.out_height);
            #[unroll]
            for kx in 0..3usize {
                let (hit_x, ox) = reader(ix, kx, s.stride, s.out_width);
                if hit_y && hit_x {
                    acc += dz[base + oy * s.out_width + ox] * w[wrow + ky * 3 + kx];
                }
            }
        }
    }
    let at = ((b * s.cin + i) * s.height + iy) * s.width + ix;
    if accumulate {
        dx[at] += acc;
    } else {
        dx[at] = acc;
    }
}

/// The weight gradient of a 3x3 conv, written at `dw[offset..]`, and the
/// weights themselves at `values[offset..]` (the optimizer's flat copy):
/// cube `(o, i)` (dense) or `o` (depthwise) sums its nine taps over batch
/// and output points, each thread a stride of the points, walked without
/// dividing.
#[cube(launch_unchecked)]
fn conv3x3_backward_weight(
    x: &Array<f32>,
    dz: &Array<f32>,
    w: &Array<f32>,
    dw: &mut Array<f32>,
    values: &mut Array<f32>,
    s: Shape3x3,
    offset: usize,
    rows: usize,
    #[comptime] depthwise: bool,
) {
    let row = CUBE_POS;
    if row >= rows {
        terminate!();
    }
    let (o, i) = if depthwise { (row, row) } else { (row / s.cin, row % s.cin) };
    let threads = CUBE_DIM as usize;
    let t = UNIT_POS as usize;
    let mut sums = SharedMemory::<f32>::new(comptime!(9 * REDUCE_THREADS));
    let mut acc = Array::<f32>::new(9usize);
    #[unroll]
    for k in 0..9usize {
        acc[k] = 0.0;
    }
    let out_plane = s.out_height * s.out_width;
    let plane = s.height * s.width;
    // Each thread's point: t, t + threads, ... as (row, column), moved on
    // by (step_y, step_x) each time.
    let step_y = threads / s.out_width;
    let step_x = threads % s.out_width;
    for b in 0..s.batch {
        let gbase = (b * s.cout + o) * out_plane;
        let xbase = (b * s.cin + i) * plane;
        let mut oy = t / s.out_width;
        let mut ox = t % s.out_width;
        while oy < s.out_height {
            let g = dz[gbase + oy * s.out_width + ox];
            #[unroll]
            for ky in 0..3usize {
                let (in_y, iy) = tap(oy, ky, s.stride, s.height);
                #[unroll]
                for kx in 0..3usize {
                    let (in_x, ix) = tap(ox, kx, s.stride, s.width);
                    if in_y && in_x {
                        acc[ky * 3 + kx] += g * x[xbase + iy * s.width + ix];
                    }
                }
            }
            ox += step_x;
            oy += step_y;
            if ox >= s.out_width {
                ox -= s.out_width;
                oy += 1;
            }
        }
    }
    #[unroll]
    for k in 0..9usize {
        sums[k * threads + t] = acc[k];
    }
    tree_sum(&mut sums, 9usize);
    if t < 9 {
        dw[offset + row * 9 + t] = sums[t * threads];
        values[offset + row * 9 + t] = w[row * 9 + t];
    }
}

/// The 3x3 conv of `x` by `w`: a new `[batch, cout, out_height * out_width]`.
pub(crate) fn conv3x3<R: Cube>(x: &Dev<R>, w: &Dev<R>, s: Shape3x3, depthwise: bool) -> Dev<R> {
    let z = super::empty(x, [s.batch, s.cout, s.out_height * s.out_width]);
    let (count, dim) = row_grid(x, s.batch * s.out_height * s.out_width, s.cout, 1);
    // SAFETY: each thread's (b, oy, ox) is inside the output (its position
    // checked against batch * out_plane), o < cout (the grid), so z's index
    // is below its size; x is read at
    // (b * cin + i) * plane + iy * width + ix with iy < height and ix <
    // width (`tap`), i < cin; w at most at (cout * cin) * 9 - 1.
    unsafe {
        conv3x3_forward::launch_unchecked::<R>(
            &x.client,
            count,
            dim,
            x.clone().into_array_arg(),
            w.clone().into_array_arg(),
            z.clone().into_array_arg(),
            s.arg::<R>(),
            depthwise,
        )
    };
    z
}

/// The input gradient of [`conv3x3`].
pub(crate) fn input_grad<R: Cube>(w: &Dev<R>, dz: &Dev<R>, into: Target<R>, s: Shape3x3, depthwise: bool) -> Dev<R> {
    let (dx, accumulate) = into.tensor(dz, [s.batch, s.cin, s.height * s.width]);
    let (count, dim) = row_grid(dz, s.batch * s.height * s.width, s.cin, 1);
    // SAFETY: each thread's (b, iy, ix) is inside dx (its position checked
    // against batch * plane), i < cin (the grid); dz is read at an (oy, ox) checked against the
    // output's size (`reader`), o < cout; w as in the forward pass.
    unsafe {
        conv3x3_backward_input::launch_unchecked::<R>(
            &dz.client,
            count,
            dim,
            w.clone().into_array_arg(),
            dz.clone().into_array_arg(),
            dx.clone().into_array_arg(),
            s.arg::<R>(),
            depthwise,
            accumulate,
        )
    };
    dx
}

/// The weight gradient of [`conv3x3`] by `w`, written at `flat.grads[offset..]`
/// (`cout * cin * 9` values, `cout * 9` when depthwise), and `w` at
/// `flat.values[offset..]`.
pub(crate) fn weight_grad<R: Cube>(
    x: &Dev<R>,
    dz: &Dev<R>,
    w: &Dev<R>,
    flat: &Flat<R>,
    offset: usize,
    s: Shape3x3,
    depthwise: bool,
) {
    let rows = if depthwise { s.cout } else { s.cout * s.cin };
    let (count, dim) = super::reducing(dz, rows, s.out_height * s.out_width);
    // SAFETY: cube `row` < rows (the kernel ends a cube past them); a
    // thread's (oy, ox) stays inside the output (ox < out_width by the
    // wrap, oy checked), its taps inside the input (`tap`); writes at
    // offset + row * 9 + k < offset + rows * 9, inside the flat buffers by
    // the caller's layout.
    unsafe {
        conv3x3_backward_weight::launch_unchecked::<R>(
            &dz.client,
            count,
            dim,
            x.clone().into_array_arg(),
            dz.clone().into_array_arg(),
            w.clone().into_array_arg(),
            flat.grads.clone().into_array_arg(),
            flat.values.clone().into_array_arg(),
            s.arg::<R>(),
            offset,
            rows,
            depthwise,
        )
    };
}
