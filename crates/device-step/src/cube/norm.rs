//! Training BatchNorm (+ ReLU), forward and backward, one kernel each: one
//! cube per channel reduces over batch and points in shared memory, then
//! writes that channel's outputs. Forward also folds the batch statistics
//! into the running averages, as Burn's `BatchNorm` does in training.

use super::{reducing, tree_sum, Cube, Dev, Flat, REDUCE_THREADS};
use cubecl::prelude::*;

#[derive(CubeLaunch, CubeType, Clone, Copy)]
pub(crate) struct NormShape {
    pub batch: usize,
    pub channels: usize,
    pub points: usize,
    pub epsilon: f32,
    pub momentum: f32,
}

/// The next value of a thread's walk through a channel over the batch:
/// (image, point) moved on by (step_b, step_p), `threads` values, without
/// dividing.
#[cube]
fn advance(b: usize, p: usize, step_b: usize, step_p: usize, points: usize) -> (usize, usize) {
    let q = p + step_p;
    let wrap = q >= points;
    (b + step_b + select(wrap, 1, 0), q - select(wrap, points, 0))
}

/// Sums `value` over the cube's threads (each its own partial); every
/// thread gets the total.
#[cube]
fn cube_sum(shared: &mut SharedMemory<f32>, value: f32) -> f32 {
    shared[UNIT_POS as usize] = value;
    tree_sum(shared, 1usize);
    let total = shared[0];
    sync_cube();
    total
}

/// Cube `c`: mean and biased variance of channel `c` over batch and
/// points, `y = relu?((z - mean) / sqrt(var + eps) * gamma + beta)`, the
/// statistics kept for backward (`mean`, `rstd`), and the running averages
/// moved towards them (`(1 - momentum) * running + momentum * batch`).
#[cube(launch_unchecked)]
fn norm_forward(
    z: &Array<f32>,
    gamma: &Array<f32>,
    beta: &Array<f32>,
    running_mean: &Array<f32>,
    running_var: &Array<f32>,
    y: &mut Array<f32>,
    stats: &mut Array<f32>,
    new_mean: &mut Array<f32>,
    new_var: &mut Array<f32>,
    s: NormShape,
    #[comptime] relu: bool,
) {
    let c = CUBE_POS;
    if c >= s.channels {
        terminate!();
    }
    let threads = CUBE_DIM as usize;
    let t = UNIT_POS as usize;
    let (step_b, step_p) = (threads / s.points, threads % s.points);
    let mut shared = SharedMemory::<f32>::new(comptime!(REDUCE_THREADS));
    let count = (s.batch * s.points) as f32;
    let mut acc = 0.0f32;
    let (mut b, mut p) = (t / s.points, t % s.points);
    while b < s.batch {
        acc += z[(b * s.channels + c) * s.points + p];
        (b, p) = advance(b, p, step_b, step_p, s.points);
    }
    let mean = cube_sum(&mut shared, acc) / count;
    let mut acc2 = 0.0f32;
    let (mut b, mut p) = (t / s.points, t % s.points);
    while b < s.batch {
        let d = z[(b * s.channels + c) * s.points + p] - mean;
        acc2 += d * d;
        (b, p) = advance(b, p, step_b, step_p, s.points);
    }
    let var = cube_sum(&mut shared, acc2) / count;
    let rstd = 1.0f32 / f32::sqrt(var + s.epsilon);
    let scale = gamma[c] * rstd;
    let shift = beta[c] - mean * scale;
    let (mut b, mut p) = (t / s.points, t % s.points);
    while b < s.batch {
        let at = (b * s.channels + c) * s.points + p;
        let v = z[at] * scale + shift;
        y[at] = if relu { f32::max(v, 0.0) } else { v };
        (b, p) = advance(b, p, step_b, step_p, s.points);
    }
    if t == 0 {
        stats[2 * c] = mean;
        stats[2 * c + 1] = rstd;
        new_mean[c] = (1.0 - s.momentum) * running_mean[c] + s.momentum * mean;
        new_var[c] = (1.0 - s.momentum) * running_var[c] + s.momentum * var;
    }
}

