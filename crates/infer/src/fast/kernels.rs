//! The fast engine's SIMD micro-kernels, written once over pulp's [`Simd`]
//! and entered through `pulp::Arch::dispatch`, which picks at run time the
//! widest the CPU has: AVX2 + FMA on x86-64 (8 lanes), NEON on aarch64 (4),
//! plain scalars elsewhere. Everything below an entry point is
//! `#[inline(always)]`, so it is compiled with the chosen instruction set.
//!
//! Each output value is summed in one fixed order (input channel, then tap
//! row, then tap column) with fused multiply-adds, starting from zero, and
//! the bias is added last, whatever the vector width: so the AVX2 and NEON
//! builds give bit-identical outputs, and `scripts/pi-check.sh` can ask the
//! aarch64 binary's JSON to equal the x86 one's.
//!
//! Memory is addressed through raw pointers with strides: a band's rows of
//! every plane are written by the thread that owns the band, which slices
//! cannot say. Every entry point states what it reads and writes; the
//! engine (`fast.rs`) sizes the buffers.

use super::planes::Planes;
use grin_kernels::lines::LineLayout;
use grin_kernels::simd::{load, store, taps_sum};
use grin_net::FoldedConv;
use pulp::{Simd, WithSimd};

/// Output channels per tile of the 1x1 kernel: 6 rows x 2 vectors are 12
/// accumulators, which with 2 input vectors and a broadcast fill AVX2's 16
/// registers.
pub(crate) const PW_ROWS: usize = 6;

/// Bias, then ReLU if asked.
#[inline(always)]
fn finish<S: Simd>(simd: S, acc: S::f32s, bias: S::f32s, relu: bool) -> S::f32s {
    let v = simd.add_f32s(acc, bias);
    if relu {
        simd.max_f32s(v, simd.splat_f32s(0.0))
    } else {
        v
    }
}

/// One 3x3 conv over a band of output rows `r0..r0 + rows`: a depthwise
/// conv (output plane `c` reads input plane `c`) or a dense one (every
/// output plane reads every input plane).
pub(crate) struct Conv3x3Band<'a> {
    pub layout: LineLayout,
    /// The whole input map, `[in_channels, in_height, in_width]`.
    pub input: &'a [f32],
    pub r0: usize,
    pub rows: usize,
    /// Scratch for the lines (zeroed by the caller once): one input plane's
    /// for a depthwise conv, every input plane's for a dense one, each
    /// `layout.lines(rows) * layout.len` floats.
    pub lines: &'a mut [f32],
    /// A 3x3 conv, stride 1 or 2, depthwise or dense.
    pub conv: &'a FoldedConv,
    /// The band's output row `i` of plane `oc` starts at
    /// `out.ptr + oc * out.plane + i * out_width`.
    pub out: Planes,
}

impl WithSimd for Conv3x3Band<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let layout = self.layout;
        let plane = layout.in_height * layout.in_width;
        let per_plane = layout.lines(self.rows) * layout.len;
        let conv = self.conv;
        let planes = if conv.depthwise { 1 } else { conv.in_channels };
        assert!(self.input.len() >= conv.in_channels * plane, "3x3 input size");
        assert!(self.lines.len() >= planes * per_plane, "3x3 line scratch");
        assert_eq!(conv.weight.len(), conv.out_channels * planes * 9, "3x3 weight size");
        let fill = |c: usize, lines: &mut [f32]| {
            layout.fill(&self.input[c * plane..][..plane], self.r0, self.rows, &mut lines[..per_plane])
        };
        // Every row the band writes, of every output plane.
        assert!(self.out.holds(conv.out_channels, self.rows * layout.out_width), "3x3 output planes");
        let mut band = Band { simd, layout, rows: self.rows, bias: &conv.bias, relu: conv.relu, out: self.out };
        if conv.depthwise {
            assert_eq!(conv.in_channels, conv.out_channels, "depthwise channels");
            let (mut taps, mut weights) = ([[std::ptr::null(); 9]], [[simd.splat_f32s(0.0); 9]]);
            for c in 0..conv.out_channels {
                fill(c, self.lines);
                band.channel(c, self.lines, per_plane, &conv.weight[c * 9..][..9], &mut taps, &mut weights);
            }
        } else {
            for c in 0..conv.in_channels {
                fill(c, &mut self.lines[c * per_plane..]);
            }
            let mut taps = vec![[std::ptr::null(); 9]; planes];
            let mut weights = vec![[simd.splat_f32s(0.0); 9]; planes];
            for oc in 0..conv.out_channels {
                let w = &conv.weight[oc * planes * 9..][..planes * 9];
                band.channel(oc, self.lines, per_plane, w, &mut taps, &mut weights);
            }
        }
    }
}

