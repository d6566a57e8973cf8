//! Target assignment and the loss with its gradient, one thread per (image,
//! point), in two kernels: the first assigns and sums each cube's terms,
//! the second adds those sums up (every cube for itself: a few hundred
//! values), normalises, and writes each point's gradient. The rule and the
//! terms are the CPU step's (grin-cpu-step's `loss`), which its tests hold to
//! [`grin_model::assign`] and [`grin_model::loss()`].

mod point;

use super::{tree_sum, Cube, Dev, REDUCE_THREADS};
use cubecl::prelude::*;
use cubecl::server::CubeCountSelection;
use grin_model::LossWeights;
use grin_terms::output::{FACE, OUTPUTS, SMILE};
use point::{point_terms, PointTableArgs, PointTableArgsLaunch};

/// The sums each cube of the first kernel leaves: positives, known smiles,
/// the focal, box and smile terms.
const SUMS: usize = 5;

#[derive(CubeLaunch, CubeType, Clone, Copy)]
pub(crate) struct LossShape {
    pub batch: usize,
    pub points: usize,
    pub slots: usize,
    pub alpha: f32,
    pub gamma: f32,
    pub box_weight: f32,
    pub smile_weight: f32,
    /// What the gradient (not the loss) is multiplied by.
    pub grad_scale: f32,
}

/// The point table, `[points]` each.
#[derive(Clone)]
pub(crate) struct PointTable<R: Cube> {
    pub cx: Dev<R>,
    pub cy: Dev<R>,
    pub stride: Dev<R>,
    pub size_lo: Dev<R>,
    pub size_hi: Dev<R>,
}

/// Each cube's sums of the `SUMS` terms over its points, at
/// `partial[cube * SUMS..]`.
#[cube(launch_unchecked)]
fn loss_sums(
    raw: &Array<f32>,
    boxes: &Array<f32>,
    labels: &Array<i32>,
    table: &PointTableArgs,
    partial: &mut Array<f32>,
    s: LossShape,
    cubes: usize,
) {
    if CUBE_POS >= cubes {
        terminate!();
    }
    let threads = comptime!(REDUCE_THREADS);
    let t = UNIT_POS as usize;
    let i = CUBE_POS * threads + t;
    let mut terms = Array::<f32>::new(5usize);
    let mut g = Array::<f32>::new(6usize);
    if i < s.batch * s.points {
        point_terms(raw, boxes, labels, table, s, i / s.points, i % s.points, &mut terms, &mut g);
    } else {
        #[unroll]
        for k in 0..5usize {
            terms[k] = 0.0;
        }
    }
    let mut shared = SharedMemory::<f32>::new(5 * threads);
    #[unroll]
    for k in 0..5usize {
        shared[k * threads + t] = terms[k];
    }
    tree_sum(&mut shared, 5usize);
    if t < 5 {
        partial[CUBE_POS * 5 + t] = shared[t * threads];
    }
}

/// Adds the partial sums up, writes the loss parts (cube 0) and each
/// point's gradient, normalised as `loss()` normalises.
#[cube(launch_unchecked)]
fn loss_gradient(
    raw: &Array<f32>,
    boxes: &Array<f32>,
    labels: &Array<i32>,
    table: &PointTableArgs,
    partial: &Array<f32>,
    draw: &mut Array<f32>,
    total: &mut Array<f32>,
    face_part: &mut Array<f32>,
    box_part: &mut Array<f32>,
    smile_part: &mut Array<f32>,
    s: LossShape,
    cubes: usize,
) {
    if CUBE_POS >= cubes {
        terminate!();
    }
    let threads = comptime!(REDUCE_THREADS);
    let t = UNIT_POS as usize;
    let mut totals = SharedMemory::<f32>::new(5usize);
    if t < 5 {
        let mut sum = 0.0f32;
        for c in 0..cubes {
            sum += partial[c * 5 + t];
        }
        totals[t] = sum;
    }
    sync_cube();
    let per_positive = 1.0 / f32::max(totals[0], 1.0);
    let per_known = 1.0 / f32::max(totals[1], 1.0);
    if CUBE_POS == 0 && t == 0 {
        let face = totals[2] * per_positive;
        let boxes_value = totals[3] * per_positive;
        let smile = totals[4] * per_known;
        total[0] = face + s.box_weight * boxes_value + s.smile_weight * smile;
        face_part[0] = face;
        box_part[0] = boxes_value;
        smile_part[0] = smile;
    }
    let i = CUBE_POS * threads + t;
    if i < s.batch * s.points {
        let (b, n) = (i / s.points, i % s.points);
        let mut terms = Array::<f32>::new(5usize);
        let mut g = Array::<f32>::new(6usize);
        point_terms(raw, boxes, labels, table, s, b, n, &mut terms, &mut g);
        #[unroll]
        for k in 0..6usize {
            let scale = if k == comptime!(FACE) {
                per_positive
            } else if k == comptime!(SMILE) {
                s.smile_weight * per_known
            } else {
                s.box_weight * per_positive
            };
            draw[(b * comptime!(OUTPUTS) + k) * s.points + n] = g[k] * scale * s.grad_scale;
        }
    }
}

