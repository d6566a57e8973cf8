//! Each kind of fused layer against Burn's `conv2d` and `BatchNorm`
//! under autodiff: output, input and parameter gradients, and the batch
//! statistics behind the running averages, at odd sizes and both strides.

use super::*;
use crate::net::Norm;
use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, Param};
use burn::nn::{BatchNorm, BatchNormConfig};
use burn::tensor::activation::relu;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Distribution, Tensor};

type B = Autodiff<NdArray<f32>>;

fn values<const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

fn grad<const D: usize>(t: Option<Tensor<NdArray<f32>, D>>) -> Vec<f32> {
    t.expect("a gradient").into_data().to_vec::<f32>().unwrap()
}

/// `[batch][channels][points]` <-> `[channels][batch][points]`.
fn swap(v: &[f32], outer: usize, inner: usize, points: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for a in 0..outer {
        for b in 0..inner {
            out[(b * outer + a) * points..][..points].copy_from_slice(&v[(a * inner + b) * points..][..points]);
        }
    }
    out
}

fn close(what: &str, ours: &[f32], burns: &[f32], tolerance: f32) {
    assert_eq!(ours.len(), burns.len(), "{what}: sizes");
    let scale = burns.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let err = ours.iter().zip(burns).fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(err <= tolerance * scale, "{what}: off by {err} (scale {scale})");
}

#[test]
fn every_layer_kind_equals_burns_conv_and_batch_norm() {
    let device = Default::default();
    // Under grin's generator lock: the autodiff parity test of this binary
    // draws the same model twice and needs no draw between.
    grin_model::seeded::<B, _>(&device, 29, || every_layer_kind_at(&device));
}

fn every_layer_kind_at(device: &burn::tensor::Device<B>) {
    let device = *device;
    // (kind, cin, cout, height, width, batch norm, relu)
    let cases: [(Kind, usize, usize, usize, usize, bool, bool); 7] = [
        (Kind::Dense { stride: 2 }, 1, 4, 13, 17, true, true),
        (Kind::Dense { stride: 1 }, 3, 2, 6, 5, true, false),
        (Kind::Depthwise { stride: 1 }, 5, 5, 7, 9, true, true),
        (Kind::Depthwise { stride: 2 }, 3, 3, 9, 12, true, true),
        (Kind::Depthwise { stride: 2 }, 2, 2, 1, 3, true, false),
        (Kind::Pointwise, 6, 7, 5, 11, true, true),
        (Kind::Pointwise, 4, 6, 3, 4, false, false),
    ];
    for (kind, cin, cout, height, width, with_norm, with_relu) in cases {
        let what = format!("{kind:?} {cin}->{cout} {height}x{width} norm {with_norm} relu {with_relu}");
        let batch = 3;
        let (stride, k, groups) = match kind {
            Kind::Dense { stride } => (stride, 3, 1),
            Kind::Depthwise { stride } => (stride, 3, cin),
            Kind::Pointwise => (1, 1, 1),
            Kind::AddUp { .. } => unreachable!("not a conv"),
        };
        let (oh, ow) = (height.div_ceil(stride), width.div_ceil(stride));
        let normal = |dims: Vec<usize>, mean: f64| {
            Tensor::<B, 1>::random([dims.iter().product::<usize>()], Distribution::Normal(mean, 1.0), &device)
        };
        let x = normal(vec![batch, cin, height, width], 0.5).reshape([batch, cin, height, width]).require_grad();
        let weight = normal(vec![cout, cin / groups, k, k], 0.0).reshape([cout, cin / groups, k, k]).require_grad();
        let bias = normal(vec![cout], 0.0).require_grad();
        let upstream = normal(vec![batch, cout, oh, ow], 0.0).reshape([batch, cout, oh, ow]);
        let norm: BatchNorm<B> = BatchNormConfig::new(cout).init(&device);
        // Not the initial 1 and 0, so a swapped gamma and beta would show.
        let norm = norm.load_record(burn::nn::BatchNormRecord {
            gamma: Param::from_tensor(normal(vec![cout], 1.0)),
            beta: Param::from_tensor(normal(vec![cout], 0.0)),
            ..BatchNormConfig::new(cout).init::<B>(&device).into_record()
        });

        // Burn.
        let pad = k / 2;
        let options = ConvOptions::new([stride, stride], [pad, pad], [1, 1], groups);
        let conv_bias = if with_norm { None } else { Some(bias.clone()) };
        let z = conv2d(x.clone(), weight.clone(), conv_bias, options);
        let y = if with_norm { norm.forward(z) } else { z };
        let y = if with_relu { relu(y) } else { y };
        let grads = (y.clone() * upstream.clone()).sum().backward();

        // Ours.
        let layer = Layer {
            kind,
            cin,
            cout,
            weight: values(weight.clone()),
            bias: if with_norm { vec![0.0; cout] } else { values(bias.clone()) },
            norm: with_norm.then(|| Norm {
                gamma: values(norm.gamma.val()),
                beta: values(norm.beta.val()),
                epsilon: norm.epsilon as f32,
            }),
            relu: with_relu,
        };
        let x_cm = swap(&values(x.clone()), batch, cin, height * width);
        let mut act = Act::new(&layer, batch, oh, ow, false);
        let input = Input::new(&x_cm, height, width);
        forward(&layer, input, &mut act);
        close(&format!("{what}: output"), &act.y, &swap(&values(y), batch, cout, oh * ow), 1e-4);
        act.dy = swap(&values(upstream), batch, cout, oh * ow);
        let dense = matches!(kind, Kind::Dense { .. });
        let mut dx = vec![7.0; x_cm.len()];
        let g = backward(&layer, input, &mut act, (!dense).then(|| InputGrad { values: &mut dx, accumulate: false }));

        close(&format!("{what}: weight gradient"), &g.weight, &grad(weight.grad(&grads)), 1e-3);
        if !dense {
            let want = swap(&grad(x.grad(&grads)), batch, cin, height * width);
            close(&format!("{what}: input gradient"), &dx, &want, 1e-3);
        }
        if with_norm {
            let (gamma, beta) = g.norm.clone().unwrap();
            close(&format!("{what}: gamma gradient"), &gamma, &grad(norm.gamma.grad(&grads)), 1e-3);
            close(&format!("{what}: beta gradient"), &beta, &grad(norm.beta.grad(&grads)), 1e-3);
            // Burn's running averages moved by momentum 0.1 from (0, 1)
            // toward the batch statistics: ours must be those statistics.
            let (mean, var) = g.stats.clone().unwrap();
            let m = norm.momentum as f32;
            let running_mean: Vec<f32> = mean.iter().map(|v| m * v).collect();
            let running_var: Vec<f32> = var.iter().map(|v| (1.0 - m) + m * v).collect();
            close(&format!("{what}: running mean"), &running_mean, &values(norm.running_mean.value_sync()), 1e-4);
            close(&format!("{what}: running var"), &running_var, &values(norm.running_var.value_sync()), 1e-4);
        } else {
            close(&format!("{what}: bias gradient"), g.bias.as_ref().unwrap(), &grad(bias.grad(&grads)), 1e-3);
        }
    }
}

