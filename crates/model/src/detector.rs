//! The detector: a depthwise-separable backbone tapped at strides 8, 16 and
//! 32, with one small head per level. Every output location predicts a face
//! logit, four box distances and a smile logit.

use crate::backend::DetectorBackend;
use crate::config::ModelConfig;
use crate::layers::{conv, ConvBn, DwSep, FeatureMap};
use crate::points::{Points, STRIDES};
use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// Channels of the stem and of the four stride-2 stages at `width_mult = 1`.
const BASE_WIDTHS: [usize; 5] = [16, 32, 48, 80, 112];
/// Outputs per location: face logit, l, t, r, b, smile logit.
pub const OUTPUTS: usize = 6;
/// Initial face probability, so the focal loss starts near its optimum for
/// the (overwhelming) background instead of spending steps getting there.
const PRIOR_PROBABILITY: f32 = 0.01;

/// Whether backbone block `i` feeds a head. Blocks come in (stride-2,
/// stride-1) pairs, one pair per stage; the ends of stages 2..4 (strides 8,
/// 16, 32) are tapped, in that order. The one statement of the rule: the
/// training model, its MAC count and the Pi's fast path all ask here.
pub fn is_tapped(block: usize) -> bool {
    block % 2 == 1 && block >= 3
}

/// Everything needed to rebuild a detector: architecture plus input shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    pub fn points(&self) -> Points {
        Points::new(self.width, self.height)
    }

    pub fn init<B: Backend>(&self, device: &B::Device) -> Detector<B> {
        let w = self.widths();
        let mut blocks = Vec::new();
        for stage in 1..5 {
            blocks.push(DwSep::new(w[stage - 1], w[stage], 2, device));
            blocks.push(DwSep::new(w[stage], w[stage], 1, device));
        }
        let heads = [w[2], w[3], w[4]].iter().map(|&c| Head::new(c, device)).collect();
        Detector { stem: ConvBn::new(self.channels, w[0], 3, 2, 1, true, device), blocks, heads }
    }
}

/// One level's head: depthwise 3x3, pointwise, then the 6 outputs.
#[derive(Module, Debug)]
pub struct Head<B: Backend> {
    mix: DwSep<B>,
    out: Conv2d<B>,
}

impl<B: Backend> Head<B> {
    fn new(channels: usize, device: &B::Device) -> Self {
        let mut out = Conv2dConfig::new([channels, OUTPUTS], [1, 1]).init(device);
        let prior = -((1.0 - PRIOR_PROBABILITY) / PRIOR_PROBABILITY).ln();
        let mut bias = [0.0f32; OUTPUTS];
        bias[0] = prior;
        out.bias = Some(Param::from_tensor(Tensor::from_data(TensorData::new(bias.to_vec(), [OUTPUTS]), device)));
        Head { mix: DwSep::new(channels, channels, 1, device), out }
    }

    fn macs(&self, h: usize, w: usize) -> u64 {
        let (mix, h, w) = self.mix.macs(h, w);
        let [o, i, kh, kw] = self.out.weight.dims();
        mix + (h * w * o * i * kh * kw) as u64
    }
}

impl<B: DetectorBackend> Head<B> {
    /// `[batch, OUTPUTS, points of this level]`.
    fn forward(&self, x: FeatureMap<B>) -> Tensor<B, 3> {
        conv(&self.out, self.mix.forward(x)).values
    }
}

#[derive(Module, Debug)]
pub struct Detector<B: Backend> {
    stem: ConvBn<B>,
    blocks: Vec<DwSep<B>>,
    heads: Vec<Head<B>>,
}

/// Raw network output, `[batch, OUTPUTS, points]`, points in [`Points`] order.
#[derive(Debug, Clone)]
pub struct DetectorOutput<B: Backend> {
    pub raw: Tensor<B, 3>,
}

impl<B: Backend> DetectorOutput<B> {
    pub fn face_logits(&self) -> Tensor<B, 2> {
        self.raw.clone().narrow(1, 0, 1).squeeze_dim(1)
    }

    /// Box distances (left, top, right, bottom) in pixels, `[batch, 4, points]`.
    pub fn distances(&self, strides: Tensor<B, 3>) -> Tensor<B, 3> {
        // exp keeps distances positive; the clamp keeps an early bad step
        // from overflowing; multiplying by the stride makes one output scale
        // serve every level.
        self.raw.clone().narrow(1, 1, 4).clamp(-4.0, 5.0).exp() * strides
    }

    pub fn smile_logits(&self) -> Tensor<B, 2> {
        self.raw.clone().narrow(1, 5, 1).squeeze_dim(1)
    }
}

impl<B: DetectorBackend> Detector<B> {
    /// `x`: `[batch, channels, height, width]`, values in 0..1.
    pub fn forward(&self, x: Tensor<B, 4>) -> DetectorOutput<B> {
        let mut x = self.stem.forward(FeatureMap::from_image(x));
        let mut levels = Vec::with_capacity(self.heads.len());
        for (i, block) in self.blocks.iter().enumerate() {
            x = block.forward(x);
            if is_tapped(i) {
                levels.push(self.heads[levels.len()].forward(x.clone()));
            }
        }
        DetectorOutput { raw: Tensor::cat(levels, 2) }
    }
}

impl<B: Backend> Detector<B> {
    /// Multiply-adds of one forward pass at `h x w`, from the real layers.
    pub fn macs(&self, h: usize, w: usize) -> u64 {
        let (mut total, mut h, mut w) = self.stem.macs(h, w);
        let mut level = 0;
        for (i, block) in self.blocks.iter().enumerate() {
            let (m, nh, nw) = block.macs(h, w);
            total += m;
            (h, w) = (nh, nw);
            if is_tapped(i) {
                total += self.heads[level].macs(h, w);
                level += 1;
            }
        }
        debug_assert_eq!(level, STRIDES.len());
        total
    }
}
