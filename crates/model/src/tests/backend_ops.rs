//! The detector's two backend ops against Burn's conv and BatchNorm: what
//! the model runs under Burn's autodiff (the parity tests' reference), and
//! the CPU backend's own depthwise forward pass. (The CPU training step's
//! fused ops are tested in grin-cpu-step, the device step's kernels in
//! grin-device-step's `src/cube/tests.rs`.)

use crate::backend::{burn_ops, DetectorBackend, Geometry};
use crate::{batch_norm, depthwise3x3};
use burn::backend::{Autodiff, NdArray};
use burn::module::Module;
use burn::nn::{BatchNorm, BatchNormConfig};
use burn::tensor::activation::relu;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::TensorPrimitive;
use burn::tensor::{Distribution, Tensor};

type B = Autodiff<NdArray<f32>>;

fn max_abs_diff<const D: usize>(a: Tensor<NdArray<f32>, D>, b: Tensor<NdArray<f32>, D>) -> f32 {
    assert_eq!(a.dims(), b.dims());
    (a - b).abs().max().into_scalar()
}

/// The depthwise op as the model calls it (Burn's grouped conv on this
/// backend) against Burn's conv.
#[test]
fn depthwise_gradients_equal_burns_conv_gradients() {
    let device = Default::default();
    for (channels, height, width, stride) in
        [(4usize, 13usize, 17usize, 1usize), (4, 13, 17, 2), (8, 12, 16, 2), (3, 1, 5, 1), (5, 2, 2, 2)]
    {
        let x = drawn::<B, 4>([3, channels, height, width], Distribution::Normal(0.0, 1.0), &device);
        let w = drawn::<B, 4>([channels, 1, 3, 3], Distribution::Normal(0.0, 1.0), &device);
        let (oh, ow) = (height.div_ceil(stride), width.div_ceil(stride));
        // A non-uniform upstream gradient, so every tap's weight matters.
        let upstream = drawn::<B, 4>([3, channels, oh, ow], Distribution::Normal(0.0, 1.0), &device);

        let (x1, w1) = (x.clone().require_grad(), w.clone().require_grad());
        let flat = x1.clone().reshape([3, channels, height * width]);
        let ours = depthwise3x3(flat, w1.clone(), height, width, stride).reshape([3, channels, oh, ow]);
        let grads = (ours.clone() * upstream.clone()).sum().backward();
        let (dx1, dw1) = (x1.grad(&grads).unwrap(), w1.grad(&grads).unwrap());

        let (x2, w2) = (x.require_grad(), w.require_grad());
        let options = ConvOptions::new([stride, stride], [1, 1], [1, 1], channels);
        let burns = conv2d(x2.clone(), w2.clone(), None, options);
        let grads = (burns.clone() * upstream).sum().backward();
        let (dx2, dw2) = (x2.grad(&grads).unwrap(), w2.grad(&grads).unwrap());

        let shape = (channels, height, width, stride);
        assert!(max_abs_diff(ours.inner(), burns.inner()) < 1e-5, "forward {shape:?}");
        assert!(max_abs_diff(dx1, dx2) < 1e-4, "input gradient {shape:?}");
        assert!(max_abs_diff(dw1, dw2) < 1e-3, "weight gradient {shape:?}");
    }
}

fn random<const D: usize>(shape: [usize; D], device: &burn::backend::ndarray::NdArrayDevice) -> Tensor<B, D> {
    drawn::<B, D>(shape, Distribution::Normal(0.5, 2.0), device)
}

/// A random tensor drawn under grin's generator lock (`grin_model::seeded`),
/// each from a seed of its own: this crate's tests share one binary, and an
/// unlocked draw between another test's seeding and its draws would change
/// that test's values.
fn drawn<K: burn::tensor::backend::Backend, const D: usize>(
    shape: [usize; D],
    distribution: Distribution,
    device: &K::Device,
) -> Tensor<K, D> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let seed = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    crate::seeded::<K, _>(device, seed, || Tensor::random(shape, distribution, device))
}

