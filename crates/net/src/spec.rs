//! The architecture, stated once: which convs the detector has, in the
//! order its weights file holds them, and where its heads read the trunk.
//! Burn's `Detector` (grin-model) is built from this list, the weights file
//! is read and written by it, and the folded engine runs it.
//!
//! A depthwise-separable backbone tapped at strides 8, 16 and 32, with one
//! small head per level (and, with `model.top_down`, the stride-16 features
//! fused into the stride-8 head's input). Every output location predicts a
//! face logit, four box distances and a smile logit.

use crate::config::ModelConfig;
use crate::points::{conv_out, Points, STRIDES};
use grin_terms::output::OUTPUTS;
use serde::{Deserialize, Serialize};

/// Channels of the stem and of the four stride-2 stages at `width_mult = 1`.
const BASE_WIDTHS: [usize; 5] = [16, 32, 48, 80, 112];

/// Whether backbone block `i` feeds a head. Blocks come in (stride-2,
/// stride-1) pairs, one pair per stage; the ends of stages 2..4 (strides 8,
/// 16, 32) are tapped, in that order. The one statement of the rule.
pub fn is_tapped(block: usize) -> bool {
    block % 2 == 1 && block >= 3
}

/// Everything needed to rebuild a detector: architecture plus input shape.
/// Unknown keys are refused, as `model`'s are: a key this build does not
/// know may shape the weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectorSpec {
    pub model: ModelConfig,
    pub width: usize,
    pub height: usize,
    pub channels: usize,
}

impl DetectorSpec {
    pub fn widths(&self) -> [usize; 5] {
        // Multiples of 4 keep depthwise kernels aligned; never below 4.
        BASE_WIDTHS.map(|w| (((w as f32 * self.model.width_mult) / 4.0).round() as usize).max(1) * 4)
    }

    /// Channels of each head's mixing layer, finest level first: the tapped
    /// trunk layer's, but `model.fine_head` at stride 8 when set.
    pub fn head_widths(&self) -> [usize; 3] {
        let w = self.widths();
        let fine = if self.model.fine_head > 0 { self.model.fine_head } else { w[2] };
        [fine, w[3], w[4]]
    }

    pub fn points(&self) -> Points {
        Points::with_level_scale(self.width, self.height, self.model.level_scale)
    }

    /// The convs this spec's detector is made of.
    pub fn architecture(&self) -> Architecture {
        let w = self.widths();
        let dw_sep = |input, output, stride| [Conv::depthwise(input, stride), Conv::pointwise(input, output)];
        let blocks = (1..5).flat_map(|stage| [dw_sep(w[stage - 1], w[stage], 2), dw_sep(w[stage], w[stage], 1)]);
        let heads = [w[2], w[3], w[4]].into_iter().zip(self.head_widths()).map(|(input, mix)| {
            let [depthwise, pointwise] = dw_sep(input, mix, 1);
            [depthwise, pointwise, Conv::biased(mix, OUTPUTS)]
        });
        Architecture {
            stem: Conv {
                input: self.channels,
                output: w[0],
                kernel: 3,
                stride: 2,
                depthwise: false,
                norm: true,
                relu: true,
            },
            blocks: blocks.collect(),
            heads: heads.collect(),
            top_down: self.model.top_down.then(|| Conv::biased(w[3], w[2])),
        }
    }
}

/// One conv: with a BatchNorm and an optional ReLU after it (`norm`), or
/// with a bias and nothing after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv {
    pub input: usize,
    pub output: usize,
    /// Square side: 3 (padding 1) or 1 (no padding).
    pub kernel: usize,
    pub stride: usize,
    /// Each output channel reads only its own input channel.
    pub depthwise: bool,
    /// A BatchNorm follows (the conv has no bias); else the conv has a bias.
    pub norm: bool,
    pub relu: bool,
}

impl Conv {
    fn depthwise(channels: usize, stride: usize) -> Conv {
        Conv { input: channels, output: channels, kernel: 3, stride, depthwise: true, norm: true, relu: true }
    }

    fn pointwise(input: usize, output: usize) -> Conv {
        Conv { input, output, kernel: 1, stride: 1, depthwise: false, norm: true, relu: true }
    }

    /// A 1x1 conv with a bias: a head's outputs, the top-down fusion's lateral.
    fn biased(input: usize, output: usize) -> Conv {
        Conv { input, output, kernel: 1, stride: 1, depthwise: false, norm: false, relu: false }
    }

    /// Conv groups: one per channel when depthwise.
    pub fn groups(&self) -> usize {
        if self.depthwise {
            self.input
        } else {
            1
        }
    }

