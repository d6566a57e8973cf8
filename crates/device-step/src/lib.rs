//! grin-device-step: grin's own training step on a CubeCL device (CUDA,
//! wgpu): forward, target assignment, loss and backward for the whole
//! detector in a few kernels per layer ([`cube`]), the gradients handed to
//! the optimizer in one flat buffer ([`FlatLayout`]), and the optimizer's
//! flat update as kernels ([`StepKernels::adamw_flat`]).
//!
//! Why: the detector is small, so on a GPU its step is host-bound. Through
//! Burn's ops and autodiff the step was about 1,340 kernel launches (434 of
//! them `slice_assign`), each costing the host more than the device, and
//! SM utilisation stayed near 25% on an H200 (`docs/benchmarks.md`). Here
//! each conv is one kernel per direction, BatchNorm (+ ReLU) one per
//! direction, the loss two, and AdamW two (grin-train's `FlatAdamW`).
//!
//! Depends on grin-model: the layer order, kinds and wiring come from
//! [`grin_model::graph`], as the CPU step's do, and the loss's rule and
//! terms are the CPU step's (grin-cpu-step, which this crate does not
//! depend on). Without the `cuda` or `wgpu` feature it holds only the
//! traits and the flat layout, and compiles no kernel.

#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod cube;

use burn::backend::NdArray;
use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{Int, Tensor, TensorPrimitive};
use grin_model::{Detector, DetectorBackend, LossParts, LossWeights, Phase, Trainable};
use grin_net::Points;
use std::collections::HashMap;

/// Values per chunk of the flat layout: every parameter starts at a whole
/// chunk (256 bytes of f32, the widest offset alignment a GPU asks of a
/// buffer binding), so that each can be a view of the flat buffer.
pub const CHUNK: usize = 64;

/// Where each parameter's values sit in one flat buffer: in the order
/// given, each from a multiple of [`CHUNK`], then one chunk of padding.
/// grin-train's `FlatAdamW` keeps its state in this layout, and the device
/// step writes its gradients in it, so the optimizer reads them in place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlatLayout {
    /// Each parameter's first value.
    pub starts: Vec<usize>,
    /// Values in all, the last chunk's padding included.
    pub len: usize,
}

impl FlatLayout {
    /// Where [`DeviceStep::gradients`] hands over its flat buffers in the
    /// gradients it returns: ids no parameter has (Burn draws parameter ids
    /// at random from all of u64; an optimizer looks its parameters up by
    /// their own ids and never sees these).
    pub fn grads_id() -> ParamId {
        ParamId::from(u64::MAX)
    }

    /// See [`FlatLayout::grads_id`].
    pub fn values_id() -> ParamId {
        ParamId::from(u64::MAX - 1)
    }

    /// The layout of parameters of these value counts, in this order.
    pub fn of(lens: impl IntoIterator<Item = usize>) -> FlatLayout {
        let mut starts = Vec::new();
        let mut next = 0;
        for len in lens {
            starts.push(next);
            next += len.div_ceil(CHUNK) * CHUNK;
        }
        FlatLayout { starts, len: next + CHUNK }
    }

    /// The layout of `model`'s trained parameters in module order (the
    /// order an optimizer visits them), each with its id.
    pub fn of_model<B: Backend>(model: &Detector<B>) -> (FlatLayout, Vec<(ParamId, Vec<usize>)>) {
        struct Trained(Vec<(ParamId, Vec<usize>)>);
        impl<B: Backend> ModuleVisitor<B> for Trained {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                if param.is_require_grad() {
                    self.0.push((param.id, param.val().dims().to_vec()));
                }
            }
        }
        let mut trained = Trained(Vec::new());
        model.visit(&mut trained);
        let layout = FlatLayout::of(trained.0.iter().map(|(_, dims)| dims.iter().product::<usize>()));
        (layout, trained.0)
    }
}

/// One AdamW step's scalars: Burn's AdamW with each parameter's gradient
/// clipped to `clip_norm`, `decay` = learning rate × weight decay, and the
/// moments' bias corrections `1 - beta^time`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamwScalars {
    pub lr: f32,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    pub decay: f32,
    pub clip_norm: f32,
    pub correction_1: f32,
    pub correction_2: f32,
}

