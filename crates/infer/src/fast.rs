//! A hand-written CPU forward pass of the detector, several times faster
//! than Burn's ndarray kernels: BatchNorm is folded into the conv weights
//! once at load, every conv adds its bias and ReLU as it stores, and the
//! micro-kernels (`fast/kernels.rs`) run on AVX2 + FMA or NEON, chosen at run
//! time.
//!
//! Layers run in *groups*: a 3x3 conv and the 1x1 convs after it (a
//! depthwise-separable block; a head's depthwise, pointwise and output
//! convs), computed together over bands of output rows. The values between
//! the layers of a group live only in a band-sized buffer that stays in the
//! core's cache ([`BAND_BYTES`]); only a group's output is a whole map. A
//! band's rows of the 3x3 conv's input are first copied, zero-padded (and
//! at stride 2 split into even and odd columns), so every tap is one
//! contiguous run of memory and no inner loop tests an edge.
//!
//! It runs [`grin_net::Weights::folded`], so the architecture (layer
//! order, channels, strides, taps) is stated only in `grin_net`: any
//! widths, any number of levels. `tests/parity.rs` checks outputs and
//! detections against the Burn model. Decoding is `grin_net::decode`, as
//! on the Burn path. Bands are split over rayon's global pool when it has
//! more than one thread, so `--threads` applies.

mod kernels;
mod planes;
mod pool;

use grin_kernels::lines::LineLayout;
use grin_net::{FoldedConv, FoldedDetector};
use kernels::{Conv3x3Band, PackedPointwise, PointwiseBand};
use planes::Planes;
use pool::Scratch;
use rayon::prelude::*;

/// A band's scratch (the values between a group's layers and the 3x3
/// conv's padded input lines) is at most about this many bytes: well within
/// a core's L2, so the 1x1 convs read what the 3x3 conv just wrote from
/// cache instead of memory. Measured on the development machine (L1d 32 KiB,
/// L2 512 KiB): 48 and 96 KiB alike at 320x240, 96 KiB 6% faster at
/// 640x480, 192 KiB slower at both.
const BAND_BYTES: usize = 96 * 1024;

/// A feature map, `[channels, height, width]`. Its memory goes back to the
/// thread's [`pool`] when it is dropped, for the next map to take (`Clone`
/// and `Drop` are there).
#[derive(Debug)]
pub(crate) struct Map {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

/// Layers computed together band by band: a 3x3 conv (if any), then 1x1
/// convs, each reading the one before.
#[derive(Debug, Clone)]
struct Group {
    /// Kernel 3, padding 1, stride 1 or 2.
    conv3x3: Option<FoldedConv>,
    pointwise: Vec<PackedPointwise>,
}

impl Group {
    fn in_channels(&self) -> usize {
        match &self.conv3x3 {
            Some(c) => c.in_channels,
            None => self.pointwise[0].in_channels,
        }
    }

    fn out_channels(&self) -> usize {
        self.pointwise
            .last()
            .map_or_else(|| self.conv3x3.as_ref().expect("a group has layers").out_channels, |p| p.out_channels)
    }

    /// `(height, width)` of the output for an input of `height x width`.
    fn out_size(&self, height: usize, width: usize) -> (usize, usize) {
        let stride = self.conv3x3.as_ref().map_or(1, |c| c.stride);
        (height.div_ceil(stride), width.div_ceil(stride))
    }

    /// Floats of band scratch per output row of `width`: the values between
    /// layers (every layer's output but the last) and the 3x3 conv's lines.
    fn scratch_per_row(&self, layout: Option<LineLayout>, width: usize) -> usize {
        let outputs: Vec<usize> =
            self.conv3x3.iter().map(|c| c.out_channels).chain(self.pointwise.iter().map(|p| p.out_channels)).collect();
        let between: usize = outputs[..outputs.len() - 1].iter().sum::<usize>() * width;
        between + self.line_floats(layout, 1).saturating_sub(self.line_floats(layout, 0))
    }