    /// `[output, input / groups, kernel, kernel]`.
    pub fn weight_shape(&self) -> [usize; 4] {
        [self.output, self.input / self.groups(), self.kernel, self.kernel]
    }

    /// The shapes of its tensors in file order: the weight, then the bias,
    /// or BatchNorm's gamma, beta, running mean and running variance.
    pub fn tensor_shapes(&self) -> Vec<Vec<usize>> {
        let per_channel = if self.norm { 4 } else { 1 };
        std::iter::once(self.weight_shape().to_vec()).chain((0..per_channel).map(|_| vec![self.output])).collect()
    }

    /// Multiply-adds on an input of `h x w`, and the output's size.
    pub fn macs(&self, h: usize, w: usize) -> (u64, usize, usize) {
        let (oh, ow) = (conv_out(h, self.stride), conv_out(w, self.stride));
        let per_output: usize = self.weight_shape()[1..].iter().product();
        ((oh * ow * self.output * per_output) as u64, oh, ow)
    }
}

/// The detector's convs, in the order its weights file holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Architecture {
    pub stem: Conv,
    /// Depthwise then pointwise, a (stride-2, stride-1) pair per stage.
    pub blocks: Vec<[Conv; 2]>,
    /// Per level, finest first: depthwise over the tap, pointwise to the
    /// mixing width, then the outputs.
    pub heads: Vec<[Conv; 3]>,
    /// Top-down fusion's lateral conv: the stride-16 tap into the stride-8 one.
    pub top_down: Option<Conv>,
}

impl Architecture {
    /// Every conv, in file order.
    pub fn convs(&self) -> impl Iterator<Item = &Conv> {
        std::iter::once(&self.stem)
            .chain(self.blocks.iter().flatten())
            .chain(self.heads.iter().flatten())
            .chain(&self.top_down)
    }

    /// Every tensor's shape, in file order.
    pub fn tensor_shapes(&self) -> Vec<Vec<usize>> {
        self.convs().flat_map(Conv::tensor_shapes).collect()
    }

    /// The trunk blocks whose outputs the heads read, finest first.
    pub fn taps(&self) -> Vec<usize> {
        let taps: Vec<usize> = (0..self.blocks.len()).filter(|&i| is_tapped(i)).collect();
        debug_assert_eq!(taps.len(), STRIDES.len());
        taps
    }
}

/// What `grin model-info` prints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Every value in the weights file (BatchNorm's running statistics too).
    pub params: usize,
    /// 2 FLOPs per multiply-add, as papers count them.
    pub mflops: f64,
    /// Values a pass may hold at its peak, with room to spare: twice the
    /// largest map and every head's maps (grin-detect's engine runs a layer
    /// group over row bands and frees a map once read; the band scratch and
    /// each thread's own buffers come on top, so a bound of once these
    /// still aborted near the limit). What grin-detect asks for before a
    /// pass.
    pub activations: usize,
}

impl Budget {
    /// Parameters and MFLOPs of one pass at the spec's size.
    pub fn of(spec: &DetectorSpec) -> Budget {
        let arch = spec.architecture();
        let params = arch.tensor_shapes().iter().map(|s| s.iter().product::<usize>()).sum();
        let (mut trunk, mut size) = (0, (spec.height, spec.width));
        let mut tapped = Vec::new();
        let (mut largest, mut heads_maps) = (0, 0);
        let mut out = |conv: &Conv, (h, w): (usize, usize)| {
            let (macs, h, w) = conv.macs(h, w);
            largest = largest.max(conv.output * h * w);
            (macs, h, w)
        };
        let (macs, h, w) = out(&arch.stem, size);
        trunk += macs;
        size = (h, w);
        for (i, block) in arch.blocks.iter().enumerate() {
            for conv in block {
                let (macs, h, w) = out(conv, size);
                trunk += macs;
                size = (h, w);
            }
            if is_tapped(i) {
                tapped.push(size);
            }
        }
        // The lateral conv runs on the stride-16 tap, before its upsampling.
        let fusion = arch.top_down.map_or(0, |lateral| out(&lateral, tapped[1]).0);
        let heads: u64 = arch
            .heads
            .iter()
            .zip(&tapped)
            .map(|(head, &size)| {
                head.iter()
                    .map(|conv| {
                        let (macs, h, w) = out(conv, size);
                        heads_maps += conv.output * h * w;
                        macs
                    })
                    .sum::<u64>()
            })
            .sum();
        let activations = 2 * (largest + heads_maps);
        Budget { params, mflops: 2.0 * (trunk + fusion + heads) as f64 / 1e6, activations }
    }
}
