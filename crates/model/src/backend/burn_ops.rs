//! The detector's ops composed from Burn's own: what [`super::DetectorBackend`]
//! does on a backend that supplies nothing of its own (autodiff over any
//! backend, and evaluation on CUDA and wgpu), and the reference the CPU
//! kernels are tested against.

use super::{Geometry, NormOutput, NormSettings};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::ops::{ConvOptions, FloatTensor};
use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};

fn float<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

fn primitive<B: Backend, const D: usize>(t: Tensor<B, D>) -> FloatTensor<B> {
    t.into_primitive().tensor()
}

fn per_channel<B: Backend>(t: FloatTensor<B>) -> Tensor<B, 3> {
    let channels = t.shape()[0];
    float::<B, 1>(t).reshape([1, channels, 1])
}

fn channels_of<B: Backend>(t: Tensor<B, 3>) -> FloatTensor<B> {
    let channels = t.dims()[1];
    primitive(t.reshape([channels]))
}

fn conv_options(channels: usize, stride: usize) -> ConvOptions<2> {
    ConvOptions::new([stride, stride], [1, 1], [1, 1], channels)
}

/// `[batch, channels, points]` viewed as `[batch, channels, height, width]`.
fn image<B: Backend>(x: FloatTensor<B>, height: usize, width: usize) -> FloatTensor<B> {
    let [b, c, _] = x.shape().dims();
    B::float_reshape(x, [b, c, height, width].into())
}

fn flat<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let [b, c, h, w] = x.shape().dims();
    B::float_reshape(x, [b, c, h * w].into())
}

pub fn depthwise3x3<B: Backend>(x: FloatTensor<B>, weight: FloatTensor<B>, geometry: Geometry) -> FloatTensor<B> {
    let (Geometry { height, width, stride }, channels) = (geometry, weight.shape()[0]);
    flat::<B>(B::conv2d(image::<B>(x, height, width), weight, None, conv_options(channels, stride)))
}

pub fn batch_norm_train<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    settings: NormSettings,
) -> NormOutput<B> {
    let x = float::<B, 3>(x);
    let mean = x.clone().mean_dim(2).mean_dim(0);
    let centered = x - mean.clone();
    let var = centered.clone().square().mean_dim(2).mean_dim(0);
    let scale = per_channel(gamma) / var.clone().add_scalar(settings.epsilon).sqrt();
    let y = centered * scale + per_channel(beta);
    let y = if settings.relu { relu(y) } else { y };
    NormOutput { output: primitive(y), mean: channels_of(mean), var: channels_of(var) }
}
