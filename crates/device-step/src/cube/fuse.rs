//! Top-down fusion's weightless half: the lateral conv's output (half the
//! resolution, `[batch, channels, coarse_h * coarse_w]`) repeated over 2x2
//! blocks, cut to the fine map's size and added to it; and its adjoint, the
//! fine gradient summed over each block. The addition's other gradient is
//! the fine one itself, added to what the skip map already holds.

use super::{elementwise, row_grid, Cube, Dev, Target};
use cubecl::prelude::*;

#[derive(CubeLaunch, CubeType, Clone, Copy, Debug)]
pub(crate) struct FuseShape {
    pub batch: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub coarse_height: usize,
    pub coarse_width: usize,
}

impl FuseShape {
    fn arg<R: Runtime>(self) -> FuseShapeLaunch<R> {
        FuseShapeLaunch::new(self.batch, self.channels, self.height, self.width, self.coarse_height, self.coarse_width)
    }
}

/// Grid: x along the batch's fine points, y the channels.
#[cube(launch_unchecked)]
fn add_up_forward(skip: &Array<f32>, coarse: &Array<f32>, y: &mut Array<f32>, s: FuseShape) {
    let fine = s.height * s.width;
    let n = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if n >= s.batch * fine {
        terminate!();
    }
    let c = CUBE_POS_Y as usize;
    let q = n % fine;
    let row = q / s.width;
    let x = q % s.width;
    let plane = (n / fine) * s.channels + c;
    let at = (plane * s.height + row) * s.width + x;
    y[at] = skip[at] + coarse[(plane * s.coarse_height + row / 2) * s.coarse_width + x / 2];
}

/// Grid: x along the batch's coarse points, y the channels.
#[cube(launch_unchecked)]
fn add_up_backward(g: &Array<f32>, dcoarse: &mut Array<f32>, s: FuseShape, #[comptime] accumulate: bool) {
    let coarse = s.coarse_height * s.coarse_width;
    let n = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    if n >= s.batch * coarse {
        terminate!();
    }
    let c = CUBE_POS_Y as usize;
    let q = n % coarse;
    let cy = q / s.coarse_width;
    let cx = q % s.coarse_width;
    let plane = (n / coarse) * s.channels + c;
    let base = plane * s.height * s.width;
    let mut acc = 0.0f32;
    #[unroll]
    for dy in 0..2usize {
        #[unroll]
        for dx in 0..2usize {
            let (fy, fx) = (2 * cy + dy, 2 * cx + dx);
            if fy < s.height && fx < s.width {
                acc += g[base + fy * s.width + fx];
            }
        }
    }
    let at = (plane * s.coarse_height + cy) * s.coarse_width + cx;
    if accumulate {
        dcoarse[at] += acc;
    } else {
        dcoarse[at] = acc;
    }
}

#[cube(launch_unchecked)]
fn add_assign(into: &mut Array<f32>, g: &Array<f32>, units: usize) {
    if ABSOLUTE_POS >= units {
        terminate!();
    }
    into[ABSOLUTE_POS] += g[ABSOLUTE_POS];
}

/// `skip` plus `coarse` upsampled: a new tensor of `skip`'s shape.
pub(crate) fn forward<R: Cube>(skip: &Dev<R>, coarse: &Dev<R>, s: FuseShape) -> Dev<R> {
    let y = super::empty(skip, [s.batch, s.channels, s.height * s.width]);
    let (count, dim) = row_grid(skip, s.batch * s.height * s.width, s.channels, 1);
    // SAFETY: the thread's (image, row, x) inside the fine map (its
    // position checked against batch * height * width), c < channels: y and skip indexed inside [batch, channels, height, width];
    // coarse at row / 2 < coarse_height and x / 2 < coarse_width, as those
    // are ceil(height / 2) and ceil(width / 2).
    unsafe {
        add_up_forward::launch_unchecked::<R>(
            &skip.client,
            count,
            dim,
            skip.clone().into_array_arg(),
            coarse.clone().into_array_arg(),
            y.clone().into_array_arg(),
            s.arg::<R>(),
        )
    };
    y
}

/// The gradient at the coarse input: `g` summed over each 2x2 block.
pub(crate) fn coarse_grad<R: Cube>(g: &Dev<R>, into: Target<R>, s: FuseShape) -> Dev<R> {
    let (dcoarse, accumulate) = into.tensor(g, [s.batch, s.channels, s.coarse_height * s.coarse_width]);
    let (count, dim) = row_grid(g, s.batch * s.coarse_height * s.coarse_width, s.channels, 1);
    // SAFETY: the thread's (image, cy, cx) inside the coarse map (checked),
    // c < channels; g read
    // at fine rows and columns checked against height and width.
    unsafe {
        add_up_backward::launch_unchecked::<R>(
            &g.client,
            count,
            dim,
            g.clone().into_array_arg(),
            dcoarse.clone().into_array_arg(),
            s.arg::<R>(),
            accumulate,
        )
    };
    dcoarse
}

/// `into += g`, in place (same shapes).
pub(crate) fn add_to<R: Cube>(into: &Dev<R>, g: &Dev<R>) {
    debug_assert_eq!(into.meta.num_elements(), g.meta.num_elements());
    let (count, dim) = elementwise(g, g.meta.num_elements());
    // SAFETY: positions checked against g's size, which is `into`'s.
    unsafe {
        add_assign::launch_unchecked::<R>(
            &g.client,
            count,
            dim,
            into.clone().into_array_arg(),
            g.clone().into_array_arg(),
            g.meta.num_elements(),
        )
    };
}
