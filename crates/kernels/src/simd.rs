//! Unaligned vector loads and stores at a raw pointer, for the SIMD kernels
//! of the CPU training step (`plane3x3`) and the Pi's engine (grin-infer):
//! their rows start at any column, so no access may assume alignment. And
//! the one sum both run a 3x3 conv's output row with ([`taps_sum`]).

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

/// `NV` vectors of one output row from column `j`: the sum over input
/// planes and taps, in that order.
///
/// # Safety
///
/// Every `tap[k] + j + v * lanes` for `v < NV` must start a whole vector of
/// readable floats (the lines of a [`super::lines::LineLayout`], whose
/// `len` pads each line by a vector).
#[inline(always)]
pub unsafe fn taps_sum<S: Simd, const NV: usize>(
    simd: S,
    taps: &[[*const f32; 9]],
    weights: &[[S::f32s; 9]],
    j: usize,
) -> [S::f32s; NV] {
    let lanes = S::F32_LANES;
    let mut acc = [simd.splat_f32s(0.0); NV];
    for (tap, w) in taps.iter().zip(weights) {
        for k in 0..9 {
            for (v, a) in acc.iter_mut().enumerate() {
                // SAFETY: the caller's bound.
                *a = simd.mul_add_f32s(w[k], unsafe { load::<S>(tap[k].add(j + v * lanes)) }, *a);
            }
        }
    }
    acc
}
