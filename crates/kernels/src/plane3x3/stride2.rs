//! The 3x3 conv's input gradient at stride 2, where the transposed conv
//! is not a conv of the same kind ([`super::Plane3x3::input_grad`] runs
//! stride 1 as the forward kernel with the taps turned).

use super::Plane3x3;
use crate::simd::{load, store};
use pulp::{Simd, WithSimd};

/// The input gradient at stride 2. Input row `2p` takes only tap row 1 of
/// output row `p`; row `2p + 1` takes tap row 0 of output row `p + 1` and
/// tap row 2 of row `p`; columns likewise. So per output row `p`, with
/// `g1 = g[p]`, `g0 = g[p + 1]` (zero past the end):
///
/// - `dx[2p][2q] = w11 g1[q]`, `dx[2p][2q+1] = w10 g1[q+1] + w12 g1[q]`
/// - `dx[2p+1][2q] = w01 g0[q] + w21 g1[q]`,
///   `dx[2p+1][2q+1] = w00 g0[q+1] + w02 g0[q] + w20 g1[q+1] + w22 g1[q]`
///
/// computed as runs of even and odd columns, then interleaved into `dx`.
pub(super) struct InputGrad2<'a> {
    pub(super) p: Plane3x3,
    pub(super) images: usize,
    pub(super) g: &'a [f32],
    pub(super) w: &'a [f32],
    pub(super) dx: &'a mut [f32],
    pub(super) lines: &'a mut Vec<f32>,
    pub(super) accumulate: bool,
}

impl WithSimd for InputGrad2<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let InputGrad2 { p, images, g, w, dx, lines, accumulate } = self;
        let splat = |k: usize| simd.splat_f32s(w[k]);
        let ws: [S::f32s; 9] = std::array::from_fn(splat);
        let (in_len, out_len) = (p.in_len(), p.out_len());
        for (g, dx) in g.chunks_exact(out_len).zip(dx.chunks_exact_mut(in_len)).take(images) {
            input_grad2_plane(simd, p, &ws, g, dx, lines, accumulate);
        }
    }
}

/// One image of [`InputGrad2`].
#[inline(always)]
fn input_grad2_plane<S: Simd>(
    simd: S,
    p: Plane3x3,
    ws: &[S::f32s; 9],
    g: &[f32],
    dx: &mut [f32],
    lines: &mut Vec<f32>,
    accumulate: bool,
) {
    let lanes = S::F32_LANES;
    let wo = p.out_w;
    // Each output row copied with a zero after it (and a vector's
    // worth more), and one zero row after the last.
    let len = wo + 1 + lanes;
    lines.clear();
    lines.resize((p.out_h + 1) * len, 0.0);
    for (i, row) in g.chunks_exact(wo).enumerate() {
        lines[i * len..][..wo].copy_from_slice(row);
    }
    // Scratch for one input row's even and odd columns.
    let (even_at, odd_at) = ((p.out_h + 1) * len, (p.out_h + 1) * len + len);
    lines.resize(odd_at + len, 0.0);
    let odd_width = p.in_w / 2;
    for r in 0..p.in_h {
        let pr = r / 2;
        // (tap row, g row) pairs feeding input row r.
        let (first, second) = if r % 2 == 0 { ((1, pr), None) } else { ((0, pr + 1), Some((2, pr))) };
        let (lines_in, scratch) = lines.split_at_mut(even_at);
        let (even, odd) = scratch.split_at_mut(len);
        let line = |row: usize| &lines_in[row * len..][..len];
        let mut q = 0;
        // SAFETY: every load reads `q + 1 + lanes <= len` values of a
        // line; stores stay in the first `wo + lanes - 1 < len` values.
        unsafe {
            while q < wo {
                let mut e = simd.splat_f32s(0.0);
                let mut o = simd.splat_f32s(0.0);
                for (ky, row) in std::iter::once(first).chain(second) {
                    let l = line(row).as_ptr();
                    let (at, next) = (load::<S>(l.add(q)), load::<S>(l.add(q + 1)));
                    e = simd.mul_add_f32s(ws[ky * 3 + 1], at, e);
                    o = simd.mul_add_f32s(ws[ky * 3], next, o);
                    o = simd.mul_add_f32s(ws[ky * 3 + 2], at, o);
                }
                store::<S>(even.as_mut_ptr().add(q), e);
                store::<S>(odd.as_mut_ptr().add(q), o);
                q += lanes;
            }
        }
        let out = &mut dx[r * p.in_w..][..p.in_w];
        interleave(out, &even[..wo], &odd[..odd_width], accumulate);
    }
}

/// `out[2q] (+)= even[q]`, `out[2q + 1] (+)= odd[q]`: `out` holds
/// `even.len() + odd.len()` values, and `even` has one more than `odd` when
/// that is odd. Indexed loops over slices cut to their lengths, which the
/// compiler turns into vector shuffles (a zip of pairs stayed scalar).
#[inline(always)]
fn interleave(out: &mut [f32], even: &[f32], odd: &[f32], accumulate: bool) {
    let pairs = odd.len();
    assert!(even.len() >= pairs && out.len() == even.len() + pairs && even.len() - pairs <= 1, "interleave lengths");
    let (head, last) = out.split_at_mut(2 * pairs);
    let (e, o) = (&even[..pairs], &odd[..pairs]);
    if accumulate {
        for q in 0..pairs {
            head[2 * q] += e[q];
            head[2 * q + 1] += o[q];
        }
        if let Some(x) = last.first_mut() {
            *x += even[pairs];
        }
    } else {
        for q in 0..pairs {
            head[2 * q] = e[q];
            head[2 * q + 1] = o[q];
        }
        if let Some(x) = last.first_mut() {
            *x = even[pairs];
        }
    }
}
