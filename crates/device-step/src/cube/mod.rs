//! The device step's kernels, written in CubeCL, for every CubeCL runtime
//! Burn trains on (CUDA, wgpu): one launch per op, where Burn's own ops
//! and autodiff took several (the crate's own docs says why that matters).

pub(crate) mod adamw;
mod backends;
pub(crate) mod conv3x3;
pub(crate) mod fuse;
pub(crate) mod loss;
mod net;
pub(crate) mod norm;
pub(crate) mod pointwise;
pub(crate) mod step;

use burn::tensor::Shape;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::CubeRuntime;
use cubecl::prelude::*;
use cubecl::server::CubeCountSelection;

/// A CubeCL runtime Burn trains on.
pub(crate) trait Cube: CubeRuntime {}
impl<R: CubeRuntime> Cube for R {}

/// A device tensor of runtime `R`.
pub(crate) type Dev<R> = CubeTensor<R>;

/// The two flat buffers a step writes in [`crate::FlatLayout`]:
/// every trained parameter's gradient, and its value as the step read it
/// (the optimizer's input, so it need not gather the parameters).
pub(crate) struct Flat<R: Cube> {
    pub grads: Dev<R>,
    pub values: Dev<R>,
}

/// Threads of a cube that reduces (a power of two: the shared-memory tree
/// halves it).
pub(crate) const REDUCE_THREADS: usize = 256;

/// Sums each of `lanes` rows of `shared` (`lanes * CUBE_DIM` values, row
/// `k` holding each thread's partial at `k * CUBE_DIM + thread`) into its
/// first value, halving the threads that add at each level: the cube's
/// reduction, every thread taking part in every sync.
#[cube]
pub(crate) fn tree_sum(shared: &mut SharedMemory<f32>, #[comptime] lanes: usize) {
    let threads = CUBE_DIM as usize;
    let t = UNIT_POS as usize;
    sync_cube();
    let mut half = threads / 2;
    while half > 0 {
        if t < half {
            #[unroll]
            for k in 0..lanes {
                shared[k * threads + t] += shared[k * threads + t + half];
            }
        }
        sync_cube();
        half /= 2;
    }
}

/// Where an input gradient goes: a new tensor, or added to one already
/// holding the gradient from another reader of the same input.
pub(crate) enum Target<'a, R: Cube> {
    New,
    AddTo(&'a Dev<R>),
}

impl<R: Cube> Target<'_, R> {
    /// The tensor to write, and whether to add to it.
    pub(crate) fn tensor<const D: usize>(&self, like: &Dev<R>, shape: [usize; D]) -> (Dev<R>, bool) {
        match self {
            Target::New => (empty(like, shape), false),
            Target::AddTo(t) => (Dev::clone(t), true),
        }
    }
}

/// A new contiguous f32 tensor of `shape` on `like`'s device, its values unset.
pub(crate) fn empty<R: Cube, const D: usize>(like: &Dev<R>, shape: [usize; D]) -> Dev<R> {
    burn_cubecl::ops::numeric::empty_device::<R, f32>(like.client.clone(), like.device.clone(), Shape::from(shape))
}

/// Cubes and their size for one thread per value of `units`.
pub(crate) fn elementwise<R: Cube>(like: &Dev<R>, units: usize) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new(&like.client, units);
    (cubecl::calculate_cube_count_elemwise(&like.client, units, dim), dim)
}

/// One thread per value of `ys * zs` rows of `len` values each: x along a
/// row, in cubes of up to 256 threads (a short row gets a cube of its own
/// width, rounded up to 32), y and z the rows' two indices (a channel, or
/// a block of channels, and a split), so that a thread divides at most to
/// find its image and point, never in its loops.
pub(crate) fn row_grid<R: Cube>(like: &Dev<R>, len: usize, ys: usize, zs: usize) -> (CubeCount, CubeDim) {
    let width = len.next_multiple_of(32).min(256);
    let (_, max_y, max_z) = like.client.properties().hardware.max_cube_count;
    assert!(
        ys <= max_y as usize && zs <= max_z as usize,
        "a launch of {ys} x {zs} rows is more than the device's grid ({max_y} x {max_z}): a smaller batch fits"
    );
    (CubeCount::Static(len.div_ceil(width) as u32, ys as u32, zs as u32), CubeDim::new_1d(width as u32))
}

/// Values a thread of a reducing cube sums, at least, before the cube adds
/// its threads' sums up.
const PER_THREAD: usize = 64;

/// `cubes` cubes that each reduce over `work` values: as many threads as
/// give each [`PER_THREAD`] values or more (a power of two, 32 to
/// [`REDUCE_THREADS`]). The sum's tree costs every thread a wait at each
/// level (on a CPU driver, a coroutine switch), so a short sum gets few
/// threads; a long one (a GPU's batch) all of them. Kernels read their
/// thread count from `CUBE_DIM`.
pub(crate) fn reducing<R: Cube>(like: &Dev<R>, cubes: usize, work: usize) -> (CubeCount, CubeDim) {
    let count = CubeCountSelection::new(&like.client, cubes as u32).cube_count();
    let threads = (work / PER_THREAD).next_power_of_two().clamp(32, REDUCE_THREADS);
    (count, CubeDim::new_1d(threads as u32))
}

/// `dims` values of contiguous `flat` from `start`, as a tensor of the same
/// memory: a parameter's slot of the flat layout. A copy where the start
/// breaks the device's alignment for a binding's offset (never, for
/// starts on [`crate::CHUNK`]).
pub(crate) fn view<R: Cube>(flat: &Dev<R>, start: usize, dims: &[usize]) -> Dev<R> {
    let len = dims.iter().product::<usize>();
    let total = flat.meta.num_elements();
    assert!(flat.is_contiguous() && start + len <= total, "a slot of the flat buffer");
    let bytes = size_of::<f32>() as u64;
    let offset = start as u64 * bytes;
    let shape = Shape::from(dims.to_vec());
    if !offset.is_multiple_of(flat.client.properties().memory.alignment) {
        let part = burn_cubecl::kernel::slice(flat.clone(), std::slice::from_ref(&(start..start + len)));
        return burn_cubecl::ops::reshape(part, shape);
    }
    let handle = flat.handle.clone().offset_start(offset).offset_end((total - start - len) as u64 * bytes);
    CubeTensor::new_contiguous(flat.client.clone(), flat.device.clone(), shape, handle, flat.dtype)
}

#[cfg(all(test, feature = "wgpu"))]
mod tests;