/// The flat optimizer state one AdamW step reads (grin-train's
/// `FlatAdamW`, in [`FlatLayout`]): values, gradients and moments
/// `[chunks * CHUNK]`, each chunk's parameter (`chunk_slot`) and each
/// parameter's (start, len) (`spans`, flattened), both ints.
pub struct FlatState<B: Backend> {
    pub values: FloatTensor<B>,
    pub grads: FloatTensor<B>,
    pub moment_1: FloatTensor<B>,
    pub moment_2: FloatTensor<B>,
    pub chunk_slot: IntTensor<B>,
    pub spans: IntTensor<B>,
    pub slots: usize,
}

/// A backend's training step and optimizer on its own kernels, where it
/// has them (CUDA and wgpu: `cube`). A trait of its own, not a part of
/// [`DetectorBackend`], because its signature names the detector, which
/// is built on `DetectorBackend`, and so that the detector's crate holds
/// no training engine.
pub trait StepKernels: DetectorBackend {
    /// Whether training on this backend runs the device step
    /// ([`DeviceStep::gradients`]) instead of Burn's autodiff graph.
    const DEVICE_STEP: bool = false;

    /// The training step's forward, loss and backward on this backend's
    /// own kernels, the gradients scaled by `scale`; `None` where it has none.
    fn device_step(
        step: &mut DeviceStep,
        model: &Detector<Self>,
        batch: DeviceBatch<'_, Self>,
        points: &Points,
        weights: LossWeights,
        scale: f32,
        phase: &mut dyn FnMut(Phase),
    ) -> Option<DeviceOutput<Self>> {
        let _ = (step, model, batch, points, weights, scale, phase);
        None
    }

    /// Values `start..start + dims.product()` of a flat tensor, shaped
    /// `dims`: a parameter's slot of the flat layout. A copy by default; a
    /// view of the same memory on a device.
    fn flat_view(flat: FloatTensor<Self>, start: usize, dims: &[usize]) -> FloatTensor<Self> {
        let len = dims.iter().product::<usize>();
        let part = Self::float_slice(flat, &[burn::tensor::Slice::from(start..start + len)]);
        Self::float_reshape(part, dims.to_vec().into())
    }

    /// One AdamW step over the flat state, as kernels of this backend's
    /// own: the new values and moments. `None` where it has none, and the
    /// optimizer composes the step from Burn's ops.
    #[allow(clippy::type_complexity)]
    fn adamw_flat(
        state: FlatState<Self>,
        scalars: AdamwScalars,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>)> {
        let _ = (state, scalars);
        None
    }
}

/// The CPU backend trains through grin's CPU step, the f64 one (a parity
/// reference) through Burn's autodiff.
impl StepKernels for NdArray<f32> {}
impl StepKernels for NdArray<f64> {}

/// What a device step hands back: the gradients of every trained parameter
/// in one flat buffer ([`FlatLayout::of_model`]) and the parameters' values
/// in another, each BatchNorm's moved running averages (in
/// [`Detector::trainables`] order, `None` for a layer without one), and the
/// loss parts (total, face, boxes, smile).
pub struct DeviceOutput<B: Backend> {
    pub(crate) grads: Tensor<B, 1>,
    pub(crate) values: Tensor<B, 1>,
    pub(crate) running: Vec<Option<(Tensor<B, 1>, Tensor<B, 1>)>>,
    pub(crate) parts: [Tensor<B, 1>; 4],
}

/// A batch as the device step reads it: images `[batch, channels, height,
/// width]` in 0..1, boxes `[batch, slots, 4]`, labels `[batch, slots]`.
pub struct DeviceBatch<'a, B: Backend> {
    pub images: &'a Tensor<B, 4>,
    pub boxes: &'a Tensor<B, 3>,
    pub labels: &'a Tensor<B, 2, Int>,
}