    /// Floats of the 3x3 conv's padded input lines for a band of `rows`
    /// output rows: every input plane's for a dense conv, one for a
    /// depthwise one (planes are done one by one).
    fn line_floats(&self, layout: Option<LineLayout>, rows: usize) -> usize {
        match (&self.conv3x3, layout) {
            (Some(c), Some(l)) => l.lines(rows) * l.len * if c.depthwise { 1 } else { c.in_channels },
            _ => 0,
        }
    }
}

/// Cuts a run of folded convs into groups: a 3x3 conv starts one, a 1x1
/// conv joins the open one, and the group after layer `i` is closed when
/// `cut_after(i)` (a head reads that layer's whole output).
fn groups(convs: &[FoldedConv], cut_after: impl Fn(usize) -> bool) -> Vec<(Group, usize)> {
    let mut groups: Vec<(Group, usize)> = Vec::new();
    let mut open = false;
    for (i, conv) in convs.iter().enumerate() {
        if conv.kernel == 3 || !open {
            groups.push((Group { conv3x3: None, pointwise: Vec::new() }, i));
        }
        let (group, last) = groups.last_mut().expect("pushed above");
        if conv.kernel == 3 {
            group.conv3x3 = Some(conv.clone());
        } else {
            group.pointwise.push(PackedPointwise::new(&conv.weight, &conv.bias, conv.in_channels, conv.relu));
        }
        *last = i;
        open = !cut_after(i);
    }
    groups
}

/// One output level: its groups run on the output of trunk group `after`
/// (with `fuse`, plus the coarser trunk group's output through its lateral
/// conv, upsampled: `grin_net::FoldedFuse`).
#[derive(Debug, Clone)]
struct Head {
    after: usize,
    fuse: Option<(usize, Group)>,
    groups: Vec<Group>,
}

impl Head {
    /// The trunk group after which every input of the head exists.
    fn ready(&self) -> usize {
        self.fuse.as_ref().map_or(self.after, |(from, _)| self.after.max(*from))
    }

