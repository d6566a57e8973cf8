//! The CPU training step's 3x3 convs (padding 1, stride 1 or 2) on one
//! plane: forward, the taps' gradient and the input's gradient, as SIMD
//! kernels that keep a row's sums in registers. Written once over pulp's
//! [`Simd`] and entered through `pulp::Arch::dispatch`, which picks AVX2 +
//! FMA on x86-64, NEON on aarch64, scalars elsewhere, at run time (the
//! default x86-64 target has neither AVX nor FMA, so loops the compiler
//! vectorises on its own run 4 lanes wide without fused multiply-adds).
//!
//! The input is first copied into zero-padded lines ([`LineLayout`], the
//! Pi engine's layout), so every tap of an output row is one contiguous run
//! and no inner loop tests an edge. A row's values are then summed over all
//! nine taps in registers and stored once, where a loop per tap read and
//! wrote the output row nine times.

use super::lines::LineLayout;
use super::simd::{load, store};
use pulp::{Arch, Simd, WithSimd};
use std::cell::RefCell;

thread_local! {
    /// Each thread's padded lines, reused from plane to plane.
    static LINES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// One plane's geometry: an `in_h x in_w` input, stride 1 or 2.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plane3x3 {
    pub in_h: usize,
    pub in_w: usize,
    pub stride: usize,
    pub out_h: usize,
    pub out_w: usize,
    arch: Arch,
}

impl Plane3x3 {
    pub(crate) fn new(in_h: usize, in_w: usize, stride: usize) -> Plane3x3 {
        assert!(stride == 1 || stride == 2, "3x3 convs run at stride 1 or 2, not {stride}");
        Plane3x3 { in_h, in_w, stride, out_h: in_h.div_ceil(stride), out_w: in_w.div_ceil(stride), arch: Arch::new() }
    }

    /// The same geometry dispatched to `arch` (tests run every level).
    #[cfg(test)]
    pub(crate) fn with_arch(self, arch: Arch) -> Plane3x3 {
        Plane3x3 { arch, ..self }
    }

    pub(crate) fn in_len(&self) -> usize {
        self.in_h * self.in_w
    }

    pub(crate) fn out_len(&self) -> usize {
        self.out_h * self.out_w
    }

    /// `outs[o] = sum over i of conv(xs[i], w[(o * xs.len() + i) * 9..][..9])`:
    /// a depthwise conv has one input and one output plane, a dense one
    /// several of each (the inputs are padded once for all outputs).
    pub(crate) fn forward(&self, xs: &[&[f32]], w: &[f32], outs: &mut [&mut [f32]]) {
        assert!(xs.iter().all(|x| x.len() == self.in_len()), "3x3 input plane size");
        assert_eq!(w.len(), 9 * xs.len() * outs.len(), "3x3 taps");
        assert!(outs.iter().all(|o| o.len() == self.out_len()), "3x3 output plane size");
        LINES.with_borrow_mut(|lines| {
            let p = *self;
            p.arch.dispatch(Forward { p, xs, w, outs, lines, accumulate: false, flip: false });
        });
    }

    /// `taps[(o * xs.len() + i) * 9..][..9] += ` the taps' gradient for
    /// input plane `xs[i]` from output `o`'s gradient `gs[o]`.
    pub(crate) fn weight_grad(&self, xs: &[&[f32]], gs: &[&[f32]], taps: &mut [f32]) {
        assert!(xs.iter().all(|x| x.len() == self.in_len()), "3x3 input plane size");
        assert_eq!(taps.len(), 9 * xs.len() * gs.len(), "3x3 taps");
        assert!(gs.iter().all(|g| g.len() == self.out_len()), "3x3 output gradient size");
        LINES.with_borrow_mut(|lines| {
            let p = *self;
            p.arch.dispatch(WeightGrad { p, xs, gs, taps, lines });
        });
    }

