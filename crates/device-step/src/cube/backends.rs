//! The CubeCL backends grin trains on, as [`StepKernels`]: their training
//! step and optimizer are this module's kernels. (grin-model makes them
//! [`grin_model::DetectorBackend`]s, with Burn's own ops.)

use crate::{AdamwScalars, DeviceBatch, DeviceOutput, DeviceStep, FlatState, StepKernels};
use burn::tensor::ops::FloatTensor;
use grin_model::{Detector, LossWeights, Phase};
use grin_net::Points;

/// The CubeCL backends (CUDA, wgpu): training runs grin's device step,
/// the optimizer its flat kernels.
macro_rules! cube_backend {
    ($backend:ty) => {
        impl StepKernels for $backend {
            const DEVICE_STEP: bool = true;

            fn device_step(
                step: &mut DeviceStep,
                model: &Detector<Self>,
                batch: DeviceBatch<'_, Self>,
                points: &Points,
                weights: LossWeights,
                scale: f32,
                phase: &mut dyn FnMut(Phase),
            ) -> Option<DeviceOutput<Self>> {
                Some(super::step::run(step, model, batch, points, weights, scale, phase))
            }

            fn flat_view(flat: FloatTensor<Self>, start: usize, dims: &[usize]) -> FloatTensor<Self> {
                super::view(&flat, start, dims)
            }

            fn adamw_flat(
                s: FlatState<Self>,
                scalars: AdamwScalars,
            ) -> Option<(FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>)> {
                let (v, g, m1, m2) = (&s.values, &s.grads, &s.moment_1, &s.moment_2);
                Some(super::adamw::step(v, g, m1, m2, &s.chunk_slot, &s.spans, s.slots, scalars))
            }
        }
    };
}

#[cfg(feature = "cuda")]
cube_backend!(burn_cuda::Cuda<f32, i32>);

#[cfg(feature = "wgpu")]
cube_backend!(burn_wgpu::Wgpu<f32, i32>);
