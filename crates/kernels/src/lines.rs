//! Zero-padded "lines": a 3x3 conv's input rows laid out so that every tap
//! of an output row is one contiguous run, at stride 1 and 2 alike. The
//! Pi's engine (`grin-infer`'s `fast`) fills them per band of rows, the CPU
//! training step's kernels ([`super::plane3x3`]) per plane.

/// Where a 3x3 conv (padding 1, stride 1 or 2) finds its input for a band
/// of output rows: "lines", zero-padded copies of the input rows, laid out
/// so that every tap of an output row is one contiguous run.
///
/// Stride 1: line `t` is input row `r0 + t - 1` with one zero on each side;
/// tap `(ky, kx)` of output row `r0 + i`, column `j` is line `i + ky`,
/// element `j + kx`. Stride 2: each input row `2 r0 - 1 + t` is split into
/// its even and odd padded columns (lines `2t` and `2t + 1`), so that taps
/// at stride 2 are contiguous too: `kx = 0, 1, 2` read even `j`, odd `j`,
/// even `j + 1`.
#[derive(Debug, Clone, Copy)]
pub struct LineLayout {
    pub stride: usize,
    pub in_width: usize,
    pub in_height: usize,
    pub out_width: usize,
    /// Floats per line: every vector a row's output reads stays inside.
    pub len: usize,
}

impl LineLayout {
    pub fn new(stride: usize, in_height: usize, in_width: usize, lanes: usize) -> LineLayout {
        assert!(stride == 1 || stride == 2, "3x3 stride {stride}");
        let out_width = in_width.div_ceil(stride);
        // A row's last vector starts at most at max(out_width - lanes, 0);
        // it reads `lanes` values from there plus the tap offset (2 at
        // stride 1, 1 at stride 2).
        let len = out_width.max(lanes) + 3 - stride;
        LineLayout { stride, in_width, in_height, out_width, len }
    }

    /// Lines one input plane needs for `rows` output rows.
    pub fn lines(&self, rows: usize) -> usize {
        if self.stride == 1 {
            rows + 2
        } else {
            2 * (2 * rows + 1)
        }
    }

    /// (line, offset) of tap `(ky, kx)` of the band's output row `i`.
    #[inline(always)]
    pub fn tap(&self, i: usize, ky: usize, kx: usize) -> (usize, usize) {
        if self.stride == 1 {
            (i + ky, kx)
        } else {
            (2 * (2 * i + ky) + (kx & 1), kx >> 1)
        }
    }

    /// Writes the lines of one input `plane` for output rows `r0..r0 + rows`
    /// into `lines` (`self.lines(rows) * self.len` floats). Parts that are
    /// padding are zero; elements past the padded row are never written, so
    /// they stay what the caller zeroed them to.
    #[inline(always)]
    pub fn fill(&self, plane: &[f32], r0: usize, rows: usize, lines: &mut [f32]) {
        let (w, len) = (self.in_width, self.len);
        let input_row = |r: isize| (r >= 0 && (r as usize) < self.in_height).then(|| &plane[r as usize * w..][..w]);
        if self.stride == 1 {
            for t in 0..rows + 2 {
                let line = &mut lines[t * len..][..w + 2];
                match input_row((r0 + t) as isize - 1) {
                    Some(row) => {
                        line[0] = 0.0;
                        line[1..=w].copy_from_slice(row);
                        line[w + 1] = 0.0;
                    }
                    None => line.fill(0.0),
                }
            }
        } else {
            let wo = self.out_width;
            for t in 0..2 * rows + 1 {
                let (even, odd) = lines[2 * t * len..][..2 * len].split_at_mut(len);
                let (even, odd) = (&mut even[..=wo], &mut odd[..=wo]);
                let Some(row) = input_row((2 * r0 + t) as isize - 1) else {
                    even.fill(0.0);
                    odd.fill(0.0);
                    continue;
                };
                // Padded column q is input column q - 1: even j is input
                // 2j - 1, odd j is input 2j.
                even[0] = 0.0;
                let j = split_columns(row, &mut odd[..wo], &mut even[1..]);
                let (pairs, last) = row[2 * j..].as_chunks::<2>();
                for (k, &[a, b]) in pairs.iter().enumerate() {
                    odd[j + k] = a;
                    even[j + k + 1] = b;
                }
                let n = j + pairs.len();
                if let [a] = last {
                    odd[n] = *a;
                    even[n + 1] = 0.0;
                    odd[n + 1] = 0.0;
                } else {
                    odd[n] = 0.0;
                }
            }
        }
    }
}

/// Splits the first `2n` values of `row` into `firsts` (columns 0, 2, ...)
/// and `seconds` (1, 3, ...) as far as whole vectors go, and returns `n`;
/// the caller does the rest. A plain copy, so exact on every instruction
/// set; pulp's own deinterleave leaves lanes in another order.
fn split_columns(row: &[f32], firsts: &mut [f32], seconds: &mut [f32]) -> usize {
    let n = (row.len() / 2).min(firsts.len()).min(seconds.len());
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is there; the chunks stay inside the three slices.
        return unsafe { split_columns_avx2(row, firsts, seconds, n) };
    }
    #[cfg(target_arch = "aarch64")]
    {
        let done = n / 4 * 4;
        for j in (0..done).step_by(4) {
            // SAFETY: NEON is part of aarch64; 8 values read, 4 + 4 written.
            unsafe {
                use std::arch::aarch64::{vld2q_f32, vst1q_f32};
                let pair = vld2q_f32(row.as_ptr().add(2 * j));
                vst1q_f32(firsts.as_mut_ptr().add(j), pair.0);
                vst1q_f32(seconds.as_mut_ptr().add(j), pair.1);
            }
        }
        return done;
    }
    #[allow(unreachable_code)]
    0
}

/// [`split_columns`] with AVX2, 8 columns at a time.
///
/// # Safety
///
/// The CPU must have AVX2, and `n` must be at most `row.len() / 2`,
/// `firsts.len()` and `seconds.len()` (every load and store below stays
/// below `2 * (n / 8 * 8)` in `row` and `n / 8 * 8` in the outputs).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn split_columns_avx2(row: &[f32], firsts: &mut [f32], seconds: &mut [f32], n: usize) -> usize {
    use std::arch::x86_64::*;
    debug_assert!(2 * n <= row.len() && n <= firsts.len() && n <= seconds.len());
    let done = n / 8 * 8;
    for j in (0..done).step_by(8) {
        // SAFETY: `2 * j + 16 <= 2 * done <= row.len()` (the caller's bound).
        let (lo, hi) =
            unsafe { (_mm256_loadu_ps(row.as_ptr().add(2 * j)), _mm256_loadu_ps(row.as_ptr().add(2 * j + 8))) };
        // Within each 128-bit half: lo's and hi's even (odd) columns; then
        // the 64-bit quarters back in order.
        let firsts_mixed = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
        let seconds_mixed = _mm256_shuffle_ps::<0b11_01_11_01>(lo, hi);
        let order = |v: __m256| _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)));
        // SAFETY: `j + 8 <= done <= n`, within both outputs.
        unsafe {
            _mm256_storeu_ps(firsts.as_mut_ptr().add(j), order(firsts_mixed));
            _mm256_storeu_ps(seconds.as_mut_ptr().add(j), order(seconds_mixed));
        }
    }
    done
}
