//! What reads the trunk's taps: each level's head, and the top-down fusion
//! into the finest one.

use crate::backend::DetectorBackend;
use crate::layers::{conv, into_corner, DwSep, FeatureMap};
use burn::module::{Module, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use grin_net::Conv;
use grin_terms::output::FACE;

/// Initial face probability, so the focal loss starts near its optimum for
/// the (overwhelming) background instead of spending steps getting there.
const PRIOR_PROBABILITY: f32 = 0.01;

/// Top-down fusion: the stride-16 features through a 1x1 conv, upsampled
/// 2x (nearest) and added to the stride-8 features the finest head reads.
#[derive(Module, Debug)]
pub(crate) struct TopDown<B: Backend> {
    pub(super) lateral: Conv2d<B>,
}

impl<B: Backend> TopDown<B> {
    /// Zero weights and bias: a new fusion changes nothing until trained,
    /// so a model without one fine-tunes into one from where it was.
    pub(super) fn new(lateral: &Conv, device: &B::Device) -> Self {
        let (from, into) = (lateral.input, lateral.output);
        let mut lateral = Conv2dConfig::new([from, into], [1, 1]).init(device);
        lateral.weight = Param::from_tensor(Tensor::zeros([into, from, 1, 1], device));
        lateral.bias = Some(Param::from_tensor(Tensor::zeros([into], device)));
        TopDown { lateral }
    }
}

impl<B: DetectorBackend> TopDown<B> {
    /// `into` plus `from` (half its resolution) through the lateral conv,
    /// each value repeated over a 2x2 block and cut to `into`'s size.
    pub(super) fn forward(&self, into: FeatureMap<B>, from: FeatureMap<B>) -> FeatureMap<B> {
        let coarse = conv(&self.lateral, from);
        let [b, c, _] = coarse.values.dims();
        let (h, w) = (coarse.height, coarse.width);
        let up = coarse
            .values
            .reshape([b, c, h, 1, w, 1])
            .expand([b, c, h, 2, w, 2])
            .reshape([b, c, 2 * h, 2 * w])
            .slice([0..b, 0..c, 0..into.height, 0..into.width])
            .reshape([b, c, into.height * into.width]);
        FeatureMap { values: into.values + up, ..into }
    }
}

/// One level's head: depthwise 3x3 over the tap's channels, pointwise to
/// the mixing width ([`super::DetectorSpec::head_widths`]), then the 6
/// outputs.
#[derive(Module, Debug)]
pub struct Head<B: Backend> {
    pub(super) mix: DwSep<B>,
    pub(super) out: Conv2d<B>,
}

impl<B: Backend> Head<B> {
    pub(super) fn new(depthwise: &Conv, pointwise: &Conv, out: &Conv, device: &B::Device) -> Self {
        let mut conv = Conv2dConfig::new([out.input, out.output], [1, 1]).init(device);
        let prior = -((1.0 - PRIOR_PROBABILITY) / PRIOR_PROBABILITY).ln();
        let mut bias = vec![0.0f32; out.output];
        bias[FACE] = prior;
        conv.bias = Some(Param::from_tensor(Tensor::from_data(TensorData::new(bias, [out.output]), device)));
        Head { mix: DwSep::new(depthwise, pointwise, device), out: conv }
    }

    /// `wider` (this head with a wider mixing layer, freshly drawn) computing
    /// what this head does: the old channels keep their weights, and the
    /// new ones' output weights start at zero, so they have no say until
    /// trained.
    pub(super) fn widened(self, wider: Head<B>) -> Head<B> {
        let mut out = wider.out;
        out.weight = Param::from_tensor(into_corner(out.weight.val().zeros_like(), self.out.weight.val()));
        out.bias = self.out.bias;
        Head { mix: self.mix.widened(wider.mix), out }
    }

    /// Channels of the mixing layer (what the output conv reads).
    pub(super) fn mix_channels(&self) -> usize {
        self.out.weight.dims()[1]
    }

    /// Channels the head reads: its tap's (the depthwise conv's).
    pub(super) fn input_channels(&self) -> usize {
        self.mix.layers()[0].conv.weight.dims()[0]
    }
}

impl<B: DetectorBackend> Head<B> {
    /// `[batch, OUTPUTS, points of this level]`.
    pub(super) fn forward(&self, x: FeatureMap<B>) -> Tensor<B, 3> {
        conv(&self.out, self.mix.forward(x)).values
    }
}