/// What every output plane of a [`Conv3x3Band`] shares.
struct Band<'a, S: Simd> {
    simd: S,
    layout: LineLayout,
    rows: usize,
    bias: &'a [f32],
    relu: bool,
    out: Planes,
}

impl<S: Simd> Band<'_, S> {
    /// Output plane `oc` from the lines of `taps.len()` input planes
    /// (`per_plane` floats each) and their taps `w` (`[planes, 9]`);
    /// `taps` and `weights` are the caller's scratch.
    #[inline(always)]
    fn channel(
        &mut self,
        oc: usize,
        lines: &[f32],
        per_plane: usize,
        w: &[f32],
        taps: &mut [[*const f32; 9]],
        weights: &mut [[S::f32s; 9]],
    ) {
        let (simd, layout) = (self.simd, self.layout);
        let (lanes, wo) = (S::F32_LANES, layout.out_width);
        for (ic, ws) in weights.iter_mut().enumerate() {
            *ws = std::array::from_fn(|k| simd.splat_f32s(w[ic * 9 + k]));
        }
        let bias = simd.splat_f32s(self.bias[oc]);
        let relu = self.relu;
        for i in 0..self.rows {
            for (ic, tap) in taps.iter_mut().enumerate() {
                *tap = std::array::from_fn(|k| {
                    let (line, offset) = layout.tap(i, k / 3, k % 3);
                    lines[ic * per_plane + line * layout.len + offset..].as_ptr()
                });
            }
            let out = self.out.ptr.wrapping_add(oc * self.out.plane + i * wo);
            debug_assert!(self.out.holds(oc + 1, (i + 1) * wo), "row {i} of plane {oc}");
            // SAFETY: `LineLayout::len` keeps every vector read below
            // inside its line; writes stay in `0..wo` of row `i` of plane
            // `oc`, inside the planes (checked in `with_simd`).
            unsafe {
                let mut j = 0;
                while j + 4 * lanes <= wo {
                    let acc = taps_sum::<S, 4>(simd, taps, weights, j);
                    for (v, a) in acc.into_iter().enumerate() {
                        store::<S>(out.add(j + v * lanes), finish(simd, a, bias, relu));
                    }
                    j += 4 * lanes;
                }
                while j + lanes <= wo {
                    let [a] = taps_sum::<S, 1>(simd, taps, weights, j);
                    store::<S>(out.add(j), finish(simd, a, bias, relu));
                    j += lanes;
                }
                if j < wo {
                    // The row's last values: one vector ending at the row's
                    // end (recomputing some, to the same bits), or a
                    // partial store when the row is shorter than a vector.
                    let start = wo.saturating_sub(lanes);
                    let [a] = taps_sum::<S, 1>(simd, taps, weights, start);
                    let v = finish(simd, a, bias, relu);
                    simd.partial_store_f32s(std::slice::from_raw_parts_mut(out.add(start), wo - start), v);
                }
            }
        }
    }
}

/// 1x1 conv weights packed for the kernel: blocks of [`PW_ROWS`] output
/// channels (the last may be smaller), each `[in_channels, rows]`, so the
/// kernel reads one block's weights in order.
#[derive(Debug, Clone)]
pub(crate) struct PackedPointwise {
    pub in_channels: usize,
    pub out_channels: usize,
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub relu: bool,
}

impl PackedPointwise {
    /// `weight`: `[out_channels, in_channels]`.
    pub(super) fn new(weight: &[f32], bias: &[f32], in_channels: usize, relu: bool) -> PackedPointwise {
        let out_channels = bias.len();
        assert_eq!(weight.len(), out_channels * in_channels, "1x1 weight size");
        let mut packed = Vec::with_capacity(weight.len());
        for oc0 in (0..out_channels).step_by(PW_ROWS) {
            let rows = PW_ROWS.min(out_channels - oc0);
            for ic in 0..in_channels {
                packed.extend((0..rows).map(|m| weight[(oc0 + m) * in_channels + ic]));
            }
        }
        PackedPointwise { in_channels, out_channels, weight: packed, bias: bias.to_vec(), relu }
    }
}

/// One 1x1 conv over `pixels` consecutive pixels of every plane.
pub(crate) struct PointwiseBand<'a> {
    pub conv: &'a PackedPointwise,
    /// `conv.in_channels` planes, `pixels` values read from each.
    pub input: Planes,
    /// `conv.out_channels` planes, `pixels` values written to each.
    pub out: Planes,
    pub pixels: usize,
}