/// The device step's state kept across steps (the point table on the
/// device), for whichever runtime runs it.
#[derive(Default)]
pub struct DeviceStep {
    // Read by the CubeCL step only: a CPU-only build (the Pi's, the main job's) never runs it.
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
    pub(crate) state: Option<Box<dyn std::any::Any + Send>>,
    /// This step's flat layout and each trained parameter's start in it,
    /// read from the autodiff model (whose parameters say which are
    /// trained; the inner model's all say no).
    pub(crate) layout: FlatLayout,
    pub(crate) starts: HashMap<ParamId, usize>,
}

impl DeviceStep {
    pub fn new() -> DeviceStep {
        DeviceStep::default()
    }

    /// Whether backend `B` trains through this step.
    pub fn runs_on<B: AutodiffBackend<InnerBackend: StepKernels>>() -> bool {
        B::InnerBackend::DEVICE_STEP
    }

    /// Loss and gradients of `model` on `batch`, keyed by parameter as
    /// Burn's optimizers take them (each a view of one flat buffer), with
    /// the BatchNorm running averages updated as Burn's `BatchNorm` updates
    /// them in training; the gradients scaled by `scale` (a shard's share of
    /// a data-parallel batch). `phase` hears each phase end (for timing). The two
    /// flat buffers themselves ride along under [`FlatLayout::grads_id`] and
    /// [`FlatLayout::values_id`], for an optimizer that works on them whole.
    pub fn gradients<B: DetectorBackend + AutodiffBackend<InnerBackend: StepKernels>>(
        &mut self,
        model: &Detector<B>,
        batch: DeviceBatch<'_, B>,
        points: &Points,
        weights: LossWeights,
        scale: f32,
        phase: &mut dyn FnMut(Phase),
    ) -> (LossParts<B>, GradientsParams) {
        assert!(Self::runs_on::<B>(), "the device step runs on CUDA and wgpu only");
        let (layout, trained) = FlatLayout::of_model(model);
        self.starts = trained.iter().zip(&layout.starts).map(|((id, _), &s)| (*id, s)).collect();
        self.layout = layout.clone();
        let inner = burn::module::AutodiffModule::valid(model);
        let (images, boxes, labels) =
            (batch.images.clone().inner(), batch.boxes.clone().inner(), batch.labels.clone().inner());
        let batch = DeviceBatch { images: &images, boxes: &boxes, labels: &labels };
        let out = B::InnerBackend::device_step(self, &inner, batch, points, weights, scale, phase)
            .expect("DEVICE_STEP backends have a device step");
        let mut grads = GradientsParams::new();
        let flat = out.grads.clone().into_primitive().tensor();
        for ((id, dims), start) in trained.iter().zip(&layout.starts) {
            let view = B::InnerBackend::flat_view(flat.clone(), *start, dims);
            register::<B::InnerBackend>(&mut grads, *id, view, dims.len());
        }
        grads.register(FlatLayout::grads_id(), out.grads);
        grads.register(FlatLayout::values_id(), out.values);
        let (trainables, _) = model.trainables();
        for (t, running) in trainables.iter().zip(out.running) {
            if let (Trainable::ConvBn { norm, .. }, Some((mean, var))) = (t, running) {
                grin_model::running::set(&norm.running_mean, Tensor::from_inner(mean));
                grin_model::running::set(&norm.running_var, Tensor::from_inner(var));
            }
        }
        let [total, face, boxes, smile] = out.parts.map(Tensor::from_inner);
        (LossParts { total, face, boxes, smile }, grads)
    }
}

/// Registers a flat view as the gradient of parameter `id` of rank `rank`.
fn register<B: Backend>(
    grads: &mut GradientsParams,
    id: ParamId,
    view: burn::tensor::ops::FloatTensor<B>,
    rank: usize,
) {
    let float = TensorPrimitive::Float(view);
    match rank {
        1 => grads.register(id, Tensor::<B, 1>::from_primitive(float)),
        4 => grads.register(id, Tensor::<B, 4>::from_primitive(float)),
        _ => unreachable!("the detector's parameters are vectors and conv kernels"),
    }
}