/// BatchNorm as the model calls it (Burn's ops composed, on this backend)
/// against Burn's `BatchNorm`: output, gradients and running averages.
#[test]
fn batch_norm_equals_burns_batch_norm_in_training() {
    let device = Default::default();
    for relu_after in [false, true] {
        let (batch, channels, points) = (4, 6, 45);
        let norm: BatchNorm<B> = BatchNormConfig::new(channels).init(&device);
        // Not the initial 1 and 0, so a swapped gamma and beta would show.
        let norm = norm.load_record(burn::nn::BatchNormRecord {
            gamma: burn::module::Param::from_tensor(random([channels], &device)),
            beta: burn::module::Param::from_tensor(random([channels], &device)),
            ..BatchNormConfig::new(channels).init::<B>(&device).into_record()
        });
        let ours_norm = norm.clone();
        let x = random([batch, channels, points], &device);
        let upstream = random([batch, channels, points], &device);

        let x1 = x.clone().require_grad();
        let ours = batch_norm(&ours_norm, x1.clone(), relu_after);
        let grads = (ours.clone() * upstream.clone()).sum().backward();
        let (dx1, dg1, db1) =
            (x1.grad(&grads).unwrap(), ours_norm.gamma.grad(&grads).unwrap(), ours_norm.beta.grad(&grads).unwrap());

        let x2 = x.require_grad();
        let burns = norm.forward(x2.clone());
        let burns = if relu_after { relu(burns) } else { burns };
        let grads = (burns.clone() * upstream).sum().backward();
        let (dx2, dg2, db2) =
            (x2.grad(&grads).unwrap(), norm.gamma.grad(&grads).unwrap(), norm.beta.grad(&grads).unwrap());

        assert!(max_abs_diff(ours.inner(), burns.inner()) < 1e-4, "output, relu {relu_after}");
        assert!(max_abs_diff(dx1, dx2) < 1e-3, "input gradient, relu {relu_after}");
        assert!(max_abs_diff(dg1, dg2) < 1e-2, "gamma gradient, relu {relu_after}");
        assert!(max_abs_diff(db1, db2) < 1e-2, "beta gradient, relu {relu_after}");
        let running = |n: &BatchNorm<B>| (n.running_mean.value().inner(), n.running_var.value().inner());
        let ((m1, v1), (m2, v2)) = (running(&ours_norm), running(&norm));
        assert!(max_abs_diff(m1, m2) < 1e-5 && max_abs_diff(v1, v2) < 1e-4, "running averages");
    }
}

/// Burn's grouped conv (the trait's default) equals what the
/// CPU kernel computes, so the GPU path's logic is tested without a GPU.
#[test]
fn the_cpu_depthwise_forward_equals_the_burn_ops_version() {
    type N = NdArray<f32>;
    let device = Default::default();
    let back = |t| Tensor::<N, 3>::from_primitive(TensorPrimitive::Float(t));
    for (channels, height, width, stride) in [(4usize, 13usize, 17usize, 1usize), (6, 12, 16, 2), (3, 7, 5, 2)] {
        let geometry = Geometry { height, width, stride };
        let x = drawn::<N, 3>([2, channels, height * width], Distribution::Normal(0.0, 1.0), &device);
        let w = drawn::<N, 4>([channels, 1, 3, 3], Distribution::Normal(0.0, 1.0), &device);
        let (x, w) = (x.into_primitive().tensor(), w.into_primitive().tensor());
        let shape = (channels, height, width, stride);

        let ours = N::depthwise3x3(x.clone(), w.clone(), geometry);
        let reference = burn_ops::depthwise3x3::<N>(x, w, geometry);
        assert!(max_abs_diff(back(ours), back(reference)) < 1e-5, "forward {shape:?}");
    }
}
