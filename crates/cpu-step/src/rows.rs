//! The passes BatchNorm, ReLU and a bias make over one channel's row, as
//! explicit SIMD over pulp's [`Simd`], entered through `Arch::dispatch`
//! (AVX2 + FMA on x86-64, NEON on aarch64, scalars elsewhere, chosen at run
//! time). Written as plain loops they compiled for the default x86-64
//! target: 4 lanes, no fused multiply-add, and `f32::mul_add` a libm call.

use grin_kernels::affine::Affine;
use pulp::{Arch, Simd, WithSimd};

/// Runs `op` with the CPU's widest vectors.
fn run<Op: WithSimd>(op: Op) -> Op::Output {
    #[cfg(test)]
    if let Some(arch) = tests::FORCED.get() {
        return arch.dispatch(op);
    }
    Arch::new().dispatch(op)
}

/// Sum of `values` and of `(v - shift)^2` (when `squares`), vectors first.
#[inline(always)]
fn sums<S: Simd>(simd: S, values: &[f32], shift: f32, squares: bool) -> f32 {
    let (head, tail) = S::as_simd_f32s(values);
    let s = simd.splat_f32s(shift);
    let mut acc = [simd.splat_f32s(0.0); 4];
    let (quads, rest) = head.as_chunks::<4>();
    for q in quads {
        for k in 0..4 {
            acc[k] = if squares {
                let d = simd.sub_f32s(q[k], s);
                simd.mul_add_f32s(d, d, acc[k])
            } else {
                simd.add_f32s(q[k], acc[k])
            };
        }
    }
    for &v in rest {
        acc[0] = if squares {
            let d = simd.sub_f32s(v, s);
            simd.mul_add_f32s(d, d, acc[0])
        } else {
            simd.add_f32s(v, acc[0])
        };
    }
    let total = simd.add_f32s(simd.add_f32s(acc[0], acc[1]), simd.add_f32s(acc[2], acc[3]));
    let tail: f32 = tail.iter().map(|&v| if squares { (v - shift) * (v - shift) } else { v }).sum();
    simd.reduce_sum_f32s(total) + tail
}

struct Sum<'a>(&'a [f32]);

impl WithSimd for Sum<'_> {
    type Output = f32;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> f32 {
        sums(simd, self.0, 0.0, false)
    }
}

pub(crate) fn sum(values: &[f32]) -> f32 {
    run(Sum(values))
}

/// A part of a row's count, mean and sum of squared deviations (`m2`),
/// which parts combine into the whole row's exactly as far as rounding
/// goes (Chan et al.'s pairwise update).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Moments {
    pub n: f64,
    pub mean: f64,
    pub m2: f64,
}

impl Moments {
    /// Joins `other`, the values that follow this part's.
    pub(crate) fn join(self, other: Moments) -> Moments {
        if other.n == 0.0 {
            return self;
        }
        if self.n == 0.0 {
            return other;
        }
        let n = self.n + other.n;
        let delta = other.mean - self.mean;
        Moments {
            n,
            mean: self.mean + delta * other.n / n,
            m2: self.m2 + other.m2 + delta * delta * self.n * other.n / n,
        }
    }
}

struct Measure<'a>(&'a [f32]);

impl WithSimd for Measure<'_> {
    type Output = Moments;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Moments {
        // Two passes, mean then squared deviations: exact where one pass
        // of sums of squares would cancel.
        let n = self.0.len() as f32;
        let mean = sums(simd, self.0, 0.0, false) / n;
        let m2 = sums(simd, self.0, mean, true);
        Moments { n: n as f64, mean: mean as f64, m2: m2 as f64 }
    }
}

/// `values`' moments, two passes: meant for a part still in cache.
pub(crate) fn moments(values: &[f32]) -> Moments {
    run(Measure(values))
}

struct Normalise<'a> {
    z: &'a [f32],
    /// Where the output goes; `None` when the layer's readers apply it.
    y: Option<&'a mut [f32]>,
    gamma: f32,
    beta: f32,
    epsilon: f32,
    relu: bool,
    /// The row's moments when measured already (else two passes over `z`).
    known: Option<Moments>,
}

