//! The two operations the detector runs through its own backend trait, so
//! that a backend can supply a faster one:
//!
//! - the depthwise 3x3 convolution: on the CPU, Burn's generic grouped conv
//!   was 8-14x slower than a loop over each plane ([`crate::kernels`]),
//!   which evaluation and `grin-detect --engine burn` run;
//! - training-mode BatchNorm (+ ReLU), for backends that train through
//!   Burn's autodiff (CUDA, wgpu);
//! - on those, the loss's backward ([`crate::loss()`] takes it by hand) and
//!   the stem's conv as a batched product.
//!
//! The defaults are Burn's own ops ([`burn_ops`]); under autodiff over CUDA
//! or wgpu both are single ops with grin's own backward
//! ([`DetectorBackend::OWN_BACKWARD`]). A CPU training step does not go
//! through either: it is grin's own (`crate::cpu`).

pub mod burn_ops;

use crate::kernels;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::ndarray::NdArrayTensor;
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};
use std::borrow::Cow;

/// What a depthwise op needs beyond its tensors: the input's spatial size
/// (the tensors are `[batch, channels, height * width]`) and the stride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub height: usize,
    pub width: usize,
    pub stride: usize,
}

impl Geometry {
    /// The output's height and width (3x3, padding 1).
    pub fn out_size(&self) -> (usize, usize) {
        (self.height.div_ceil(self.stride), self.width.div_ceil(self.stride))
    }
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

/// A backend that can run the detector. Tensors are `[batch, channels,
/// points]`; the depthwise weight is `[channels, 1, 3, 3]` (padding 1, no
/// bias), gamma and beta are `[channels]`.
pub trait DetectorBackend: Backend {
    /// Training on autodiff over this backend runs grin's own CPU step
    /// (`crate::cpu::CpuStep`) instead of Burn's autodiff graph.
    const CPU_STEP: bool = false;

    /// Whether `Tensor::to_device` works between two of this backend's
    /// devices. wgpu's does not (`not implemented` in cubecl-runtime 0.10's
    /// server-to-server copy): there, data-parallel training copies through
    /// the host.
    const COPIES_BETWEEN_DEVICES: bool = true;

    /// Whether tensors live in host memory, so that reading one back is a
    /// copy, not a transfer and a sync: the in-VRAM feed then cuts and
    /// flips a batch's pixels in one pass on the host instead of as a
    /// chain of tensor ops (each a pass over the batch on burn-ndarray).
    const HOST_MEMORY: bool = false;

    /// Whether training (autodiff over this backend) runs grin's own
    /// backward ops: the depthwise conv's weight gradient
    /// ([`burn_ops::depthwise3x3_tracked`]; Burn's grouped conv backward is
    /// one conv per channel on burn-cubecl) and BatchNorm as one op
    /// ([`burn_ops::batch_norm_tracked`]; Burn's autodiff records two dozen
    /// small ops for it, each a cost to the host). On CUDA and wgpu.
    const OWN_BACKWARD: bool = false;

    /// Autodiff over an [`Self::OWN_BACKWARD`] backend, whose step is Burn's
    /// graph on a device: [`crate::loss()`] takes the gradient by hand with
    /// the value and hands both to [`Self::own_loss_backward`], and a dense
    /// 3x3 conv (the stem) runs as [`burn_ops::dense3x3_by_taps`].
    const DEVICE_AUTODIFF: bool = false;

    /// The loss's total as one autodiff op of the raw output, whose backward
    /// is `gradient` (d total / d raw, `[batch, OUTPUTS, points]`) times the
    /// upstream gradient. Without autodiff there is nothing to tie.
    fn own_loss_backward(
        total: FloatTensor<Self>,
        raw: FloatTensor<Self>,
        gradient: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let _ = (raw, gradient);
        total
    }

    fn depthwise3x3(x: FloatTensor<Self>, weight: FloatTensor<Self>, geometry: Geometry) -> FloatTensor<Self> {
        burn_ops::depthwise3x3::<Self>(x, weight, geometry)
    }

    fn batch_norm_train(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        settings: NormSettings,
    ) -> NormOutput<Self> {
        burn_ops::batch_norm_train::<Self>(x, gamma, beta, settings)
    }