/// Cube `c`, from the output's gradient `g`: with `xhat = (z - mean) *
/// rstd` and `g` zeroed where the ReLU cut (`gamma * xhat + beta <= 0`),
/// `dbeta = Σg`, `dgamma = Σ g·xhat` and `dz = gamma·rstd·(g - Σg/n -
/// xhat·Σ(g·xhat)/n)`, sums over batch and points. `dgamma` and `dbeta`
/// are written at `grads[gamma_at + c]` and `grads[beta_at + c]`, gamma
/// and beta at the same places of `values` (the optimizer's flat copy).
#[cube(launch_unchecked)]
fn norm_backward(
    g: &Array<f32>,
    z: &Array<f32>,
    stats: &Array<f32>,
    gamma: &Array<f32>,
    beta: &Array<f32>,
    dz: &mut Array<f32>,
    grads: &mut Array<f32>,
    values: &mut Array<f32>,
    gamma_at: usize,
    beta_at: usize,
    s: NormShape,
    #[comptime] relu: bool,
) {
    let c = CUBE_POS;
    if c >= s.channels {
        terminate!();
    }
    let threads = CUBE_DIM as usize;
    let t = UNIT_POS as usize;
    let (step_b, step_p) = (threads / s.points, threads % s.points);
    let mut shared = SharedMemory::<f32>::new(comptime!(REDUCE_THREADS));
    let (mean, rstd) = (stats[2 * c], stats[2 * c + 1]);
    let (gm, bt) = (gamma[c], beta[c]);
    let mut sum_g = 0.0f32;
    let mut sum_gx = 0.0f32;
    let (mut b, mut p) = (t / s.points, t % s.points);
    while b < s.batch {
        let at = (b * s.channels + c) * s.points + p;
        let xhat = (z[at] - mean) * rstd;
        let mut grad = g[at];
        if relu && gm * xhat + bt <= 0.0 {
            grad = 0.0;
        }
        sum_g += grad;
        sum_gx += grad * xhat;
        (b, p) = advance(b, p, step_b, step_p, s.points);
    }
    let sum_g = cube_sum(&mut shared, sum_g);
    let sum_gx = cube_sum(&mut shared, sum_gx);
    let count = (s.batch * s.points) as f32;
    let scale = gm * rstd;
    let (mut b, mut p) = (t / s.points, t % s.points);
    while b < s.batch {
        let at = (b * s.channels + c) * s.points + p;
        let xhat = (z[at] - mean) * rstd;
        let mut grad = g[at];
        if relu && gm * xhat + bt <= 0.0 {
            grad = 0.0;
        }
        dz[at] = scale * (grad - sum_g / count - xhat * sum_gx / count);
        (b, p) = advance(b, p, step_b, step_p, s.points);
    }
    if t == 0 {
        grads[gamma_at + c] = sum_gx;
        grads[beta_at + c] = sum_g;
        values[gamma_at + c] = gm;
        values[beta_at + c] = bt;
    }
}

impl NormShape {
    fn arg<R: Runtime>(self) -> NormShapeLaunch<R> {
        NormShapeLaunch::new(self.batch, self.channels, self.points, self.epsilon, self.momentum)
    }
}

/// What BatchNorm's forward pass leaves: the output, each channel's
/// (mean, 1/std) interleaved, and the moved running averages.
pub(crate) struct NormForward<R: Cube> {
    pub y: Dev<R>,
    pub stats: Dev<R>,
    pub running_mean: Dev<R>,
    pub running_var: Dev<R>,
}

/// The parameters one BatchNorm reads.
pub(crate) struct NormParams<'a, R: Cube> {
    pub gamma: &'a Dev<R>,
    pub beta: &'a Dev<R>,
    pub running_mean: &'a Dev<R>,
    pub running_var: &'a Dev<R>,
}

pub(crate) fn forward<R: Cube>(z: &Dev<R>, p: &NormParams<R>, s: NormShape, relu: bool) -> NormForward<R> {
    let c = s.channels;
    let y = super::empty(z, [s.batch, c, s.points]);
    let stats = super::empty(z, [2 * c]);
    let (running_mean, running_var) = (super::empty(z, [c]), super::empty(z, [c]));
    let (count, dim) = reducing(z, c, s.batch * s.points);
    // SAFETY: cube c < channels (checked in the kernel) touches channel c
    // only: z and y at ((b * channels + c) * points + p), b < batch, p <
    // points, from the tensors' own shape; the per-channel arrays at c or
    // 2c + 1 < 2 * channels.
    unsafe {
        norm_forward::launch_unchecked::<R>(
            &z.client,
            count,
            dim,
            z.clone().into_array_arg(),
            p.gamma.clone().into_array_arg(),
            p.beta.clone().into_array_arg(),
            p.running_mean.clone().into_array_arg(),
            p.running_var.clone().into_array_arg(),
            y.clone().into_array_arg(),
            stats.clone().into_array_arg(),
            running_mean.clone().into_array_arg(),
            running_var.clone().into_array_arg(),
            s.arg::<R>(),
            relu,
        )
    };
    NormForward { y, stats, running_mean, running_var }
}

/// Where BatchNorm's parameter gradients (and values) go: `[gamma_at..]`
/// and `[beta_at..]` of the flat buffers, `channels` values each.
pub(crate) struct NormGradsAt<'a, R: Cube> {
    pub flat: &'a Flat<R>,
    pub gamma_at: usize,
    pub beta_at: usize,
}

/// The gradient before BatchNorm, from the one after it (and the ReLU).
pub(crate) fn backward<R: Cube>(
    g: &Dev<R>,
    z: &Dev<R>,
    stats: &Dev<R>,
    p: &NormParams<R>,
    into: NormGradsAt<R>,
    s: NormShape,
    relu: bool,
) -> Dev<R> {
    let dz = super::empty(z, [s.batch, s.channels, s.points]);
    let (count, dim) = reducing(z, s.channels, s.batch * s.points);
    // SAFETY: as in `forward`, each cube its own channel c < channels; the
    // flat buffers at gamma_at + c and beta_at + c, inside them by the
    // caller's layout (`crate::FlatLayout`).
    unsafe {
        norm_backward::launch_unchecked::<R>(
            &z.client,
            count,
            dim,
            g.clone().into_array_arg(),
            z.clone().into_array_arg(),
            stats.clone().into_array_arg(),
            p.gamma.clone().into_array_arg(),
            p.beta.clone().into_array_arg(),
            dz.clone().into_array_arg(),
            into.flat.grads.clone().into_array_arg(),
            into.flat.values.clone().into_array_arg(),
            into.gamma_at,
            into.beta_at,
            s.arg::<R>(),
            relu,
        )
    };
    dz
}