impl WithSimd for Normalise<'_> {
    type Output = (f32, f32, f32);

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> (f32, f32, f32) {
        let Normalise { z, y, gamma, beta, epsilon, relu, known } = self;
        // Measured here unless known. f32 values divided in f64 and rounded
        // back give the f32 quotient exactly (53 bits >= 2 x 24 + 2), so
        // either way the variance is the one f32 division would give.
        let Moments { n, mean, m2 } = known.unwrap_or_else(|| Measure(z).with_simd(simd));
        let (mean, var) = (mean as f32, (m2 / n) as f32);
        let inv_std = 1.0 / (var + epsilon).sqrt();
        if let Some(y) = y {
            Affine::batch_norm(mean, inv_std, gamma, beta, relu).map(simd, z, y);
        }
        (mean, var, inv_std)
    }
}

/// Normalises one channel's row `z` into `y` (when given) with its batch
/// statistics and returns (mean, biased variance, 1/sqrt(var + epsilon)).
/// `known`: the row's moments when measured already (part by part, while
/// each part was in cache), which saves two passes over `z`.
pub(crate) fn normalise(
    known: Option<Moments>,
    z: &[f32],
    y: Option<&mut [f32]>,
    gamma: f32,
    beta: f32,
    epsilon: f32,
    relu: bool,
) -> (f32, f32, f32) {
    run(Normalise { z, y, gamma, beta, epsilon, relu, known })
}

struct AddBias<'a> {
    y: &'a mut [f32],
    bias: f32,
    relu: bool,
}

impl WithSimd for AddBias<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let (head, tail) = S::as_mut_simd_f32s(self.y);
        let (b, zero) = (simd.splat_f32s(self.bias), simd.splat_f32s(0.0));
        for v in head {
            let r = simd.add_f32s(*v, b);
            *v = if self.relu { simd.max_f32s(r, zero) } else { r };
        }
        for v in tail {
            let r = *v + self.bias;
            *v = if self.relu { r.max(0.0) } else { r };
        }
    }
}

/// The bias and activation of a layer without BatchNorm, in place.
pub(crate) fn add_bias(y: &mut [f32], bias: f32, relu: bool) {
    run(AddBias { y, bias, relu })
}

struct Mask<'a> {
    g: &'a mut [f32],
    y: &'a [f32],
}

impl WithSimd for Mask<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let (gh, gt) = S::as_mut_simd_f32s(self.g);
        let (yh, yt) = S::as_simd_f32s(self.y);
        let zero = simd.splat_f32s(0.0);
        for (d, &o) in gh.iter_mut().zip(yh) {
            *d = simd.select_f32s(simd.greater_than_f32s(o, zero), *d, zero);
        }
        for (d, &o) in gt.iter_mut().zip(yt) {
            if o <= 0.0 {
                *d = 0.0;
            }
        }
    }
}

/// ReLU's gradient mask in place: zero where the output `y` is not positive.
pub(crate) fn mask(g: &mut [f32], y: &[f32]) {
    run(Mask { g, y })
}

struct NormBackward<'a> {
    g: &'a mut [f32],
    z: &'a [f32],
    mean: f32,
    inv_std: f32,
    gamma: f32,
    beta: f32,
    relu: bool,
}

