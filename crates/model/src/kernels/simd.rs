//! Unaligned vector loads and stores at a raw pointer, for the SIMD kernels
//! of the CPU training step (`plane3x3`) and the Pi's engine (grin-infer):
//! their rows start at any column, so no access may assume alignment.

use pulp::Simd;

/// Reads one vector of `f32`s at `p`.
///
/// # Safety
/// `p..p + S::f32s lanes` must be readable.
#[inline(always)]
pub unsafe fn load<S: Simd>(p: *const f32) -> S::f32s {
    // SAFETY: the caller's bound; unaligned, as any column may start a vector.
    unsafe { p.cast::<S::f32s>().read_unaligned() }
}

/// Writes one vector of `f32`s at `p`.
///
/// # Safety
/// `p..p + S::f32s lanes` must be writable.
#[inline(always)]
pub unsafe fn store<S: Simd>(p: *mut f32, v: S::f32s) {
    // SAFETY: the caller's bound; unaligned, as any column may start a vector.
    unsafe { p.cast::<S::f32s>().write_unaligned(v) }
}