    /// Hands `f` the tensor's values in row-major order: how the CPU step
    /// reads a batch. The default reads the data back.
    fn with_values<R>(x: FloatTensor<Self>, f: impl FnOnce(&[f32]) -> R) -> R {
        let data = Tensor::<Self, 1>::from_primitive(TensorPrimitive::Float(x)).into_data();
        f(&data.convert::<f32>().to_vec::<f32>().expect("f32 values"))
    }
}

/// A tensor's values as a vector, through [`DetectorBackend::with_values`]:
/// a parameter's tensor is shared with its `Param`, and Burn's `into_data`
/// walks a shared ndarray tensor element by element (2 ms of a 26 ms CPU
/// step, where the step rebuilds its layer list from the parameters).
pub fn values_of<B: DetectorBackend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    B::with_values(t.into_primitive().tensor(), <[f32]>::to_vec)
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

/// The CPU backend: the depthwise forward pass is [`kernels`]' loop, and
/// training steps are grin's own.
impl DetectorBackend for NdArray<f32> {
    const CPU_STEP: bool = true;
    const HOST_MEMORY: bool = true;

    fn depthwise3x3(x: FloatTensor<Self>, weight: FloatTensor<Self>, geometry: Geometry) -> FloatTensor<Self> {
        let [batch, channels, _] = x.shape().dims();
        let Geometry { height, width, stride } = geometry;
        let shape = kernels::depthwise::Shape { batch, channels, height, width, stride };
        let y = kernels::depthwise::forward(&values(&x), &values(&weight), shape, None);
        from_values(y, &[shape.batch, shape.channels, shape.out_height() * shape.out_width()])
    }

    /// The tensor's own memory, without a copy when it is contiguous (a
    /// read back through `into_data` walked a shared tensor element by
    /// element: 10 ms of a 60 ms step).
    fn with_values<R>(x: FloatTensor<Self>, f: impl FnOnce(&[f32]) -> R) -> R {
        f(&values(&x))
    }
}

/// Burn's autodiff over ndarray's own ops, the reference of parity tests
/// (`NdArray<f32>` runs grin's CPU step). Burn 0.21 gives a device one
/// float dtype per process, set by the first backend to use it: beside
/// `NdArray<f32>` this computes in f32 too, a third rounding order.
impl DetectorBackend for NdArray<f64> {
    const HOST_MEMORY: bool = true;
}

/// Autodiff differentiates the defaults, Burn's own ops.
impl<B: DetectorBackend, C: CheckpointStrategy> DetectorBackend for Autodiff<B, C> {
    const COPIES_BETWEEN_DEVICES: bool = B::COPIES_BETWEEN_DEVICES;
    const HOST_MEMORY: bool = B::HOST_MEMORY;
    const DEVICE_AUTODIFF: bool = B::OWN_BACKWARD;

    fn own_loss_backward(
        total: FloatTensor<Self>,
        raw: FloatTensor<Self>,
        gradient: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        burn_ops::loss_tracked::<B, C>(total, raw, gradient)
    }

    fn depthwise3x3(x: FloatTensor<Self>, weight: FloatTensor<Self>, geometry: Geometry) -> FloatTensor<Self> {
        if B::OWN_BACKWARD {
            burn_ops::depthwise3x3_tracked::<B, C>(x, weight, geometry)
        } else {
            burn_ops::depthwise3x3::<Self>(x, weight, geometry)
        }
    }

    fn batch_norm_train(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        settings: NormSettings,
    ) -> NormOutput<Self> {
        if B::OWN_BACKWARD {
            burn_ops::batch_norm_tracked::<B, C>(x, gamma, beta, settings)
        } else {
            burn_ops::batch_norm_train::<Self>(x, gamma, beta, settings)
        }
    }

    /// The inner backend's values: no copy on ndarray.
    fn with_values<R>(x: FloatTensor<Self>, f: impl FnOnce(&[f32]) -> R) -> R {
        B::with_values(<Self as AutodiffBackend>::inner(x), f)
    }
}

#[cfg(feature = "cuda")]
impl DetectorBackend for burn_cuda::Cuda<f32, i32> {
    const OWN_BACKWARD: bool = true;
}

#[cfg(feature = "wgpu")]
impl DetectorBackend for burn_wgpu::Wgpu<f32, i32> {
    const COPIES_BETWEEN_DEVICES: bool = false;
    const OWN_BACKWARD: bool = true;
}