impl LossShape {
    pub(crate) fn new(batch: usize, points: usize, slots: usize, w: LossWeights, grad_scale: f32) -> LossShape {
        LossShape {
            batch,
            points,
            slots,
            alpha: w.focal_alpha,
            gamma: w.focal_gamma,
            box_weight: w.box_weight,
            smile_weight: w.smile_weight,
            grad_scale,
        }
    }

    fn arg<R: Runtime>(self) -> LossShapeLaunch<R> {
        LossShapeLaunch::new(
            self.batch,
            self.points,
            self.slots,
            self.alpha,
            self.gamma,
            self.box_weight,
            self.smile_weight,
            self.grad_scale,
        )
    }
}

impl<R: Cube> PointTable<R> {
    fn arg(&self) -> PointTableArgsLaunch<R> {
        let a = |t: &Dev<R>| t.clone().into_array_arg();
        PointTableArgsLaunch::new(a(&self.cx), a(&self.cy), a(&self.stride), a(&self.size_lo), a(&self.size_hi))
    }
}

/// The loss parts (total, face, boxes, smile; one value each) and d(total)/d(raw).
pub(crate) struct LossOut<R: Cube> {
    pub parts: [Dev<R>; 4],
    pub draw: Dev<R>,
}

/// The loss of `raw` (`[batch, OUTPUTS, points]`) against `boxes` (`[batch,
/// slots, 4]`) and `labels` (`[batch, slots]`, i32).
pub(crate) fn loss<R: Cube>(
    raw: &Dev<R>,
    boxes: &Dev<R>,
    labels: &Dev<R>,
    table: &PointTable<R>,
    s: LossShape,
) -> LossOut<R> {
    let units = s.batch * s.points;
    let cubes = units.div_ceil(REDUCE_THREADS);
    let partial = super::empty(raw, [cubes * SUMS]);
    let draw = super::empty(raw, [s.batch, OUTPUTS, s.points]);
    let parts = [(); 4].map(|_| super::empty(raw, [1]));
    let count = || CubeCountSelection::new(&raw.client, cubes as u32).cube_count();
    let dim = CubeDim::new_1d(REDUCE_THREADS as u32);
    // SAFETY: a thread's (image, point) is below batch * points (checked);
    // raw and draw are read and written at (b * OUTPUTS + k) * points + n,
    // boxes at (b * slots + slot) * 4 + 3, labels at b * slots + slot, the
    // table at n < points; each cube c < cubes writes partial[c * SUMS +
    // k], k < SUMS, and the second kernel reads those.
    unsafe {
        loss_sums::launch_unchecked::<R>(
            &raw.client,
            count(),
            dim,
            raw.clone().into_array_arg(),
            boxes.clone().into_array_arg(),
            labels.clone().into_array_arg(),
            table.arg(),
            partial.clone().into_array_arg(),
            s.arg::<R>(),
            cubes,
        );
        loss_gradient::launch_unchecked::<R>(
            &raw.client,
            count(),
            dim,
            raw.clone().into_array_arg(),
            boxes.clone().into_array_arg(),
            labels.clone().into_array_arg(),
            table.arg(),
            partial.into_array_arg(),
            draw.clone().into_array_arg(),
            parts[0].clone().into_array_arg(),
            parts[1].clone().into_array_arg(),
            parts[2].clone().into_array_arg(),
            parts[3].clone().into_array_arg(),
            s.arg::<R>(),
            cubes,
        );
    }
    LossOut { parts, draw }
}
