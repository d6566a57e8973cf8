//! The detector's ops composed from Burn's own: what [`super::DetectorBackend`]
//! does on a backend that supplies nothing of its own (CUDA), and the
//! reference the CPU kernels are tested against.

use super::{Geometry, NormGrads, NormOutput, NormSettings};
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

/// The input and output gradient as images, and the conv's options.
fn conv_views<B: Backend>(
    x: FloatTensor<B>,
    weight: &FloatTensor<B>,
    grad: FloatTensor<B>,
    geometry: Geometry,
) -> (FloatTensor<B>, FloatTensor<B>, ConvOptions<2>) {
    let Geometry { height, width, stride } = geometry;
    let (oh, ow) = (height.div_ceil(stride), width.div_ceil(stride));
    (image::<B>(x, height, width), image::<B>(grad, oh, ow), conv_options(weight.shape()[0], stride))
}

pub fn depthwise3x3<B: Backend>(x: FloatTensor<B>, weight: FloatTensor<B>, geometry: Geometry) -> FloatTensor<B> {
    let (Geometry { height, width, stride }, channels) = (geometry, weight.shape()[0]);
    flat::<B>(B::conv2d(image::<B>(x, height, width), weight, None, conv_options(channels, stride)))
}

pub fn depthwise3x3_x_backward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    geometry: Geometry,
) -> FloatTensor<B> {
    let (x, grad, options) = conv_views::<B>(x, &weight, grad, geometry);
    flat::<B>(B::conv2d_x_backward(x, weight, grad, options))
}

pub fn depthwise3x3_weight_backward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    geometry: Geometry,
) -> FloatTensor<B> {
    let (x, grad, options) = conv_views::<B>(x, &weight, grad, geometry);
    B::conv2d_weight_backward(x, weight, grad, options)
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

/// With `xhat = (x - mean) / std` and `dz` the gradient before ReLU:
/// `dbeta = sum(dz)`, `dgamma = sum(dz * xhat)` and
/// `dx = gamma / std * (dz - dbeta / n - xhat * dgamma / n)`, sums per
/// channel over the `n` values of the batch.
pub fn batch_norm_train_backward<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    forward: NormOutput<B>,
    grad: FloatTensor<B>,
    settings: NormSettings,
) -> NormGrads<B> {
    let (x, grad, output) = (float::<B, 3>(x), float::<B, 3>(grad), float::<B, 3>(forward.output));
    let [batch, _, points] = x.dims();
    let n = (batch * points) as f64;
    let inv_std = per_channel(forward.var).add_scalar(settings.epsilon).sqrt().recip();
    let xhat = (x - per_channel(forward.mean)) * inv_std.clone();
    let dz = if settings.relu { grad.mask_fill(output.lower_equal_elem(0.0), 0.0) } else { grad };
    let dbeta = dz.clone().sum_dim(2).sum_dim(0);
    let dgamma = (dz.clone() * xhat.clone()).sum_dim(2).sum_dim(0);
    let dx = per_channel(gamma) * inv_std * (dz - dbeta.clone().div_scalar(n) - xhat * dgamma.clone().div_scalar(n));
    (primitive(dx), channels_of(dgamma), channels_of(dbeta))
}
