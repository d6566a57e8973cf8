//! `c = a * b^T` where both matrices run along the inner size: a 1x1
//! conv's weight gradient, the output gradient `[out, points]` times the
//! input `[in, points]`, an output of a few thousand values and an inner
//! size of every point of the batch.
//!
//! gemm packs such operands into panels across the inner size, a strided
//! gather over every input row; on the detector's shapes it ran at less
//! than half its speed on the forward product of the same size. Here each
//! output value is a dot product of two contiguous rows: a block of rows of
//! `a` against a block of rows of `b`, one vector of each at a time, with a
//! chunk of the inner size kept in cache while every block reads it.

use super::view::View;
use pulp::{Arch, Simd, WithSimd};

/// Inner values per chunk: a block's rows of `a` (4 x 8 KB) stay in L1
/// while the rows of `b` stream past them from L2.
const CHUNK: usize = 2048;

/// `c = a * b^T` (`a`: m x k, `b`: n x k, both with unit column stride;
/// `c`: row-major m x n), at the CPU's widest vectors.
pub(crate) fn dots(a: View, b: View, c: &mut [f32]) {
    dots_at(Arch::new(), a, b, c)
}

/// [`dots`] at a given instruction-set level (the tests run each one).
pub(crate) fn dots_at(arch: Arch, a: View, b: View, c: &mut [f32]) {
    assert!(a.col == 1 && b.col == 1 && a.cols == b.cols, "dots: rows along the inner size, of one length");
    assert!(a.fits() && b.fits(), "dots: a row outside its slice");
    assert_eq!(c.len(), a.rows * b.rows, "dots output size");
    c.fill(0.0);
    arch.dispatch(Dots { a, b, c });
}

struct Dots<'a> {
    a: View<'a>,
    b: View<'a>,
    c: &'a mut [f32],
}

impl WithSimd for Dots<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        // AVX2 has 16 vector registers: 2 x 4 sums, the 4 rows of `b` and
        // one of `a` fit. AVX-512 and NEON have 32: 4 x 4.
        if S::F32_LANES == 8 {
            self.blocks::<S, 2>(simd)
        } else {
            self.blocks::<S, 4>(simd)
        }
    }
}

impl Dots<'_> {
    #[inline(always)]
    fn blocks<S: Simd, const R: usize>(self, simd: S) {
        let Dots { a, b, c } = self;
        let (m, n, k) = (a.rows, b.rows, a.cols);
        for start in (0..k).step_by(CHUNK) {
            let len = CHUNK.min(k - start);
            // Rows of `a` and `b` over this chunk (inside their slices: `dots_at`).
            let ra = |i: usize| &a.data[i * a.row + start..][..len];
            let rb = |j: usize| &b.data[j * b.row + start..][..len];
            let mut add = |i: usize, j: usize, sums: &[[f32; 4]]| {
                for (r, s) in sums.iter().enumerate() {
                    for (q, v) in s.iter().enumerate().take(n - j) {
                        c[(i + r) * n + j + q] += v;
                    }
                }
            };
            let mut i = 0;
            while i < m {
                let rows = if m - i >= R { R } else { 1 };
                let mut j = 0;
                while j < n {
                    let cols = (n - j).min(4);
                    let b4: [&[f32]; 4] = std::array::from_fn(|q| rb(j + q.min(cols - 1)));
                    if rows == R {
                        add(i, j, &block::<S, R>(simd, std::array::from_fn(|r| ra(i + r)), b4));
                    } else {
                        add(i, j, &block::<S, 1>(simd, [ra(i)], b4));
                    }
                    j += 4;
                }
                i += rows;
            }
        }
    }
}

/// The `R x 4` dot products of rows `a` against rows `b`, all of one length.
#[inline(always)]
fn block<S: Simd, const R: usize>(simd: S, a: [&[f32]; R], b: [&[f32]; 4]) -> [[f32; 4]; R] {
    let a = a.map(S::as_simd_f32s);
    let b = b.map(S::as_simd_f32s);
    let len = b[0].0.len();
    let (ah, bh) = (a.map(|(h, _)| &h[..len]), b.map(|(h, _)| &h[..len]));
    let mut acc = [[simd.splat_f32s(0.0); 4]; R];
    for v in 0..len {
        let bv = [bh[0][v], bh[1][v], bh[2][v], bh[3][v]];
        for r in 0..R {
            let x = ah[r][v];
            for q in 0..4 {
                acc[r][q] = simd.mul_add_f32s(x, bv[q], acc[r][q]);
            }
        }
    }
    // Plain loops, not closures over `acc`: a closure that borrows it made
    // the compiler keep it in memory and store every sum each iteration.
    let mut out = [[0.0f32; 4]; R];
    for r in 0..R {
        for q in 0..4 {
            let tail: f32 = a[r].1.iter().zip(b[q].1).map(|(x, y)| x * y).sum();
            out[r][q] = simd.reduce_sum_f32s(acc[r][q]) + tail;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use grin_kernels::dispatch_levels;

    /// Every level against the definition, at sizes around the blocks, a
    /// vector and a chunk, with rows that start past their slice's start.
    #[test]
    fn dots_match_the_definition_at_every_level() {
        for (m, n, k) in [(1, 1, 1), (6, 32, 77), (5, 7, 17), (16, 6, CHUNK + 33), (3, 9, 2 * CHUNK)] {
            let stride = k + 3;
            let a: Vec<f32> = (0..m * stride).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n * stride + 1).map(|i| (i as f32 * 0.11).cos()).collect();
            let av = View { data: &a, rows: m, cols: k, row: stride, col: 1 };
            let bv = View { data: &b[1..], rows: n, cols: k, row: stride, col: 1 };
            let want: Vec<f32> = (0..m * n)
                .map(|o| (0..k).map(|p| a[(o / n) * stride + p] * b[1 + (o % n) * stride + p]).sum())
                .collect();
            for (name, arch) in dispatch_levels() {
                let mut c = vec![7.0; m * n];
                dots_at(arch, av, bv, &mut c);
                for (got, want) in c.iter().zip(&want) {
                    assert!((got - want).abs() < 1e-4 * (k as f32).sqrt(), "{name} {m}x{n}x{k}: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "outside its slice")]
    fn a_row_past_the_slice_is_refused() {
        let a = vec![0.0; 10];
        let view = View { data: &a, rows: 2, cols: 6, row: 5, col: 1 };
        dots(view, view, &mut [0.0; 4]);
    }
}