#[test]
fn an_input_gradient_adds_to_one_already_there() {
    let layer = Layer {
        kind: Kind::Pointwise,
        cin: 2,
        cout: 2,
        weight: vec![1.0, 2.0, 3.0, 4.0],
        bias: vec![0.0; 2],
        norm: None,
        relu: false,
    };
    let x = [1.0, 2.0, 3.0, 4.0];
    let input = Input::new(&x, 1, 2);
    let mut act = Act::new(&layer, 1, 1, 2, false);
    forward(&layer, input, &mut act);
    act.dy = vec![1.0, 0.0, 0.0, 1.0];
    let mut dx = vec![10.0; 4];
    backward(&layer, input, &mut act, Some(InputGrad { values: &mut dx, accumulate: true }));
    // W^T dy = [[1, 3], [2, 4]] [[1, 0], [0, 1]], added to the 10s.
    assert_eq!(dx, [11.0, 13.0, 12.0, 14.0]);
}

/// A 1x1 layer that leaves its output to the depthwise layer reading it
/// gives that layer the same output, and both layers the same gradients,
/// as one that writes its output.
#[test]
fn a_layer_leaving_its_output_to_its_reader_changes_no_value() {
    let (batch, h, w, c) = (3, 7, 10, 4);
    let wave = |n: usize, k: f32| -> Vec<f32> { (0..n).map(|i| (i as f32 * k).sin()).collect() };
    let norm =
        || Some(Norm { gamma: wave(c, 0.9).iter().map(|g| g + 1.2).collect(), beta: wave(c, 1.7), epsilon: 1e-5 });
    let first = Layer {
        kind: Kind::Pointwise,
        cin: 2,
        cout: c,
        weight: wave(2 * c, 0.37),
        bias: vec![0.0; c],
        norm: norm(),
        relu: true,
    };
    let second = Layer {
        kind: Kind::Depthwise { stride: 2 },
        cin: c,
        cout: c,
        weight: wave(9 * c, 0.53),
        bias: vec![0.0; c],
        norm: norm(),
        relu: true,
    };
    let x = wave(2 * batch * h * w, 0.11);
    let run = |deferred: bool| {
        let mut a = Act::new(&first, batch, h, w, deferred);
        let mut b = Act::new(&second, batch, h.div_ceil(2), w.div_ceil(2), false);
        forward(&first, Input::new(&x, h, w), &mut a);
        assert_eq!(a.deferred.is_some(), deferred);
        forward(&second, a.output(), &mut b);
        b.dy = wave(b.y.len(), 0.29);
        let (input, dy) = a.output_and_grad();
        let g2 = backward(&second, input, &mut b, Some(InputGrad { values: dy, accumulate: false }));
        let mut dx = vec![0.0; x.len()];
        let g1 = backward(&first, Input::new(&x, h, w), &mut a, Some(InputGrad { values: &mut dx, accumulate: false }));
        (b.y, g2, g1, dx)
    };
    let (written, deferred) = (run(false), run(true));
    close("the reader's output", &deferred.0, &written.0, 1e-6);
    for (what, d, wr) in [("reader", &deferred.1, &written.1), ("deferring layer", &deferred.2, &written.2)] {
        close(&format!("{what}: weight gradient"), &d.weight, &wr.weight, 1e-5);
        let ((dg, db), (wg, wb)) = (d.norm.clone().unwrap(), wr.norm.clone().unwrap());
        close(&format!("{what}: gamma gradient"), &dg, &wg, 1e-5);
        close(&format!("{what}: beta gradient"), &db, &wb, 1e-5);
    }
    close("input gradient", &deferred.3, &written.3, 1e-5);
}