    /// Whether the head reads trunk group `j`'s output.
    fn reads(&self, j: usize) -> bool {
        self.after == j || self.fuse.as_ref().is_some_and(|(from, _)| *from == j)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct FastDetector {
    arch: pulp::Arch,
    /// Vector width of `arch`, in f32s.
    lanes: usize,
    trunk: Vec<Group>,
    heads: Vec<Head>,
    outputs: usize,
}

/// Asks the dispatched instruction set its vector width.
struct Lanes;

impl pulp::WithSimd for Lanes {
    type Output = usize;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> usize {
        S::F32_LANES
    }
}

impl FastDetector {
    pub(crate) fn new(folded: FoldedDetector) -> FastDetector {
        let laterals = folded.heads.iter().filter_map(|h| h.fuse.as_ref().map(|f| &f.lateral));
        for conv in folded.trunk.iter().chain(folded.heads.iter().flat_map(|h| &h.convs)).chain(laterals) {
            // The kernels in `fast/kernels.rs` are the only ones there are.
            assert!(
                (conv.kernel == 3 && matches!(conv.stride, 1 | 2))
                    || (conv.kernel == 1 && conv.stride == 1 && !conv.depthwise),
                "no fast kernel for {}x{} stride {} convs",
                conv.kernel,
                conv.kernel,
                conv.stride
            );
        }
        let taps: Vec<usize> =
            folded.heads.iter().flat_map(|h| std::iter::once(h.after).chain(h.fuse.as_ref().map(|f| f.from))).collect();
        let trunk = groups(&folded.trunk, |i| taps.contains(&i));
        let group_of =
            |layer: usize| trunk.iter().position(|(_, last)| *last == layer).expect("a head reads a group's output");
        let heads: Vec<Head> = folded
            .heads
            .iter()
            .map(|h| Head {
                after: group_of(h.after),
                fuse: h.fuse.as_ref().map(|f| {
                    let lateral = groups(std::slice::from_ref(&f.lateral), |_| false).remove(0).0;
                    (group_of(f.from), lateral)
                }),
                groups: groups(&h.convs, |_| false).into_iter().map(|(g, _)| g).collect(),
            })
            .collect();
        let outputs = heads[0].groups.last().expect("a head has layers").out_channels();
        assert!(heads.iter().all(|h| h.groups.last().map(Group::out_channels) == Some(outputs)), "heads' outputs");
        let arch = pulp::Arch::new();
        FastDetector {
            lanes: arch.dispatch(Lanes),
            arch,
            trunk: trunk.into_iter().map(|(g, _)| g).collect(),
            heads,
            outputs,
        }
    }

    /// Raw outputs `[OUTPUTS, points]` row-major, in `grin_net::Points` order.
    pub(crate) fn forward(&self, input: Map) -> Vec<f32> {
        if rayon::current_num_threads() > 1 {
            // Entered from outside the pool, every group's parallel loop
            // would hand its work to a pool thread and sleep until it is
            // done; inside the pool, the loops start on the thread already
            // there.
            rayon::scope(|_| self.forward_with(input, true))
        } else {
            // One thread: no pool at all, no handover per group.
            self.forward_with(input, false)
        }
    }

    fn forward_with(&self, input: Map, parallel: bool) -> Vec<f32> {
        let levels = self.level_sizes(input.height, input.width);
        let total: usize = levels.iter().map(|(h, w)| h * w).sum();
        let mut raw = vec![0.0f32; self.outputs * total];
        let raw_planes = Planes::writing(&mut raw, total);
        // Trunk groups' outputs, each dropped once no later step reads it
        // (the next group, a head not yet run): no map is copied for a head.
        let mut outs: Vec<Option<Map>> = Vec::with_capacity(self.trunk.len());
        let mut input = Some(input);
        for (i, group) in self.trunk.iter().enumerate() {
            let x = if i == 0 { input.as_ref() } else { outs[i - 1].as_ref() };
            outs.push(Some(self.run_to_map(group, x.expect("the group before's output"), parallel)));
            if let Some(frame) = input.take() {
                frame.free();
            }
            for (level, head) in self.heads.iter().enumerate().filter(|(_, h)| h.ready() == i) {
                let fused = head.fuse.as_ref().map(|(from, lateral)| {
                    let coarse = self.run_to_map(lateral, outs[*from].as_ref().expect("kept for a head"), parallel);
                    // Fused in place unless the next group or another head reads the finer map.
                    let shared = head.after == i || self.heads.iter().filter(|h| h.reads(head.after)).count() > 1;
                    let finer = &mut outs[head.after];
                    let into = if shared { finer.clone() } else { finer.take() };
                    let mut into = into.expect("kept for a head");
                    grin_net::add_upsampled(&mut into.data, &coarse.data, into.channels, into.height, into.width);
                    into
                });
                let y = fused.as_ref().or(outs[head.after].as_ref()).expect("kept for a head");
                let (last, inner) = head.groups.split_last().expect("a head has layers");
                let mut mid: Option<Map> = None;
                for group in inner {
                    mid = Some(self.run_to_map(group, mid.as_ref().unwrap_or(y), parallel));
                }
                let y = mid.as_ref().unwrap_or(y);
                let offset: usize = levels[..level].iter().map(|(h, w)| h * w).sum();
                assert_eq!(last.out_size(y.height, y.width), levels[level], "level sizes");
                self.run(last, y, raw_planes.at(offset), parallel);
            }
            for (j, out) in outs.iter_mut().enumerate().take(i) {
                if !self.heads.iter().any(|h| h.ready() > i && h.reads(j)) {
                    *out = None;
                }
            }
        }
        raw
    }

    /// Output `(height, width)` of every level, in level order, for an
    /// input of `height x width`.
    fn level_sizes(&self, height: usize, width: usize) -> Vec<(usize, usize)> {
        let mut sizes = Vec::with_capacity(self.trunk.len());
        let mut size = (height, width);
        for group in &self.trunk {
            size = group.out_size(size.0, size.1);
            sizes.push(size);
        }
        self.heads.iter().map(|h| h.groups.iter().fold(sizes[h.after], |s, g| g.out_size(s.0, s.1))).collect()
    }

    fn run_to_map(&self, group: &Group, x: &Map, parallel: bool) -> Map {
        let (height, width) = group.out_size(x.height, x.width);
        let channels = group.out_channels();
        let len = channels * height * width;
        // Not zeroed first: every band writes every value of its rows, and
        // zeroing a 640x480 frame's maps cost a tenth of its time.
        let mut data = pool::take(len);
        self.run(group, x, Planes::uninit(&mut data.spare_capacity_mut()[..len], height * width), parallel);
        // SAFETY: `len <= capacity`, and `run` wrote all `len` values: its
        // bands cover every row (asserted there) of every plane, and each
        // kernel writes its rows whole.
        unsafe { data.set_len(len) };
        Map { channels, height, width, data }
    }

    /// Runs `group` on `x`, writing its output planes to `out` (which must
    /// hold `out_channels` planes of the output size).
    fn run(&self, group: &Group, x: &Map, out: Planes, parallel: bool) {
        assert_eq!(x.channels, group.in_channels(), "layer input channels");
        assert_eq!(x.data.len(), x.channels * x.height * x.width, "map size");
        let (height, width) = group.out_size(x.height, x.width);
        let layout = group.conv3x3.as_ref().map(|c| LineLayout::new(c.stride, x.height, x.width, self.lanes));
        let per_row = group.scratch_per_row(layout, width).max(1);
        let mut rows = (BAND_BYTES / (4 * per_row)).clamp(1, height);
        let threads = if parallel { rayon::current_num_threads() } else { 1 };
        if threads > 1 {
            // At least two bands a thread, so the work evens out.
            rows = rows.min(height.div_ceil(2 * threads)).max(1);
        }
        let bands = height.div_ceil(rows);
        // The bound `run_to_map` trusts: the bands cover every row, once.
        debug_assert_eq!((0..bands).map(|b| rows.min(height - b * rows)).sum::<usize>(), height);
        let scratch = || Scratch::new(group, layout, rows, width);
        let band = |b: usize, s: &mut Scratch| {
            let r0 = b * rows;
            self.band(group, x, layout, r0, rows.min(height - r0), width, out, s)
        };
        if threads > 1 && bands > 1 {
            (0..bands).into_par_iter().for_each_init(scratch, |s, b| band(b, s));
        } else {
            let mut s = scratch();
            (0..bands).for_each(|b| band(b, &mut s));
        }
    }

    /// Output rows `r0..r0 + rows` of every plane of `group`.
    #[allow(clippy::too_many_arguments)]
    fn band(
        &self,
        group: &Group,
        x: &Map,
        layout: Option<LineLayout>,
        r0: usize,
        rows: usize,
        width: usize,
        out: Planes,
        scratch: &mut Scratch,
    ) {
        let pixels = rows * width;
        let out = out.at(r0 * width);
        let Scratch { lines, between } = scratch;
        let last = group.pointwise.len();
        // Layer k of the group (0: the 3x3 conv, if any) writes to
        // `between[k % 2]`, or to `out` when it is the last.
        let mut target = |k: usize, is_last: bool| {
            if is_last {
                out
            } else {
                Planes::writing(&mut between[k % 2], pixels)
            }
        };
        let mut input = Planes::reading(&x.data, x.height * x.width).at(r0 * width);
        if let (Some(conv), Some(layout)) = (&group.conv3x3, layout) {
            let dst = target(0, last == 0);
            self.arch.dispatch(Conv3x3Band { layout, input: &x.data, r0, rows, lines, conv, out: dst });
            input = dst;
        }
        let first = usize::from(group.conv3x3.is_some());
        for (k, conv) in group.pointwise.iter().enumerate() {
            let dst = target(first + k, k + 1 == last);
            // The kernel only reads `input` (the map's planes are cast to
            // `*mut` to share the type).
            self.arch.dispatch(PointwiseBand { conv, input, out: dst, pixels });
            input = dst;
        }
    }
}

#[cfg(test)]
mod tests;