impl WithSimd for NormBackward<'_> {
    type Output = (f32, f32);

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> (f32, f32) {
        let NormBackward { g, z, mean, inv_std, gamma, beta, relu } = self;
        // ReLU's mask is recomputed from z with the forward's own
        // expression (bit for bit the output's sign), so the output row is
        // never read and the masked gradient never written: two passes over
        // (g, z) where mask, sums and update would make three, plus y's.
        let Affine { scale, shift, .. } = Affine::batch_norm(mean, inv_std, gamma, beta, relu);
        let (vs, vsh, zero, vm) =
            (simd.splat_f32s(scale), simd.splat_f32s(shift), simd.splat_f32s(0.0), simd.splat_f32s(mean));
        let masked = |d: S::f32s, v: S::f32s| {
            if relu {
                simd.select_f32s(simd.greater_than_f32s(simd.mul_add_f32s(v, vs, vsh), zero), d, zero)
            } else {
                d
            }
        };
        let masked_scalar = |d: f32, v: f32| if relu && v * scale + shift <= 0.0 { 0.0 } else { d };
        // Both sums in one pass: of the gradient, and of it times z - mean.
        let (zh, zt) = S::as_simd_f32s(z);
        let (dbeta, dgamma) = {
            let (gh, gt) = S::as_simd_f32s(g);
            let (mut sum, mut dot) = ([zero; 2], [zero; 2]);
            let (pairs, rest) = gh.as_chunks::<2>();
            let (zpairs, zrest) = zh.as_chunks::<2>();
            for (gp, zp) in pairs.iter().zip(zpairs) {
                for k in 0..2 {
                    let d = masked(gp[k], zp[k]);
                    sum[k] = simd.add_f32s(d, sum[k]);
                    dot[k] = simd.mul_add_f32s(d, simd.sub_f32s(zp[k], vm), dot[k]);
                }
            }
            for (&d, &v) in rest.iter().zip(zrest) {
                let d = masked(d, v);
                sum[0] = simd.add_f32s(d, sum[0]);
                dot[0] = simd.mul_add_f32s(d, simd.sub_f32s(v, vm), dot[0]);
            }
            let (mut sum_tail, mut dot_tail) = (0.0f32, 0.0f32);
            for (&d, &v) in gt.iter().zip(zt) {
                let d = masked_scalar(d, v);
                sum_tail += d;
                dot_tail += d * (v - mean);
            }
            let dbeta = simd.reduce_sum_f32s(simd.add_f32s(sum[0], sum[1])) + sum_tail;
            let dot = simd.reduce_sum_f32s(simd.add_f32s(dot[0], dot[1])) + dot_tail;
            (dbeta, dot * inv_std)
        };
        // With xhat = (z - mean) * inv_std: the input's gradient is
        // gamma * inv_std * (d - dbeta / n - xhat * dgamma / n).
        let n = g.len() as f32;
        let (k, a, b) = (gamma * inv_std, dbeta / n, dgamma / n * inv_std);
        let (vk, va, vb) = (simd.splat_f32s(k), simd.splat_f32s(a), simd.splat_f32s(b));
        let (gh, gt) = S::as_mut_simd_f32s(g);
        for (d, &v) in gh.iter_mut().zip(zh) {
            // k * (d - a - (v - mean) * b)
            let centred = simd.sub_f32s(masked(*d, v), va);
            let inner = simd.negate_mul_add_f32s(simd.sub_f32s(v, vm), vb, centred);
            *d = simd.mul_f32s(vk, inner);
        }
        for (d, &v) in gt.iter_mut().zip(zt) {
            *d = k * (masked_scalar(*d, v) - a - (v - mean) * b);
        }
        (dgamma, dbeta)
    }
}

