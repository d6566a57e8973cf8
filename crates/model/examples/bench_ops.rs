//! The detector's own CPU ops against Burn's, forward + backward, at the
//! shapes of the demo model (batch 16, 160x120 input), then one whole
//! training forward + backward and one inference forward.
//!
//! `cargo run --release -p grin-model --example bench_ops [-- ROUNDS]`

use burn::backend::{Autodiff, NdArray};
use burn::module::AutodiffModule;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::{Distribution, Tensor};
use grin_model::layers::{batch_norm, depthwise3x3};
use grin_model::{DetectorSpec, ModelConfig};
use std::time::Instant;

type B = Autodiff<NdArray<f32>>;

const BATCH: usize = 16;

/// Median milliseconds of `rounds` calls, after one warm-up call.
fn median_ms(rounds: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut ms: Vec<f64> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[rounds / 2]
}

fn row(what: &str, ours: f64, burns: f64) {
    println!("| {what} | {ours:.2} | {burns:.2} | {:.1}x |", burns / ours);
}

fn main() {
    let rounds = std::env::args().nth(1).and_then(|r| r.parse().ok()).unwrap_or(9);
    let device = Default::default();
    println!("median of {rounds} rounds, forward + backward, batch {BATCH}, ms");
    println!("| op | grin | Burn | speed-up |");
    println!("|---|---:|---:|---:|");
    // (channels, height, width, stride) of the demo backbone's depthwise layers.
    for (c, h, w, s) in [(16, 60, 80, 2), (32, 30, 40, 1), (32, 30, 40, 2), (48, 15, 20, 1), (80, 8, 10, 1)] {
        let conv: Conv2d<B> = Conv2dConfig::new([c, c], [3, 3])
            .with_stride([s, s])
            .with_groups(c)
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .with_bias(false)
            .init(&device);
        let x = Tensor::<B, 4>::random([BATCH, c, h, w], Distribution::Default, &device).require_grad();
        let flat = x.clone().reshape([BATCH, c, h * w]);
        let ours = median_ms(rounds, || {
            depthwise3x3(flat.clone(), conv.weight.val(), h, w, s).sum().backward();
        });
        let burns = median_ms(rounds, || {
            conv.forward(x.clone()).sum().backward();
        });
        row(&format!("depthwise 3x3, {c} ch, {h}x{w}, stride {s}"), ours, burns);
    }
    for (c, h, w) in [(16, 60, 80), (32, 30, 40), (48, 15, 20)] {
        let norm: BatchNorm<B> = BatchNormConfig::new(c).init(&device);
        let x = Tensor::<B, 4>::random([BATCH, c, h, w], Distribution::Default, &device).require_grad();
        let flat = x.clone().reshape([BATCH, c, h * w]);
        let ours = median_ms(rounds, || {
            batch_norm(&norm, flat.clone(), true).sum().backward();
        });
        let burns = median_ms(rounds, || {
            relu(norm.forward(x.clone())).sum().backward();
        });
        row(&format!("BatchNorm + ReLU, {c} ch, {h}x{w}"), ours, burns);
    }

    let spec = DetectorSpec { model: ModelConfig::default(), width: 160, height: 120, channels: 1 };
    let model = spec.init::<B>(&device);
    let images = Tensor::<B, 4>::random([BATCH, 1, 120, 160], Distribution::Default, &device);
    let train = median_ms(rounds, || {
        model.forward(images.clone()).raw.sum().backward();
    });
    let (valid, inner) = (model.valid(), images.inner());
    let infer = median_ms(rounds, || {
        let _ = valid.forward(inner.clone()).raw.into_data();
    });
    println!("whole detector at 160x120, batch {BATCH}: forward + backward {train:.1} ms, forward {infer:.1} ms");
}
