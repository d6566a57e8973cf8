//! A feature map's planes as raw memory, for the kernels' bands.

/// A feature map's planes as raw memory: value `(c, p)` (plane `c`, pixel
/// `p` in row-major order) is at `ptr + c * plane + p`, and `len` values
/// from `ptr` on belong to the map. Raw rather than a slice because the
/// engine's threads write disjoint bands of rows of the same planes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planes {
    // Read by the kernels (`super::kernels`), which write through `ptr`.
    pub(super) ptr: *mut f32,
    pub(super) plane: usize,
    len: usize,
}

// The engine hands each thread a band of rows that no other thread writes.
unsafe impl Send for Planes {}
unsafe impl Sync for Planes {}

impl Planes {
    /// Planes of `plane` values each over `memory`, which the kernels write.
    pub(super) fn writing(memory: &mut [f32], plane: usize) -> Planes {
        Planes { ptr: memory.as_mut_ptr(), plane, len: memory.len() }
    }

    /// As [`Planes::writing`], over memory that starts uninitialised: the
    /// kernels write every value of it before anything reads it.
    pub(crate) fn uninit(memory: &mut [std::mem::MaybeUninit<f32>], plane: usize) -> Planes {
        Planes { ptr: memory.as_mut_ptr().cast(), plane, len: memory.len() }
    }

    /// Planes over initialised memory that the kernels only read (a map's
    /// data, shared by the bands).
    pub(super) fn reading(memory: &[f32], plane: usize) -> Planes {
        Planes { ptr: memory.as_ptr().cast_mut(), plane, len: memory.len() }
    }

    /// The same planes from pixel `offset` on.
    pub(super) fn at(self, offset: usize) -> Planes {
        assert!(offset <= self.len, "offset {offset} past the map's {} values", self.len);
        Planes { ptr: self.ptr.wrapping_add(offset), len: self.len - offset, ..self }
    }

    /// Whether values `0..pixels` of planes `0..planes` lie in the map: the
    /// bound every kernel's reads and writes through these planes keep.
    pub(super) fn holds(&self, planes: usize, pixels: usize) -> bool {
        planes == 0 || (planes - 1) * self.plane + pixels <= self.len
    }
}