    /// `dx = conv^T(g)` with taps `w`, or `dx +=` it when `accumulate`.
    pub(crate) fn input_grad(&self, g: &[f32], w: &[f32], dx: &mut [f32], accumulate: bool) {
        assert_eq!(g.len(), self.out_len(), "3x3 output gradient size");
        assert_eq!(w.len(), 9, "3x3 taps");
        assert_eq!(dx.len(), self.in_len(), "3x3 input gradient size");
        LINES.with_borrow_mut(|lines| {
            let p = *self;
            if p.stride == 1 {
                // At stride 1 the transposed conv is the conv of the output
                // gradient with the taps turned half a turn.
                let same = Plane3x3 { in_h: p.out_h, in_w: p.out_w, ..p };
                let outs: &mut [&mut [f32]] = &mut [dx];
                p.arch.dispatch(Forward { p: same, xs: &[g], w, outs, lines, accumulate, flip: true });
            } else {
                p.arch.dispatch(InputGrad2 { p, g, w, dx, lines, accumulate });
            }
        });
    }
}

/// Pointers to the nine taps of output row `i` of each input plane's
/// lines (`per_plane` floats apart).
#[inline(always)]
fn tap_rows(
    layout: &LineLayout,
    lines: &[f32],
    per_plane: usize,
    planes: usize,
    i: usize,
    taps: &mut [[*const f32; 9]],
) {
    for (plane, t) in taps.iter_mut().enumerate().take(planes) {
        *t = std::array::from_fn(|k| {
            let (line, offset) = layout.tap(i, k / 3, k % 3);
            lines[plane * per_plane + line * layout.len + offset..].as_ptr()
        });
    }
}

/// Fills the lines of every input plane; returns floats per plane.
#[inline(always)]
fn fill_lines(layout: &LineLayout, rows: usize, xs: &[&[f32]], lines: &mut Vec<f32>) -> usize {
    let per_plane = layout.lines(rows) * layout.len;
    if lines.len() < xs.len() * per_plane {
        lines.resize(xs.len() * per_plane, 0.0);
    }
    for (i, x) in xs.iter().enumerate() {
        layout.fill(x, 0, rows, &mut lines[i * per_plane..][..per_plane]);
    }
    per_plane
}

struct Forward<'a, 'o> {
    p: Plane3x3,
    xs: &'a [&'a [f32]],
    w: &'a [f32],
    outs: &'a mut [&'o mut [f32]],
    lines: &'a mut Vec<f32>,
    accumulate: bool,
    /// Read the taps turned half a turn (`w[8 - k]`).
    flip: bool,
}

impl WithSimd for Forward<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Forward { p, xs, w, outs, lines, accumulate, flip } = self;
        let lanes = S::F32_LANES;
        let layout = LineLayout::new(p.stride, p.in_h, p.in_w, lanes);
        let per_plane = fill_lines(&layout, p.out_h, xs, lines);
        let planes = xs.len();
        let mut taps = vec![[std::ptr::null::<f32>(); 9]; planes];
        for (o, out) in outs.iter_mut().enumerate() {
            let w = &w[o * planes * 9..][..planes * 9];
            forward_plane(simd, p, &layout, lines, per_plane, w, flip, accumulate, &mut taps, out);
        }
    }
}

/// One output plane of [`Forward`] from the filled lines.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn forward_plane<S: Simd>(
    simd: S,
    p: Plane3x3,
    layout: &LineLayout,
    lines: &[f32],
    per_plane: usize,
    w: &[f32],
    flip: bool,
    accumulate: bool,
    taps: &mut [[*const f32; 9]],
    out: &mut [f32],
) {
    {
        let lanes = S::F32_LANES;
        let planes = taps.len();
        let tap = |plane: usize, k: usize| w[plane * 9 + if flip { 8 - k } else { k }];
        let weights: Vec<[S::f32s; 9]> =
            (0..planes).map(|plane| std::array::from_fn(|k| simd.splat_f32s(tap(plane, k)))).collect();
        let wo = p.out_w;
        for i in 0..p.out_h {
            tap_rows(layout, lines, per_plane, planes, i, taps);
            let taps = &*taps;
            let row = &mut out[i * wo..][..wo];
            let sum = |j: usize| {
                let mut acc = simd.splat_f32s(0.0);
                for (t, w) in taps.iter().zip(&weights) {
                    for k in 0..9 {
                        // SAFETY: `LineLayout::len` keeps a vector read from
                        // any column of the row inside its line.
                        acc = simd.mul_add_f32s(w[k], unsafe { load::<S>(t[k].add(j)) }, acc);
                    }
                }
                acc
            };
            let put = |row: &mut [f32], j: usize, v: S::f32s| {
                let at = row[j..].as_mut_ptr();
                // SAFETY: callers pass `j + lanes <= row.len()`.
                unsafe {
                    let v = if accumulate { simd.add_f32s(load::<S>(at), v) } else { v };
                    store::<S>(at, v);
                }
            };
            let mut j = 0;
            while j + lanes <= wo {
                put(row, j, sum(j));
                j += lanes;
            }
            // The row's last columns, one at a time.
            for (jj, out) in row.iter_mut().enumerate().take(wo).skip(j) {
                let mut acc = 0.0f32;
                for (plane, t) in taps.iter().enumerate() {
                    for (k, run) in t.iter().enumerate() {
                        // SAFETY: column `jj < wo` of a tap's run is inside its line.
                        acc += tap(plane, k) * unsafe { *run.add(jj) };
                    }
                }
                *out = if accumulate { *out + acc } else { acc };
            }
        }
    }
}

