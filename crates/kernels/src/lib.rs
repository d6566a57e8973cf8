//! grin-kernels: CPU loops over plain `f32` slices, the depthwise and 3x3
//! convolutions that the Pi's engine (grin-infer), the CPU backend's forward
//! pass and the CPU training step (grin-cpu-step) all run, each checked at
//! every instruction-set level the host has against its plain definition.
//!
//! It depends on no other grin crate and on no Burn: whatever runs a
//! grin model on a CPU may use it.

pub mod affine;
pub mod depthwise;
pub mod lines;
pub mod plane3x3;
pub mod simd;

/// Every instruction-set level this host can dispatch the SIMD kernels to,
/// scalar first: what the kernels' tests run each case at, against the
/// one-multiply-at-a-time definition. On x86-64 that is scalar, AVX2 + FMA
/// and AVX-512 where the CPU has them; elsewhere scalar and the best level
/// found (NEON on aarch64).
pub fn dispatch_levels() -> Vec<(&'static str, pulp::Arch)> {
    let mut levels = vec![("scalar", pulp::Arch::Scalar)];
    #[cfg(target_arch = "x86_64")]
    if let Some(v3) = pulp::x86::V3::try_new() {
        levels.push(("avx2+fma", pulp::Arch::V3(v3)));
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(v4) = pulp::x86::V4::try_new() {
        levels.push(("avx512", pulp::Arch::V4(v4)));
    }
    let best = pulp::Arch::new();
    if levels.len() == 1 && !matches!(best, pulp::Arch::Scalar) {
        levels.push(("best", best));
    }
    levels
}
