//! Matrix products for the 1x1 convs and their gradients, on the `gemm`
//! crates' f32 kernels (candle's CPU matmul): their packed, register-blocked kernels with
//! runtime CPU-feature dispatch (AVX2/FMA, AVX-512, NEON) ran the detector's
//! shapes 1.1-3x faster than `matrixmultiply` (burn-ndarray's matmul) on one
//! thread here. Every matrix is a slice with a row and a column stride, so a
//! transpose is a view, never a copy.

use super::dots::dots;
use super::view::View;
use gemm_common::Parallelism;
use rayon::prelude::*;

/// The fewest inner values a thread's part of a [`dots`] product gets.
const MIN_PART: usize = 256;

/// `c = a * b`, or `c += a * b` when `accumulate`; `c` is row-major
/// `a.rows x b.cols`. Threads: rayon's pool, as every CPU op here.
///
/// A product whose operands both run along the inner size (a 1x1 conv's
/// weight gradient: an output of a few thousand values, an inner size of
/// every point of the batch) is row-by-row dot products ([`dots`]), split
/// along the inner size, one part per thread, and the parts added in
/// order. gemm shares work out by blocks of the output, which ran such a
/// product on one thread, and packs it slowly.
pub(crate) fn matmul(a: View, b: View, c: &mut [f32], accumulate: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "matmul inner sizes");
    assert!(a.fits() && b.fits(), "matmul view outside its slice");
    assert_eq!(c.len(), m * n, "matmul output size");
    if m == 0 || n == 0 {
        return;
    }
    let threads = rayon::current_num_threads();
    if a.col == 1 && b.row == 1 {
        let parts = threads.min(k / MIN_PART).max(1);
        let part = k.div_ceil(parts);
        let sums: Vec<Vec<f32>> = (0..parts)
            .into_par_iter()
            .map(|t| {
                let (from, to) = ((t * part).min(k), ((t + 1) * part).min(k));
                let mut c = vec![0.0f32; m * n];
                dots(a.inner(from, to), b.t().inner(from, to), &mut c);
                c
            })
            .collect();
        for (t, p) in sums.iter().enumerate() {
            let first = t == 0 && !accumulate;
            c.iter_mut().zip(p).for_each(|(c, p)| *c = if first { *p } else { *c + p });
        }
        return;
    }
    let parallelism = if threads > 1 { Parallelism::Rayon(threads) } else { Parallelism::None };
    product(a, b, c, accumulate, parallelism);
}

/// [`matmul`]'s product through gemm's f32 kernels, its sizes already
/// checked. This is what `gemm::gemm` does for f32 with non-negative
/// strides, without the `gemm` crate, which is generic over the element type
/// and so compiles its f64 and complex kernels too: three crates grin never
/// calls, 17 s of a cold build's compile on 2 cores (docs/benchmarks.md).
fn product(a: View, b: View, c: &mut [f32], accumulate: bool, parallelism: Parallelism) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(b.rows == k && a.fits() && b.fits() && c.len() == m * n, "matmul sizes");
    // The kernels prefer an output whose columns are contiguous: a row-major
    // `c = a b` (wider than one column) is computed as `c^T = b^T a^T`, as
    // `gemm::gemm` swaps them (`dst_cs`, `dst_rs`: the output's strides).
    let (m, n, dst_cs, dst_rs, lhs, rhs) =
        if n > 1 { (n, m, n as isize, 1, b.t(), a.t()) } else { (m, n, 1, n as isize, a, b) };
    // SAFETY: every index the product reads or writes is inside its slice
    // (checked by `fits` and the output size above; a transpose is the same
    // elements), the output does not alias the inputs (it is the only
    // `&mut`), and every stride is non-negative, as the kernels require.
    unsafe {
        gemm_f32::gemm::f32::get_gemm_fn()(
            m,
            n,
            k,
            c.as_mut_ptr(),
            dst_cs,
            dst_rs,
            accumulate,
            lhs.data.as_ptr(),
            lhs.col as isize,
            lhs.row as isize,
            rhs.data.as_ptr(),
            rhs.col as isize,
            rhs.row as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: View, b: View) -> Vec<f32> {
        let mut c = vec![0.0; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                c[i * b.cols + j] =
                    (0..a.cols).map(|k| a.data[i * a.row + k * a.col] * b.data[k * b.row + j * b.col]).sum();
            }
        }
        c
    }

    #[test]
    fn products_of_views_and_transposes_match_the_definition() {
        let a: Vec<f32> = (0..35).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..77).map(|i| (i as f32 * 0.11).cos()).collect();
        let (av, bv) = (View::rows(&a, 5, 7), View::rows(&b, 7, 11));
        let mut c = vec![0.0; 55];
        matmul(av, bv, &mut c, false);
        let want = naive(av, bv);
        assert!(c.iter().zip(&want).all(|(x, y)| (x - y).abs() < 1e-5));
        // Accumulating adds the product once more.
        matmul(av, bv, &mut c, true);
        assert!(c.iter().zip(&want).all(|(x, y)| (x - 2.0 * y).abs() < 1e-4));
        // a^T (7x5) times a (5x7), both views of one slice.
        let mut g = vec![0.0; 49];
        matmul(av.t(), av, &mut g, false);
        let want = naive(av.t(), av);
        assert!(g.iter().zip(&want).all(|(x, y)| (x - y).abs() < 1e-5));
    }

    /// A weight gradient's shape (both operands along the inner size):
    /// split across the threads of the pool it runs in (one part when the
    /// inner size is short), then added, overwritten or onto `c`.
    #[test]
    fn products_along_the_inner_size_are_split_across_threads_and_added() {
        for k in [MIN_PART - 1, 3 * MIN_PART + 5] {
            split_products_match_the_definition(3, k, 2);
        }
    }

    fn split_products_match_the_definition(m: usize, k: usize, n: usize) {
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos()).collect();
        // a (m x k) times b^T, b stored n x k as a dense layer's input is.
        let (av, bv) = (View::rows(&a, m, k), View::rows(&b, n, k).t());
        let want = naive(av, bv);
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a pool");
            let mut c = vec![5.0; m * n];
            pool.install(|| matmul(av, bv, &mut c, false));
            assert!(
                c.iter().zip(&want).all(|(x, y)| (x - y).abs() < 1e-3),
                "{threads} threads, {k}: {c:?} vs {want:?}"
            );
            pool.install(|| matmul(av, bv, &mut c, true));
            assert!(c.iter().zip(&want).all(|(x, y)| (x - 2.0 * y).abs() < 2e-3), "{threads} threads, added");
        }
    }
}