struct WeightGrad<'a> {
    p: Plane3x3,
    xs: &'a [&'a [f32]],
    gs: &'a [&'a [f32]],
    taps: &'a mut [f32],
    lines: &'a mut Vec<f32>,
}

impl WithSimd for WeightGrad<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let WeightGrad { p, xs, gs, taps, lines } = self;
        let lanes = S::F32_LANES;
        let layout = LineLayout::new(p.stride, p.in_h, p.in_w, lanes);
        let per_plane = fill_lines(&layout, p.out_h, xs, lines);
        let wo = p.out_w;
        let mut rows = [[std::ptr::null::<f32>(); 9]];
        for (at, (g, plane)) in gs.iter().flat_map(|g| (0..xs.len()).map(move |plane| (g, plane))).enumerate() {
            // Nine running sums in registers, one per tap.
            let mut acc = [simd.splat_f32s(0.0); 9];
            let mut tail = [0.0f32; 9];
            for i in 0..p.out_h {
                tap_rows(&layout, &lines[plane * per_plane..], per_plane, 1, i, &mut rows);
                let [t] = &rows;
                let gr = &g[i * wo..][..wo];
                let mut j = 0;
                while j + lanes <= wo {
                    // SAFETY: `j + lanes <= wo`, and each tap's run holds a
                    // vector from any column of the row.
                    let gv = unsafe { load::<S>(gr[j..].as_ptr()) };
                    for k in 0..9 {
                        acc[k] = simd.mul_add_f32s(gv, unsafe { load::<S>(t[k].add(j)) }, acc[k]);
                    }
                    j += lanes;
                }
                for (jj, &gv) in gr.iter().enumerate().skip(j) {
                    for k in 0..9 {
                        // SAFETY: column `jj < wo` of a tap's run is inside its line.
                        tail[k] += gv * unsafe { *t[k].add(jj) };
                    }
                }
            }
            for k in 0..9 {
                taps[at * 9 + k] += simd.reduce_sum_f32s(acc[k]) + tail[k];
            }
        }
    }
}

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
struct InputGrad2<'a> {
    p: Plane3x3,
    g: &'a [f32],
    w: &'a [f32],
    dx: &'a mut [f32],
    lines: &'a mut Vec<f32>,
    accumulate: bool,
}

impl WithSimd for InputGrad2<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let InputGrad2 { p, g, w, dx, lines, accumulate } = self;
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
        let splat = |k: usize| simd.splat_f32s(w[k]);
        let ws: [S::f32s; 9] = std::array::from_fn(splat);
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
            let (even, odd) = (&even[..wo], &odd[..odd_width]);
            if accumulate {
                for (pair, (e, o)) in out.chunks_exact_mut(2).zip(even.iter().zip(odd)) {
                    pair[0] += e;
                    pair[1] += o;
                }
                if p.in_w % 2 == 1 {
                    out[p.in_w - 1] += even[wo - 1];
                }
            } else {
                for (pair, (e, o)) in out.chunks_exact_mut(2).zip(even.iter().zip(odd)) {
                    (pair[0], pair[1]) = (*e, *o);
                }
                if p.in_w % 2 == 1 {
                    out[p.in_w - 1] = even[wo - 1];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