/// BatchNorm's backward pass over one channel's row, in place: `g` arrives
/// as the gradient at the layer's output and leaves as the gradient at the
/// input `z` (through ReLU first, when the layer has one; its mask comes
/// from `z`, the statistics and `gamma`, `beta`, as the forward made it).
/// Returns the gradients of gamma and beta: with `d` the gradient before
/// ReLU, `sum(d * xhat)` and `sum(d)`.
pub(crate) fn norm_backward(g: &mut [f32], z: &[f32], stats: (f32, f32), affine: (f32, f32), relu: bool) -> (f32, f32) {
    let ((mean, inv_std), (gamma, beta)) = (stats, affine);
    run(NormBackward { g, z, mean, inv_std, gamma, beta, relu })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// The dispatch level `run` uses on this thread, when a test sets one.
        pub(super) static FORCED: Cell<Option<Arch>> = const { Cell::new(None) };
    }

    /// Every row pass at length `n` against its scalar definition, at `arch`.
    fn check(n: usize, phase: f32, arch: Arch) {
        FORCED.set(Some(arch));
        let z: Vec<f32> = (0..n).map(|i| (i as f32 * 0.71 + phase).sin() * 2.0 + 0.3).collect();
        let g0: Vec<f32> = (0..n).map(|i| (i as f32 * 1.3).cos()).collect();
        // Sums over n values round differently in another order: bounds grow with n.
        let tol = (n as f32 / 64.0).max(1.0);
        assert!((sum(&z) - z.iter().sum::<f32>()).abs() < 1e-4 * tol, "sum, {n}");

        let mut y = vec![0.0; n];
        let (mean, var, inv_std) = normalise(None, &z, Some(&mut y), 1.5, 0.2, 1e-5, true);
        let m = z.iter().sum::<f32>() / n as f32;
        let v = z.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / n as f32;
        assert!((mean - m).abs() < 1e-5 * tol && (var - v).abs() < 1e-4 * tol, "stats, {n}");
        // The kernel computes x * scale + shift (shift = beta - mean * scale): its
        // rounding grows with |x * scale|, which a near-constant row (n = 1: inv_std
        // = 1/sqrt(epsilon), about 316) makes large (proptest found n = 1 at 2.3e-4).
        for (o, x) in y.iter().zip(&z) {
            let tol = 1e-4 * (1.0 + (x * 1.5 * inv_std).abs());
            assert!((o - ((x - m) * 1.5 * inv_std + 0.2).max(0.0)).abs() < tol, "normalise, {n}");
        }

        // The same statistics joined from parts of the row (the cut anywhere).
        let cut = n / 3;
        let parts = moments(&z[..cut]).join(moments(&z[cut..]));
        let mut y2 = vec![0.0; n];
        let (mean2, var2, _) = normalise(Some(parts), &z, Some(&mut y2), 1.5, 0.2, 1e-5, true);
        assert!((mean2 - m).abs() < 1e-5 * tol && (var2 - v).abs() < 1e-4 * tol, "joined stats, {n}");
        for (a, b) in y2.iter().zip(&y) {
            assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()), "normalise from known moments, {n}");
        }

        let mut g = g0.clone();
        let (dgamma, dbeta) = norm_backward(&mut g, &z, (mean, inv_std), (1.5, 0.2), true);
        let d: Vec<f32> = g0.iter().zip(&y).map(|(&g, &o)| if o > 0.0 { g } else { 0.0 }).collect();
        let xhat: Vec<f32> = z.iter().map(|x| (x - mean) * inv_std).collect();
        let want_beta: f32 = d.iter().sum();
        let want_gamma: f32 = d.iter().zip(&xhat).map(|(a, b)| a * b).sum();
        assert!((dbeta - want_beta).abs() < 1e-4 * tol && (dgamma - want_gamma).abs() < 1e-3 * tol, "sums, {n}");
        for (i, &got) in g.iter().enumerate() {
            let want = 1.5 * inv_std * (d[i] - want_beta / n as f32 - xhat[i] * want_gamma / n as f32);
            assert!((got - want).abs() < 1e-3 * (1.0 + want.abs()), "input gradient {i} of {n}: {got} vs {want}");
        }
        FORCED.set(None);
    }

    #[test]
    fn rows_match_their_scalar_definitions_at_lengths_around_a_vector() {
        for n in [1usize, 7, 8, 9, 31, 64, 77] {
            for (_, arch) in grin_kernels::dispatch_levels() {
                check(n, 0.0, arch);
            }
        }
    }

    proptest::proptest! {
        /// Any length, at every dispatch level the host has.
        #[test]
        fn rows_match_their_definitions_at_any_length_and_level(n in 1usize..300, phase in 0.0f32..6.0) {
            for (_, arch) in grin_kernels::dispatch_levels() {
                check(n, phase, arch);
            }
        }
    }
}
