//! The two building blocks of the detector, each able to report its own cost.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// Output side of a 3x3 (pad 1) or 1x1 conv with the given stride.
pub fn conv_out(side: usize, stride: usize) -> usize {
    side.div_ceil(stride)
}

/// Conv + BatchNorm + optional ReLU.
#[derive(Module, Debug)]
pub struct ConvBn<B: Backend> {
    conv: Conv2d<B>,
    norm: BatchNorm<B>,
    relu: bool,
}

impl<B: Backend> ConvBn<B> {
    pub fn new(
        input: usize,
        output: usize,
        kernel: usize,
        stride: usize,
        groups: usize,
        relu: bool,
        device: &B::Device,
    ) -> Self {
        let pad = kernel / 2;
        let conv = Conv2dConfig::new([input, output], [kernel, kernel])
            .with_stride([stride, stride])
            .with_groups(groups)
            .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
            .with_bias(false)
            .init(device);
        ConvBn { conv, norm: BatchNormConfig::new(output).init(device), relu }
    }

    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let x = self.norm.forward(pointwise_or_conv(&self.conv, x));
        if self.relu {
            relu(x)
        } else {
            x
        }
    }

    /// Multiply-adds for an input of `h x w`, and the output size.
    pub fn macs(&self, h: usize, w: usize) -> (u64, usize, usize) {
        let [out_c, in_per_group, kh, kw] = self.conv.weight.dims();
        let (oh, ow) = (conv_out(h, self.conv.stride[0]), conv_out(w, self.conv.stride[1]));
        ((oh * ow * out_c * in_per_group * kh * kw) as u64, oh, ow)
    }
}

/// A 1x1 conv is a matmul over channels. Written as one, its backward pass
/// is two GEMMs: on Burn's CPU backends that is 10-40x faster than their
/// generic conv backward, and on CUDA it is what the conv would become anyway.
pub fn pointwise_or_conv<B: Backend>(conv: &Conv2d<B>, x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [out_c, in_c, kh, kw] = conv.weight.dims();
    if (kh, kw) != (1, 1) || conv.groups != 1 || conv.stride != [1, 1] {
        return conv.forward(x);
    }
    let [b, c, h, w] = x.dims();
    debug_assert_eq!(c, in_c);
    let weight = conv.weight.val().reshape([1, out_c, in_c]);
    let mut y = weight.matmul(x.reshape([b, c, h * w]));
    if let Some(bias) = &conv.bias {
        y = y + bias.val().reshape([1, out_c, 1]);
    }
    y.reshape([b, out_c, h, w])
}

/// Depthwise 3x3 then pointwise 1x1: the MobileNet block that keeps the
/// model under 100k parameters.
#[derive(Module, Debug)]
pub struct DwSep<B: Backend> {
    depthwise: ConvBn<B>,
    pointwise: ConvBn<B>,
}

impl<B: Backend> DwSep<B> {
    pub fn new(input: usize, output: usize, stride: usize, device: &B::Device) -> Self {
        DwSep {
            depthwise: ConvBn::new(input, input, 3, stride, input, true, device),
            pointwise: ConvBn::new(input, output, 1, 1, 1, true, device),
        }
    }

    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.pointwise.forward(self.depthwise.forward(x))
    }

    pub fn macs(&self, h: usize, w: usize) -> (u64, usize, usize) {
        let (a, h, w) = self.depthwise.macs(h, w);
        let (b, h, w) = self.pointwise.macs(h, w);
        (a + b, h, w)
    }
}
