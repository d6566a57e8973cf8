//! The two operations the detector runs through its own backend trait, so
//! that each backend can supply them and their backward passes:
//!
//! - the depthwise 3x3 convolution: Burn's generic conv backward computes a
//!   grouped conv's weight gradient one group at a time, and burn-ndarray's
//!   input gradient goes through a slow transposed conv, so on the CPU a
//!   depthwise layer's backward cost 10-30x its forward pass;
//! - training-mode BatchNorm (+ ReLU): composed from Burn ops it is about
//!   fifteen passes over the activations, several of them broadcasts.
//!
//! Together they were about two thirds of a CPU training step. The defaults
//! are Burn's own ops (CUDA's conv backward kernels are native, and fusion
//! merges the BatchNorm arithmetic); the CPU backend runs the loops in
//! [`crate::kernels`] on the tensors' own memory. [`autodiff`] records both
//! ops on the autodiff graph with backward passes that call these methods.

mod autodiff;
pub mod burn_ops;

use crate::kernels;
use burn::backend::ndarray::NdArrayTensor;
use burn::backend::NdArray;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::FloatTensor;
use burn::tensor::TensorMetadata;
use std::borrow::Cow;

/// What a depthwise op needs beyond its tensors: the input's spatial size
/// (the tensors are `[batch, channels, height * width]`) and the stride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub height: usize,
    pub width: usize,
    pub stride: usize,
}

/// BatchNorm's settings that are not tensors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormSettings {
    pub epsilon: f64,
    pub relu: bool,
}

/// Training-mode BatchNorm's output and the batch statistics (mean and
/// biased variance, `[channels]`) that feed the running averages.
#[derive(Debug, Clone)]
pub struct NormOutput<B: Backend> {
    pub output: FloatTensor<B>,
    pub mean: FloatTensor<B>,
    pub var: FloatTensor<B>,
}

/// Gradients of training-mode BatchNorm: input, gamma, beta.
pub type NormGrads<B> = (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>);

/// A backend that can run the detector. Tensors are `[batch, channels,
/// points]`; the depthwise weight is `[channels, 1, 3, 3]` (padding 1, no
/// bias), gamma and beta are `[channels]`.
pub trait DetectorBackend: Backend {
    fn depthwise3x3(x: FloatTensor<Self>, weight: FloatTensor<Self>, geometry: Geometry) -> FloatTensor<Self> {
        burn_ops::depthwise3x3::<Self>(x, weight, geometry)
    }

    fn depthwise3x3_x_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        geometry: Geometry,
    ) -> FloatTensor<Self> {
        burn_ops::depthwise3x3_x_backward::<Self>(x, weight, grad, geometry)
    }

    fn depthwise3x3_weight_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        geometry: Geometry,
    ) -> FloatTensor<Self> {
        burn_ops::depthwise3x3_weight_backward::<Self>(x, weight, grad, geometry)
    }

    fn batch_norm_train(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        settings: NormSettings,
    ) -> NormOutput<Self> {
        burn_ops::batch_norm_train::<Self>(x, gamma, beta, settings)
    }

    /// `forward` is what `batch_norm_train` returned (its output gives
    /// ReLU's mask), `grad` the gradient arriving at the output.
    fn batch_norm_train_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        forward: NormOutput<Self>,
        grad: FloatTensor<Self>,
        settings: NormSettings,
    ) -> NormGrads<Self> {
        burn_ops::batch_norm_train_backward::<Self>(x, gamma, forward, grad, settings)
    }
}

/// A backend the trainer can use: autodiff over a detector backend, whose
/// inner backend (evaluation, `model.valid()`) is one too.
pub trait TrainBackend: DetectorBackend + AutodiffBackend<InnerBackend: DetectorBackend> {}
impl<B: DetectorBackend + AutodiffBackend<InnerBackend: DetectorBackend>> TrainBackend for B {}

/// The tensor's values: its own memory when contiguous (the usual case),
/// else a contiguous copy.
fn values(tensor: &NdArrayTensor) -> Cow<'_, [f32]> {
    let NdArrayTensor::F32(storage) = tensor else {
        unreachable!("NdArray<f32> holds float tensors as f32, not {:?}", tensor.dtype())
    };
    let view = storage.view();
    match view.to_slice() {
        Some(values) => Cow::Borrowed(values),
        None => Cow::Owned(view.iter().copied().collect()),
    }
}

fn from_values(values: Vec<f32>, dims: &[usize]) -> NdArrayTensor {
    let array = ndarray::ArcArray::from_shape_vec(ndarray::IxDyn(dims), values).expect("kernel output size");
    NdArrayTensor::from(array)
}

fn depthwise_shape(x: &NdArrayTensor, geometry: Geometry) -> kernels::depthwise::Shape {
    let [batch, channels, _] = x.shape().dims();
    let Geometry { height, width, stride } = geometry;
    kernels::depthwise::Shape { batch, channels, height, width, stride }
}

fn norm_shape(x: &NdArrayTensor) -> kernels::batch_norm::Shape {
    let [batch, channels, points] = x.shape().dims();
    kernels::batch_norm::Shape { batch, channels, points }
}

/// The CPU backend: both ops and their gradients are [`kernels`]' loops.
impl DetectorBackend for NdArray<f32> {
    fn depthwise3x3(x: FloatTensor<Self>, weight: FloatTensor<Self>, geometry: Geometry) -> FloatTensor<Self> {
        let shape = depthwise_shape(&x, geometry);
        let y = kernels::depthwise::forward(&values(&x), &values(&weight), shape, None);
        from_values(y, &[shape.batch, shape.channels, shape.out_height() * shape.out_width()])
    }

    fn depthwise3x3_x_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        geometry: Geometry,
    ) -> FloatTensor<Self> {
        let shape = depthwise_shape(&x, geometry);
        let dx = kernels::depthwise::input_grad(&values(&grad), &values(&weight), shape);
        from_values(dx, &x.shape().dims::<3>())
    }

    fn depthwise3x3_weight_backward(
        x: FloatTensor<Self>,
        _weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        geometry: Geometry,
    ) -> FloatTensor<Self> {
        let shape = depthwise_shape(&x, geometry);
        let dw = kernels::depthwise::weight_grad(&values(&x), &values(&grad), shape);
        from_values(dw, &[shape.channels, 1, 3, 3])
    }

    fn batch_norm_train(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        settings: NormSettings,
    ) -> NormOutput<Self> {
        let shape = norm_shape(&x);
        let epsilon = settings.epsilon as f32;
        let f =
            kernels::batch_norm::forward(&values(&x), &values(&gamma), &values(&beta), epsilon, settings.relu, shape);
        NormOutput {
            output: from_values(f.output, &x.shape().dims::<3>()),
            mean: from_values(f.mean, &[shape.channels]),
            var: from_values(f.var, &[shape.channels]),
        }
    }

    fn batch_norm_train_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        forward: NormOutput<Self>,
        grad: FloatTensor<Self>,
        settings: NormSettings,
    ) -> NormGrads<Self> {
        let shape = norm_shape(&x);
        let epsilon = settings.epsilon as f32;
        let g = kernels::batch_norm::backward(
            &values(&x),
            &values(&gamma),
            &values(&forward.output),
            &values(&grad),
            (&values(&forward.mean), &values(&forward.var)),
            epsilon,
            settings.relu,
            shape,
        );
        let channels = [shape.channels];
        (from_values(g.input, &x.shape().dims::<3>()), from_values(g.gamma, &channels), from_values(g.beta, &channels))
    }
}

#[cfg(feature = "cuda")]
impl DetectorBackend for burn_cuda::Cuda<f32, i32> {}
