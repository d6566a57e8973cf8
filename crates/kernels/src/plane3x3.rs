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

use super::affine::Affine;
use super::lines::LineLayout;
use super::simd::{load, store, taps_sum};
use pulp::{Arch, Simd, WithSimd};
use std::cell::RefCell;

thread_local! {
    /// Each thread's padded lines, reused from plane to plane.
    static LINES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// One plane's geometry: an `in_h x in_w` input, stride 1 or 2.
#[derive(Debug, Clone, Copy)]
pub struct Plane3x3 {
    pub in_h: usize,
    pub in_w: usize,
    pub stride: usize,
    pub out_h: usize,
    pub out_w: usize,
    /// The map from the input planes as stored to the conv's input, when a
    /// BatchNorm layer left its output to its readers (see `with_input`).
    input: Option<Affine>,
    arch: Arch,
}

impl Plane3x3 {
    pub fn new(in_h: usize, in_w: usize, stride: usize) -> Plane3x3 {
        assert!(stride == 1 || stride == 2, "3x3 convs run at stride 1 or 2, not {stride}");
        let (out_h, out_w) = (in_h.div_ceil(stride), in_w.div_ceil(stride));
        Plane3x3 { in_h, in_w, stride, out_h, out_w, input: None, arch: Arch::new() }
    }

    /// The same geometry over input planes that hold a BatchNorm layer's
    /// input: `forward` and `weight_grad` apply `input` to each image's
    /// plane (in cache, just before padding it into lines), so that layer
    /// never writes its output. `input_grad` reads no input.
    pub fn with_input(self, input: Option<Affine>) -> Plane3x3 {
        Plane3x3 { input, ..self }
    }

    /// The same geometry dispatched to `arch` (tests run every level).
    #[cfg(test)]
    pub fn with_arch(self, arch: Arch) -> Plane3x3 {
        Plane3x3 { arch, ..self }
    }

    pub fn in_len(&self) -> usize {
        self.in_h * self.in_w
    }

    pub fn out_len(&self) -> usize {
        self.out_h * self.out_w
    }

    /// How many images' planes `ins` (inputs) and `outs` (outputs) each
    /// hold back to back: one dispatch, one set of splatted taps and one
    /// fill of the lines per image serve a whole batch row.
    fn images(&self, ins: &[&[f32]], mut outs: impl Iterator<Item = usize>) -> usize {
        let images = ins.first().map_or(0, |x| x.len() / self.in_len().max(1));
        assert!(ins.iter().all(|x| x.len() == images * self.in_len()), "3x3 input plane size");
        assert!(outs.all(|o| o == images * self.out_len()), "3x3 output plane size");
        images
    }

    /// `outs[o] = sum over i of conv(xs[i], w[(o * xs.len() + i) * 9..][..9])`,
    /// image by image when the slices hold several images' planes back to
    /// back: a depthwise conv has one input and one output plane, a dense
    /// one several of each (an image's inputs are padded once for all
    /// outputs).
    pub fn forward(&self, xs: &[&[f32]], w: &[f32], outs: &mut [&mut [f32]]) {
        let images = self.images(xs, outs.iter().map(|o| o.len()));
        assert_eq!(w.len(), 9 * xs.len() * outs.len(), "3x3 taps");
        LINES.with_borrow_mut(|lines| {
            let p = *self;
            p.arch.dispatch(Forward { p, images, xs, w, outs, lines, accumulate: false, flip: false });
        });
    }

    /// `taps[(o * xs.len() + i) * 9..][..9] += ` the taps' gradient for
    /// input plane `xs[i]` from output `o`'s gradient `gs[o]`, summed over
    /// the images the slices hold.
    pub fn weight_grad(&self, xs: &[&[f32]], gs: &[&[f32]], taps: &mut [f32]) {
        let images = self.images(xs, gs.iter().map(|g| g.len()));
        assert_eq!(taps.len(), 9 * xs.len() * gs.len(), "3x3 taps");
        LINES.with_borrow_mut(|lines| {
            let p = *self;
            p.arch.dispatch(WeightGrad { p, images, xs, gs, taps, lines });
        });
    }

    /// `dx = conv^T(g)` with taps `w`, or `dx +=` it when `accumulate`,
    /// image by image.
    pub fn input_grad(&self, g: &[f32], w: &[f32], dx: &mut [f32], accumulate: bool) {
        assert_eq!(w.len(), 9, "3x3 taps");
        let images = g.len() / self.out_len().max(1);
        assert_eq!(g.len(), images * self.out_len(), "3x3 output gradient size");
        assert_eq!(dx.len(), images * self.in_len(), "3x3 input gradient size");
        LINES.with_borrow_mut(|lines| {
            let p = *self;
            if p.stride == 1 {
                // At stride 1 the transposed conv is the conv of the output
                // gradient with the taps turned half a turn.
                // It reads the gradient, which no map applies to.
                let same = Plane3x3 { in_h: p.out_h, in_w: p.out_w, input: None, ..p };
                let outs: &mut [&mut [f32]] = &mut [dx];
                p.arch.dispatch(Forward { p: same, images, xs: &[g], w, outs, lines, accumulate, flip: true });
            } else {
                p.arch.dispatch(stride2::InputGrad2 { p, images, g, w, dx, lines, accumulate });
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

/// Fills the lines of image `b`'s plane of every input, mapped by `input`
/// first when given (into a copy of the plane kept after the lines: one
/// pass of whole vectors, where a map per line ends every line in a few
/// single values); returns floats per plane.
#[inline(always)]
fn fill_lines<S: Simd>(
    simd: S,
    layout: &LineLayout,
    rows: usize,
    xs: &[&[f32]],
    b: usize,
    input: Option<Affine>,
    lines: &mut Vec<f32>,
) -> usize {
    let per_plane = layout.lines(rows) * layout.len;
    let in_len = layout.in_height * layout.in_width;
    let copy = if input.is_some() { in_len } else { 0 };
    if lines.len() < xs.len() * per_plane + copy {
        lines.resize(xs.len() * per_plane + copy, 0.0);
    }
    let (lines, copy) = lines.split_at_mut(xs.len() * per_plane);
    for (i, x) in xs.iter().enumerate() {
        let mut plane = &x[b * in_len..][..in_len];
        if let Some(input) = input {
            let copy = &mut copy[..in_len];
            input.map(simd, plane, copy);
            plane = copy;
        }
        layout.fill(plane, 0, rows, &mut lines[i * per_plane..][..per_plane]);
    }
    per_plane
}

struct Forward<'a, 'o> {
    p: Plane3x3,
    images: usize,
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
        let Forward { p, images, xs, w, outs, lines, accumulate, flip } = self;
        let layout = LineLayout::new(p.stride, p.in_h, p.in_w, S::F32_LANES);
        let planes = xs.len();
        // Every output's taps, splatted once for all images.
        let tap = |at: usize, k: usize| w[at * 9 + if flip { 8 - k } else { k }];
        let weights: Vec<[S::f32s; 9]> =
            (0..planes * outs.len()).map(|at| std::array::from_fn(|k| simd.splat_f32s(tap(at, k)))).collect();
        let mut taps = vec![[std::ptr::null::<f32>(); 9]; planes];
        let out_len = p.out_len();
        for b in 0..images {
            let per_plane = fill_lines(simd, &layout, p.out_h, xs, b, p.input, lines);
            for (o, out) in outs.iter_mut().enumerate() {
                let out = &mut out[b * out_len..][..out_len];
                let w = &weights[o * planes..][..planes];
                forward_plane(simd, p, &layout, lines, per_plane, w, accumulate, &mut taps, out);
            }
        }
    }
}

/// One output plane of [`Forward`] from the filled lines: four vectors at
/// a time while the row lasts (four independent sums keep the FMA units
/// busy where one sum waits on each add), then one, then the row's last
/// values as one vector ending at the row's end, as the Pi engine does.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn forward_plane<S: Simd>(
    simd: S,
    p: Plane3x3,
    layout: &LineLayout,
    lines: &[f32],
    per_plane: usize,
    weights: &[[S::f32s; 9]],
    accumulate: bool,
    taps: &mut [[*const f32; 9]],
    out: &mut [f32],
) {
    let (lanes, wo) = (S::F32_LANES, p.out_w);
    let planes = taps.len();
    for i in 0..p.out_h {
        tap_rows(layout, lines, per_plane, planes, i, taps);
        let taps = &*taps;
        let row = &mut out[i * wo..][..wo];
        let put = |row: &mut [f32], j: usize, v: S::f32s| {
            debug_assert!(j + lanes <= row.len(), "a whole vector at column {j}");
            let at = row[j..].as_mut_ptr();
            // SAFETY: `j + lanes <= row.len()` (every caller's loop bound).
            unsafe {
                let v = if accumulate { simd.add_f32s(load::<S>(at), v) } else { v };
                store::<S>(at, v);
            }
        };
        // SAFETY (every `taps_sum` below): `LineLayout::len` keeps a vector
        // read from any column up to `max(wo - lanes, 0)`, plus the tap's
        // offset, inside its line, and no sum starts past that column.
        let mut j = 0;
        while j + 4 * lanes <= wo {
            let acc = unsafe { taps_sum::<S, 4>(simd, taps, weights, j) };
            for (v, a) in acc.into_iter().enumerate() {
                put(row, j + v * lanes, a);
            }
            j += 4 * lanes;
        }
        while j + lanes <= wo {
            let [a] = unsafe { taps_sum::<S, 1>(simd, taps, weights, j) };
            put(row, j, a);
            j += lanes;
        }
        if j < wo {
            // One vector ending at the row's end, or starting at its start
            // when the row is shorter than a vector. Its columns before `j`
            // come out to the same bits again (the same sums in the same
            // order): stored over, or skipped when adding.
            let start = wo.saturating_sub(lanes);
            let [a] = unsafe { taps_sum::<S, 1>(simd, taps, weights, start) };
            if accumulate {
                let mut sums = [0.0f32; MAX_LANES];
                simd.partial_store_f32s(&mut sums, a);
                for (value, sum) in row[j..].iter_mut().zip(&sums[j - start..]) {
                    *value += sum;
                }
            } else {
                simd.partial_store_f32s(&mut row[start..], a);
            }
        }
    }
}

/// The widest vector any dispatch level has, in f32s (AVX-512).
const MAX_LANES: usize = 16;

/// `MAX_LANES` zeros then ones: from index `MAX_LANES - d`, a vector whose
/// first `d` lanes are zero and the rest one.
const TAIL_KEEP: [f32; 2 * MAX_LANES] = {
    let mut keep = [1.0f32; 2 * MAX_LANES];
    let mut i = 0;
    while i < MAX_LANES {
        keep[i] = 0.0;
        i += 1;
    }
    keep
};

struct WeightGrad<'a> {
    p: Plane3x3,
    images: usize,
    xs: &'a [&'a [f32]],
    gs: &'a [&'a [f32]],
    taps: &'a mut [f32],
    lines: &'a mut Vec<f32>,
}

impl WithSimd for WeightGrad<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let WeightGrad { p, images, xs, gs, taps, lines } = self;
        let lanes = S::F32_LANES;
        let layout = LineLayout::new(p.stride, p.in_h, p.in_w, lanes);
        let (wo, out_len) = (p.out_w, p.out_len());
        let mut rows = [[std::ptr::null::<f32>(); 9]];
        // A row's last values are one vector ending at the row's end
        // (starting at its start when the row is shorter than a vector), as
        // in the forward kernel: its lanes before column `full` are zeroed
        // in the gradient so that no column counts twice, and the nine taps
        // are whole loads where partial ones were a call each.
        let full = wo - wo % lanes;
        let start = wo.saturating_sub(lanes);
        let keep = simd.partial_load_f32s(&TAIL_KEEP[MAX_LANES - (full - start).min(MAX_LANES)..]);
        for b in 0..images {
            let per_plane = fill_lines(simd, &layout, p.out_h, xs, b, p.input, lines);
            let pairs = gs.iter().flat_map(|g| (0..xs.len()).map(move |plane| (&g[b * out_len..][..out_len], plane)));
            for (at, (g, plane)) in pairs.enumerate() {
                // Nine running sums in registers, one per tap.
                let mut acc = [simd.splat_f32s(0.0); 9];
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
                    if j < wo {
                        // The gradient's lanes past the row (a row shorter
                        // than a vector) load as zero; the taps' lanes there
                        // are values of the line, finite, times zero.
                        let gv = if wo >= lanes {
                            // SAFETY: `start + lanes == wo <= gr.len()`.
                            unsafe { load::<S>(gr[start..].as_ptr()) }
                        } else {
                            simd.partial_load_f32s(gr)
                        };
                        let gv = simd.mul_f32s(gv, keep);
                        for k in 0..9 {
                            // SAFETY: `LineLayout::len` keeps a vector read from
                            // column `max(wo - lanes, 0)`, plus the tap's offset,
                            // inside its line (the forward kernel's tail read).
                            acc[k] = simd.mul_add_f32s(gv, unsafe { load::<S>(t[k].add(start)) }, acc[k]);
                        }
                    }
                }
                for k in 0..9 {
                    taps[at * 9 + k] += simd.reduce_sum_f32s(acc[k]);
                }
            }
        }
    }
}

mod stride2;

#[cfg(test)]
mod tests;
