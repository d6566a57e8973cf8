//! AdamW over one flat buffer of every parameter, in two kernels: each
//! parameter's gradient norm (one cube per parameter), then the update of
//! every value. The arithmetic is grin-train's `FlatAdamW`, which is
//! Burn's `AdamW` with per-parameter norm clipping, op for op.

use super::{elementwise, reducing, tree_sum, Cube, Dev, REDUCE_THREADS};
use crate::AdamwScalars;
use cubecl::prelude::*;

/// Values per chunk of the flat layout: a parameter starts at a chunk.
pub(crate) const CHUNK: usize = crate::CHUNK;

#[derive(CubeLaunch, CubeType, Clone, Copy)]
struct Hyper {
    lr: f32,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    decay: f32,
    correction_1: f32,
    correction_2: f32,
}

/// Cube `slot`: `coef[slot] = min(1, clip / (|g| + f32::MIN_POSITIVE))`
/// over the slot's values `spans[2 slot] .. + spans[2 slot + 1]`.
#[cube(launch_unchecked)]
fn adamw_norms(grads: &Array<f32>, spans: &Array<i32>, coef: &mut Array<f32>, slots: usize, clip_norm: f32) {
    let slot = CUBE_POS;
    if slot >= slots {
        terminate!();
    }
    let threads = CUBE_DIM as usize;
    let t = UNIT_POS as usize;
    let start = spans[2 * slot] as usize;
    let len = spans[2 * slot + 1] as usize;
    let mut acc = 0.0f32;
    let mut i = t;
    while i < len {
        let g = grads[start + i];
        acc += g * g;
        i += threads;
    }
    let mut shared = SharedMemory::<f32>::new(comptime!(REDUCE_THREADS));
    shared[t] = acc;
    tree_sum(&mut shared, 1usize);
    if t == 0 {
        // Burn's order: the reciprocal, then times the clip.
        coef[slot] = f32::min(clip_norm * (1.0 / (f32::sqrt(shared[0]) + f32::new(f32::MIN_POSITIVE))), 1.0);
    }
}

/// One thread per value: the update, where the value belongs to a
/// parameter (a chunk's padding is carried as zeros).
#[cube(launch_unchecked)]
fn adamw_update(
    values: &Array<f32>,
    grads: &Array<f32>,
    moment_1: &Array<f32>,
    moment_2: &Array<f32>,
    chunk_slot: &Array<i32>,
    spans: &Array<i32>,
    coef: &Array<f32>,
    new_values: &mut Array<f32>,
    new_1: &mut Array<f32>,
    new_2: &mut Array<f32>,
    units: usize,
    h: Hyper,
) {
    let i = ABSOLUTE_POS;
    if i >= units {
        terminate!();
    }
    let slot = chunk_slot[i / comptime!(CHUNK)] as usize;
    let start = spans[2 * slot] as usize;
    let len = spans[2 * slot + 1] as usize;
    if i < start || i >= start + len {
        new_values[i] = 0.0;
        new_1[i] = 0.0;
        new_2[i] = 0.0;
        terminate!();
    }
    let g = grads[i] * coef[slot];
    let m = moment_1[i] * h.beta_1 + g * (1.0 - h.beta_1);
    let v = moment_2[i] * h.beta_2 + g * g * (1.0 - h.beta_2);
    new_1[i] = m;
    new_2[i] = v;
    let delta = (m / h.correction_1) / (f32::sqrt(v / h.correction_2) + h.epsilon);
    new_values[i] = values[i] * (1.0 - h.decay) - delta * h.lr;
}

/// The flat state after one step: values, moment 1, moment 2.
pub(crate) type Updated<R> = (Dev<R>, Dev<R>, Dev<R>);

/// One AdamW step over flat `values`, `grads`, `moment_1` and `moment_2`
/// (`[chunks * CHUNK]` each): `chunk_slot` gives each chunk's parameter
/// and `spans` each parameter's (start, len), both i32.
#[allow(clippy::too_many_arguments)]
pub(crate) fn step<R: Cube>(
    values: &Dev<R>,
    grads: &Dev<R>,
    moment_1: &Dev<R>,
    moment_2: &Dev<R>,
    chunk_slot: &Dev<R>,
    spans: &Dev<R>,
    slots: usize,
    h: AdamwScalars,
) -> Updated<R> {
    let units = values.meta.num_elements();
    let coef = super::empty(values, [slots]);
    let (count, dim) = reducing(values, slots, REDUCE_THREADS);
    // SAFETY: cube slot < slots (checked) reads spans[2 slot + 1] < 2 *
    // slots and grads inside its span, which the layout keeps inside the
    // flat buffer; it writes coef[slot].
    unsafe {
        adamw_norms::launch_unchecked::<R>(
            &values.client,
            count,
            dim,
            grads.clone().into_array_arg(),
            spans.clone().into_array_arg(),
            coef.clone().into_array_arg(),
            slots,
            h.clip_norm,
        )
    };
    let out = || super::empty(values, [units]);
    let (new_values, new_1, new_2) = (out(), out(), out());
    let (count, dim) = elementwise(values, units);
    let hyper = HyperLaunch::new(h.lr, h.beta_1, h.beta_2, h.epsilon, h.decay, h.correction_1, h.correction_2);
    // SAFETY: i < units (checked), the length of every flat array;
    // chunk_slot read at i / CHUNK < units / CHUNK, its length; its slots
    // index spans and coef below their lengths.
    unsafe {
        adamw_update::launch_unchecked::<R>(
            &values.client,
            count,
            dim,
            values.clone().into_array_arg(),
            grads.clone().into_array_arg(),
            moment_1.clone().into_array_arg(),
            moment_2.clone().into_array_arg(),
            chunk_slot.clone().into_array_arg(),
            spans.clone().into_array_arg(),
            coef.into_array_arg(),
            new_values.clone().into_array_arg(),
            new_1.clone().into_array_arg(),
            new_2.clone().into_array_arg(),
            units,
            hyper,
        )
    };
    (new_values, new_1, new_2)
}