impl WithSimd for PointwiseBand<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let conv = self.conv;
        assert!(self.input.holds(conv.in_channels, self.pixels), "1x1 input planes");
        assert!(self.out.holds(conv.out_channels, self.pixels), "1x1 output planes");
        let mut block = 0;
        for oc0 in (0..conv.out_channels).step_by(PW_ROWS) {
            let rows = PW_ROWS.min(conv.out_channels - oc0);
            let weight = &conv.weight[block..block + rows * conv.in_channels];
            block += weight.len();
            let tile = Tile { conv, weight, oc0, input: self.input, out: self.out, pixels: self.pixels };
            // SAFETY: both sides hold `pixels` values of every plane
            // (asserted above); `Tile::run` stays inside them.
            unsafe {
                match rows {
                    6 => tile.run::<S, 6>(simd),
                    5 => tile.run::<S, 5>(simd),
                    4 => tile.run::<S, 4>(simd),
                    3 => tile.run::<S, 3>(simd),
                    2 => tile.run::<S, 2>(simd),
                    _ => tile.run::<S, 1>(simd),
                }
            }
        }
    }
}

/// One block of `MR` output channels of a [`PointwiseBand`].
struct Tile<'a> {
    conv: &'a PackedPointwise,
    /// `[in_channels, MR]`.
    weight: &'a [f32],
    oc0: usize,
    input: Planes,
    out: Planes,
    pixels: usize,
}

impl Tile<'_> {
    /// Every pixel of the block's channels.
    ///
    /// # Safety
    ///
    /// `input` must hold `pixels` values of `conv.in_channels` planes and
    /// `out` of planes `oc0..oc0 + MR` ([`Planes::holds`]).
    #[inline(always)]
    unsafe fn run<S: Simd, const MR: usize>(&self, simd: S) {
        debug_assert!(
            self.input.holds(self.conv.in_channels, self.pixels) && self.out.holds(self.oc0 + MR, self.pixels)
        );
        // SAFETY: `p + len <= n` at every call, and the caller's bound.
        unsafe {
            let (lanes, n) = (S::F32_LANES, self.pixels);
            let mut p = 0;
            while p + 2 * lanes <= n {
                self.pixels_at::<S, MR, 2>(simd, p, 2 * lanes);
                p += 2 * lanes;
            }
            while p + lanes <= n {
                self.pixels_at::<S, MR, 1>(simd, p, lanes);
                p += lanes;
            }
            if p < n {
                // One vector ending at the last pixel (recomputing some, to
                // the same bits), or a partial one when there are fewer pixels.
                let start = n.saturating_sub(lanes);
                self.pixels_at::<S, MR, 1>(simd, start, n - start);
            }
        }
    }

    /// Output pixels `p..p + len` (`len <= NV * lanes`; under one vector only
    /// when `NV == 1`) of the block's `MR` channels.
    ///
    /// # Safety
    ///
    /// As [`Tile::run`], and `p + len <= pixels`.
    #[inline(always)]
    unsafe fn pixels_at<S: Simd, const MR: usize, const NV: usize>(&self, simd: S, p: usize, len: usize) {
        debug_assert!(p + len <= self.pixels);
        // SAFETY: the caller's bound: every plane read holds `p + len`
        // values, every plane written too (whole vectors only where
        // `len` covers them; partial loads and stores otherwise).
        unsafe {
            let lanes = S::F32_LANES;
            let partial = len < NV * lanes;
            let mut acc = [[simd.splat_f32s(0.0); NV]; MR];
            let mut x = self.input.ptr.add(p) as *const f32;
            let mut w = self.weight.as_ptr();
            for _ in 0..self.conv.in_channels {
                let xs: [S::f32s; NV] = std::array::from_fn(|v| {
                    if partial {
                        simd.partial_load_f32s(std::slice::from_raw_parts(x, len))
                    } else {
                        load::<S>(x.add(v * lanes))
                    }
                });
                for (m, row) in acc.iter_mut().enumerate() {
                    let wm = simd.splat_f32s(*w.add(m));
                    for (a, &xv) in row.iter_mut().zip(&xs) {
                        *a = simd.mul_add_f32s(wm, xv, *a);
                    }
                }
                x = x.add(self.input.plane);
                w = w.add(MR);
            }
            for (m, row) in acc.iter().enumerate() {
                let oc = self.oc0 + m;
                let bias = simd.splat_f32s(self.conv.bias[oc]);
                let out = self.out.ptr.add(oc * self.out.plane + p);
                for (v, &a) in row.iter().enumerate() {
                    let value = finish(simd, a, bias, self.conv.relu);
                    if partial {
                        simd.partial_store_f32s(std::slice::from_raw_parts_mut(out, len), value);
                    } else {
                        store::<S>(out.add(v * lanes), value);
                    }
                }
            }
        }
    }
}
