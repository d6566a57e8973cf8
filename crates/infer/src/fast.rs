//! A hand-written CPU forward pass of the detector, several times faster
//! than Burn's ndarray kernels at these sizes: BatchNorm is folded into the
//! conv weights once at load, each conv fuses bias and ReLU, 1x1 convs are
//! register-blocked over 4 output channels, and no tensor is allocated per
//! operation beyond each layer's output.
//!
//! It runs [`grin_model::Detector::folded`], so the architecture (layer
//! order, channels, taps) is stated only in `grin_model`; `tests/parity.rs`
//! checks outputs and detections against the Burn model. The 3x3 convs are
//! training's depthwise kernel with its inference epilogue. Decoding is
//! `grin_model::decode`, as on the Burn path. Channels are split over
//! rayon's global pool, so `--threads` applies.

use grin_model::kernels::depthwise::{self, Epilogue, Shape};
use grin_model::{FoldedConv, FoldedDetector};
use rayon::prelude::*;

/// Output channels per block of the 1x1 kernel.
const OC_BLOCK: usize = 4;
/// Pixels per tile of the 1x1 kernel: 4 accumulator rows stay in L1.
const TILE: usize = 128;

/// A feature map, `[channels, height, width]`.
#[derive(Debug, Clone)]
pub(crate) struct Map {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

#[derive(Debug, Clone)]
pub(crate) struct FastDetector(FoldedDetector);

impl FastDetector {
    pub fn new(folded: FoldedDetector) -> FastDetector {
        for conv in folded.trunk.iter().chain(folded.heads.iter().flat_map(|h| &h.convs)) {
            // The kernels below are the only ones there are.
            assert!(
                conv.kernel == 3 || (conv.kernel == 1 && conv.stride == 1 && !conv.depthwise),
                "no fast kernel for {}x{} stride {} convs",
                conv.kernel,
                conv.kernel,
                conv.stride
            );
        }
        FastDetector(folded)
    }

    /// Raw outputs `[OUTPUTS, points]` row-major, in `grin_model::Points` order.
    pub fn forward(&self, input: Map) -> Vec<f32> {
        // Entered once from outside the pool, every layer's parallel loop
        // would hand its work to a pool thread and sleep until it is done:
        // at one thread that handover cost 3 ms of an 80x60 pass's 3.3.
        // Inside the pool, the loops run on the thread that is already there.
        rayon::scope(|_| self.forward_in_pool(input))
    }

    fn forward_in_pool(&self, input: Map) -> Vec<f32> {
        let FoldedDetector { trunk, heads } = &self.0;
        let mut x = input;
        let mut levels = Vec::with_capacity(heads.len());
        let mut heads = heads.iter().peekable();
        for (i, conv) in trunk.iter().enumerate() {
            x = apply(conv, &x);
            while let Some(head) = heads.next_if(|h| h.after == i) {
                let first = apply(&head.convs[0], &x);
                levels.push(head.convs[1..].iter().fold(first, |y, conv| apply(conv, &y)));
            }
        }
        let outputs = levels[0].channels;
        let total: usize = levels.iter().map(|l| l.height * l.width).sum();
        let mut raw = vec![0.0; outputs * total];
        let mut offset = 0;
        for level in &levels {
            let n = level.height * level.width;
            for k in 0..outputs {
                raw[k * total + offset..k * total + offset + n].copy_from_slice(&level.data[k * n..(k + 1) * n]);
            }
            offset += n;
        }
        raw
    }
}

fn apply(conv: &FoldedConv, x: &Map) -> Map {
    assert_eq!(x.channels, conv.in_channels, "layer input channels");
    if conv.kernel == 1 {
        return pointwise(conv, x);
    }
    let shape = Shape { batch: 1, channels: x.channels, height: x.height, width: x.width, stride: conv.stride };
    let epilogue = Some(Epilogue { bias: &conv.bias, relu: conv.relu });
    let data = if conv.depthwise {
        depthwise::forward(&x.data, &conv.weight, shape, epilogue)
    } else {
        depthwise::dense_forward(&x.data, &conv.weight, shape, conv.out_channels, epilogue)
    };
    Map { channels: conv.out_channels, height: shape.out_height(), width: shape.out_width(), data }
}

/// 1x1: each input row is loaded once per 4 output channels.
fn pointwise(conv: &FoldedConv, x: &Map) -> Map {
    let p = x.height * x.width;
    let cin = conv.in_channels;
    let mut out = vec![0.0f32; conv.out_channels * p];
    out.par_chunks_mut(OC_BLOCK * p).enumerate().for_each(|(block, rows)| {
        let oc0 = block * OC_BLOCK;
        let n = rows.len() / p;
        if n == OC_BLOCK {
            let mut acc = [[0.0f32; TILE]; OC_BLOCK];
            for t0 in (0..p).step_by(TILE) {
                let len = TILE.min(p - t0);
                acc.iter_mut().for_each(|a| a[..len].fill(0.0));
                let [a0, a1, a2, a3] = &mut acc;
                for ic in 0..cin {
                    let xs = &x.data[ic * p + t0..ic * p + t0 + len];
                    let w = |j: usize| conv.weight[(oc0 + j) * cin + ic];
                    let (w0, w1, w2, w3) = (w(0), w(1), w(2), w(3));
                    for ((((v, a0), a1), a2), a3) in
                        xs.iter().zip(&mut a0[..len]).zip(&mut a1[..len]).zip(&mut a2[..len]).zip(&mut a3[..len])
                    {
                        *a0 += w0 * v;
                        *a1 += w1 * v;
                        *a2 += w2 * v;
                        *a3 += w3 * v;
                    }
                }
                for (j, a) in acc.iter().enumerate() {
                    rows[j * p + t0..j * p + t0 + len].copy_from_slice(&a[..len]);
                }
            }
        } else {
            for (j, row) in rows.chunks_mut(p).enumerate() {
                for ic in 0..cin {
                    let w = conv.weight[(oc0 + j) * cin + ic];
                    row.iter_mut().zip(&x.data[ic * p..(ic + 1) * p]).for_each(|(d, v)| *d += w * v);
                }
            }
        }
        let epilogue = Epilogue { bias: &conv.bias, relu: conv.relu };
        for (j, row) in rows.chunks_mut(p).enumerate() {
            epilogue.apply(row, oc0 + j);
        }
    });
    Map { channels: conv.out_channels, height: x.height, width: x.width, data: out }
}
