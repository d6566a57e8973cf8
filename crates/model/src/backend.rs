//! What the detector runs through its own backend trait, so that a
//! backend can supply a faster version:
//!
//! - the depthwise 3x3 convolution: on the CPU, Burn's generic grouped conv
//!   was 8-14x slower than a loop over each plane ([`grin_kernels`]),
//!   which evaluation and grin-detect's parity tests run;
//! - training-mode BatchNorm (+ ReLU);
//! - what the trainer asks of a backend: whether its tensors live in host
//!   memory, whether it copies between its devices, and whether it trains
//!   through the CPU step (grin-cpu-step). A backend's own training step and
//!   optimizer kernels are grin-device-step's `StepKernels`.
//!
//! The defaults are Burn's own ops ([`burn_ops`]), which Burn's autodiff
//! differentiates: the reference the parity tests hold both steps to.

pub mod burn_ops;

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::ndarray::NdArrayTensor;
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::FloatTensor;
use burn::tensor::{Tensor, TensorMetadata, TensorPrimitive};
use grin_kernels as kernels;
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
    /// (grin-cpu-step's `CpuStep`) instead of Burn's autodiff graph.
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

/// The CubeCL backends run Burn's own ops here; their training step and
/// optimizer are grin-device-step's kernels.
#[cfg(feature = "cuda")]
impl DetectorBackend for burn_cuda::Cuda<f32, i32> {}

// wgpu's `to_device` does not work between two of its devices
// (`not implemented` in cubecl-runtime 0.10's server-to-server copy):
// data-parallel training copies through the host.
#[cfg(feature = "wgpu")]
impl DetectorBackend for burn_wgpu::Wgpu<f32, i32> {
    const COPIES_BETWEEN_DEVICES: bool = false;
}

/// Autodiff differentiates the defaults, Burn's own ops.
impl<B: DetectorBackend, C: CheckpointStrategy> DetectorBackend for Autodiff<B, C> {
    const COPIES_BETWEEN_DEVICES: bool = B::COPIES_BETWEEN_DEVICES;
    const HOST_MEMORY: bool = B::HOST_MEMORY;

    /// The inner backend's values: no copy on ndarray.
    fn with_values<R>(x: FloatTensor<Self>, f: impl FnOnce(&[f32]) -> R) -> R {
        B::with_values(<Self as AutodiffBackend>::inner(x), f)
    }
}
