//! BatchNorm's per-channel map and ReLU, `y = max(z * scale + shift, 0)`,
//! over a run of values: written once for the CPU step's two places that
//! apply it, normalising a layer's row (grin-cpu-step's `rows`) and
//! reading a layer whose output was left unapplied ([`super::plane3x3`]).

use pulp::Simd;

/// One channel's BatchNorm, folded: `z * scale + shift`, then ReLU when
/// `relu`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    pub scale: f32,
    pub shift: f32,
    pub relu: bool,
}

impl Affine {
    /// BatchNorm with these statistics and parameters, folded.
    pub fn batch_norm(mean: f32, inv_std: f32, gamma: f32, beta: f32, relu: bool) -> Affine {
        Affine { scale: gamma * inv_std, shift: beta - mean * gamma * inv_std, relu }
    }

    /// One value, for a run's last few (pulp's partial loads and stores are
    /// a call each at some levels).
    #[inline(always)]
    fn apply_one(self, v: f32) -> f32 {
        let r = v * self.scale + self.shift;
        if self.relu {
            r.max(0.0)
        } else {
            r
        }
    }

    #[inline(always)]
    fn apply<S: Simd>(self, simd: S, v: S::f32s) -> S::f32s {
        let r = simd.mul_add_f32s(v, simd.splat_f32s(self.scale), simd.splat_f32s(self.shift));
        if self.relu {
            simd.max_f32s(r, simd.splat_f32s(0.0))
        } else {
            r
        }
    }

    /// `to[i] = self(from[i])`: whole vectors, then the last few values one
    /// at a time.
    #[inline(always)]
    pub fn map<S: Simd>(self, simd: S, from: &[f32], to: &mut [f32]) {
        assert_eq!(from.len(), to.len(), "affine map sizes");
        let (from_head, from_tail) = S::as_simd_f32s(from);
        let (to_head, to_tail) = S::as_mut_simd_f32s(to);
        for (o, &v) in to_head.iter_mut().zip(from_head) {
            *o = self.apply(simd, v);
        }
        for (o, &v) in to_tail.iter_mut().zip(from_tail) {
            *o = self.apply_one(v);
        }
    }
}
