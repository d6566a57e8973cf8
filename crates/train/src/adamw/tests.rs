//! FlatAdamW, in host loops and on flat tensors, against Burn's AdamW
//! adaptor: the same weights after several steps (clipped and unclipped
//! parameters, a parameter skipping a step), and each one resuming from
//! the other's record.

use super::*;
use crate::backend::Cpu;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};

type B = Cpu;

#[derive(Module, Debug)]
struct Net<B: Backend> {
    conv: Conv2d<B>,
    linear: Linear<B>,
}

fn net() -> Net<B> {
    let device = Default::default();
    // Every weight drawn inside the seeding (Burn draws lazily).
    grin_model::seeded::<B, _>(&device, 7, || {
        let net = Net {
            conv: Conv2dConfig::new([3, 8], [3, 3]).init(&device),
            linear: LinearConfig::new(200, 5).init(&device),
        };
        weights(&net);
        net
    })
}

/// Deterministic values in [-1, 1) for a gradient target.
fn target<const D: usize>(shape: [usize; D], seed: u64) -> Tensor<B, D> {
    let n: usize = shape.iter().product();
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let values: Vec<f32> = (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    Tensor::from_data(TensorData::new(values, shape), &Default::default())
}

/// Gradients of sum(param * target * scale): the conv weight's norm is far
/// over the clip norm of 10, the others are under it.
fn grads(net: &Net<B>, step: u64) -> GradientsParams {
    let w = net.conv.weight.val();
    let loss = (w.clone() * target(w.dims(), step) * 40.0).sum()
        + (net.conv.bias.as_ref().expect("bias").val() * target([8], step + 10)).sum()
        + (net.linear.weight.val() * target([200, 5], step + 20) * 0.3).sum()
        + (net.linear.bias.as_ref().expect("bias").val() * target([5], step + 30) * 2.0).sum();
    GradientsParams::from_grads(loss.backward(), net)
}

fn settings() -> Settings {
    Settings::new(0.05, 10.0)
}

/// Both of grin's ways: host loops (what the CPU runs) and flat tensors.
fn both_ways() -> [(&'static str, FlatAdamW<Net<B>, B>); 2] {
    let host = FlatAdamW::<Net<B>, B>::new(settings());
    assert!(host.host.is_some(), "the CPU backend's tensors are host memory");
    [("host loops", host), ("flat tensors", FlatAdamW::with_flat_tensors(settings()))]
}

fn burn_optim() -> OptimizerAdaptor<AdamW, Net<B>, B> {
    settings().burn_config().init::<B, Net<B>>()
}

fn weights(net: &Net<B>) -> Vec<f32> {
    let mut out = vec![];
    for t in [
        net.conv.weight.val().flatten::<1>(0, 3),
        net.conv.bias.as_ref().expect("bias").val(),
        net.linear.weight.val().flatten::<1>(0, 1),
        net.linear.bias.as_ref().expect("bias").val(),
    ] {
        out.extend(t.into_data().to_vec::<f32>().expect("f32"));
    }
    out
}

fn assert_close(a: &Net<B>, b: &Net<B>, what: &str) {
    let (a, b) = (weights(a), weights(b));
    assert_eq!(a.len(), b.len());
    let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(worst <= 1e-6, "{what}: largest weight difference {worst}");
    // The step moved the weights: a no-op optimizer would not pass.
    assert!(a.iter().zip(weights(&net())).any(|(x, y)| (x - y).abs() > 1e-3), "{what}: nothing moved");
}

/// Runs `steps` on both optimizers from the same weights; at `skip`, the
/// linear bias has no gradient (its moments and time must stay put).
fn run_both(mut flat: FlatAdamW<Net<B>, B>, steps: u64, skip: Option<u64>) -> (Net<B>, Net<B>) {
    let (mut ours, mut theirs) = (net(), net());
    let mut burn = burn_optim();
    for step in 0..steps {
        let lr = 0.01 / (1.0 + step as f64);
        let mut g1 = grads(&ours, step);
        let mut g2 = grads(&theirs, step);
        if skip == Some(step) {
            let id = ours.linear.bias.as_ref().expect("bias").id;
            assert!(g1.remove::<<B as AutodiffBackend>::InnerBackend, 1>(id).is_some());
            let id = theirs.linear.bias.as_ref().expect("bias").id;
            assert!(g2.remove::<<B as AutodiffBackend>::InnerBackend, 1>(id).is_some());
        }
        ours = flat.step(lr, ours, g1);
        theirs = burn.step(lr, theirs, g2);
    }
    (ours, theirs)
}

#[test]
fn flat_adamw_moves_the_weights_as_burns_adamw_does() {
    for (way, optim) in both_ways() {
        let (ours, theirs) = run_both(optim, 5, None);
        assert_close(&ours, &theirs, &format!("{way}: 5 steps"));
    }
}

#[test]
fn a_parameter_without_a_gradient_keeps_its_moments_and_time() {
    // Step 2 leaves the linear bias out: the layout changes twice and its
    // time lags the others', so the bias correction is per chunk.
    for (way, optim) in both_ways() {
        let (ours, theirs) = run_both(optim, 5, Some(2));
        assert_close(&ours, &theirs, &format!("{way}: a step skipped"));
    }
}

#[test]
fn each_optimizer_resumes_from_the_others_record() {
    for ((way, mut flat), (_, fresh)) in both_ways().into_iter().zip(both_ways()) {
        let (mut a, mut b) = (net(), net());
        let mut burn = burn_optim();
        for step in 0..2 {
            let (ga, gb) = (grads(&a, step), grads(&b, step));
            a = flat.step(0.01, a, ga);
            b = burn.step(0.01, b, gb);
        }
        // Swap the states: each continues from the other's record.
        let (from_flat, from_burn) = (flat.to_record(), burn.to_record());
        let mut flat = fresh.load_record(from_burn);
        let mut burn = burn_optim().load_record(from_flat);
        for step in 2..4 {
            let (ga, gb) = (grads(&a, step), grads(&b, step));
            a = flat.step(0.01, a, ga);
            b = burn.step(0.01, b, gb);
        }
        assert_close(&a, &b, &format!("{way}: swapped records"));
    }
}

#[test]
fn step_multi_with_one_device_steps_as_step_does() {
    use burn::tensor::backend::DeviceOps;
    let device: burn::tensor::Device<B> = Default::default();
    for ((way, mut one), (_, mut multi)) in both_ways().into_iter().zip(both_ways()) {
        let (mut a, mut b) = (net(), net());
        for step in 0..3 {
            let (ga, gb) = (grads(&a, step), grads(&b, step));
            a = one.step(0.01, a, ga);
            b = multi.step_multi(0.01, b, MultiGradientsParams { grads: vec![(gb, device.id())] });
        }
        assert_close(&a, &b, &format!("{way}: step_multi"));
    }
}
