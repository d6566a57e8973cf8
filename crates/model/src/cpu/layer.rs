//! One conv layer with its BatchNorm and ReLU, forward and backward, fused:
//! each 3x3 channel is convolved, normalised and activated in one task
//! while its row is in cache, and backward turns the output gradient into
//! the pre-BatchNorm gradient, the tap gradients and the input gradient in
//! one task per channel too. 1x1 convs are matrix products ([`super::gemm`]),
//! with the BatchNorm passes per channel row right after.
//!
//! Layout: channel-major, `[channels][batch][height * width]`. A channel's
//! values for the whole batch are one contiguous row, which is what
//! BatchNorm's statistics reduce over, and a 1x1 conv over the batch is one
//! matrix product `[out, in] x [in, batch * points]`.

use super::gemm::{matmul, View};
use super::net::{Kind, Layer};
use crate::kernels::depthwise::PlaneConv;
use rayon::prelude::*;

/// A layer's activations and gradients, kept across steps.
#[derive(Debug, Default)]
pub(crate) struct Act {
    pub height: usize,
    pub width: usize,
    pub batch: usize,
    /// Before BatchNorm (empty for a layer without one).
    pub z: Vec<f32>,
    /// The layer's output.
    pub y: Vec<f32>,
    /// The gradient at `y`; backward turns it, in place, into the gradient
    /// before BatchNorm and ReLU.
    pub dy: Vec<f32>,
    /// A dense conv's input split into column phases (`PlaneConv::split`),
    /// once for all its output channels and again for its backward pass.
    pub xs: Vec<f32>,
    /// Whether `dy` holds a gradient yet this step (a tapped trunk layer
    /// gets one from its head and one from the next trunk layer).
    pub has_grad: bool,
    /// Batch statistics, per channel: mean, biased variance, 1/sqrt(var + eps).
    pub mean: Vec<f32>,
    pub var: Vec<f32>,
    pub inv_std: Vec<f32>,
}

impl Act {
    pub(crate) fn new(layer: &Layer, batch: usize, height: usize, width: usize) -> Act {
        let len = layer.cout * batch * height * width;
        let stats = if layer.norm.is_some() { layer.cout } else { 0 };
        Act {
            height,
            width,
            batch,
            z: vec![0.0; if layer.norm.is_some() { len } else { 0 }],
            y: vec![0.0; len],
            dy: vec![0.0; len],
            xs: Vec::new(),
            has_grad: false,
            mean: vec![0.0; stats],
            var: vec![0.0; stats],
            inv_std: vec![0.0; stats],
        }
    }

    pub(crate) fn row(&self) -> usize {
        self.batch * self.height * self.width
    }
}

/// A layer's input: values `[channels][batch][height * width]`.
#[derive(Clone, Copy)]
pub(crate) struct Input<'a> {
    pub values: &'a [f32],
    pub height: usize,
    pub width: usize,
}

/// Where the gradient at a layer's input goes: overwritten or added to.
pub(crate) struct InputGrad<'a> {
    pub values: &'a mut [f32],
    pub accumulate: bool,
}

/// A layer's parameter gradients and the batch statistics it normalised by.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerGrads {
    pub weight: Vec<f32>,
    /// The conv's own bias (output convs only).
    pub bias: Option<Vec<f32>>,
    /// BatchNorm's gamma and beta.
    pub norm: Option<(Vec<f32>, Vec<f32>)>,
    /// The batch mean and biased variance, for the running averages.
    pub stats: Option<(Vec<f32>, Vec<f32>)>,
}

/// Sum over eight lanes, so the compiler can vectorise it.
fn sum_by(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|&v| f(v)).sum();
    for chunk in chunks {
        for k in 0..8 {
            lanes[k] += f(chunk[k]);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// In one pass over a channel's row: applies ReLU's mask (where the
/// output `y` is not positive) to the gradient `g` in place, and returns
/// the sums of the masked gradient and of it times `z - mean`, eight lanes
/// at a time so the compiler vectorises it.
fn mask_and_sum(g: &mut [f32], y: &[f32], z: &[f32], mean: f32, relu: bool) -> (f32, f32) {
    let (mut sum, mut dot) = ([0.0f32; 8], [0.0f32; 8]);
    let step = |g: &mut [f32], y: &[f32], z: &[f32], sum: &mut [f32], dot: &mut [f32]| {
        for k in 0..g.len() {
            let v = if relu && y[k] <= 0.0 { 0.0 } else { g[k] };
            g[k] = v;
            sum[k] += v;
            dot[k] += v * (z[k] - mean);
        }
    };
    let (mut gs, ys, zs) = (g.chunks_exact_mut(8), y.chunks_exact(8), z.chunks_exact(8));
    for ((g, y), z) in (&mut gs).zip(ys).zip(zs) {
        step(g, y, z, &mut sum, &mut dot);
    }
    let n = g.len() / 8 * 8;
    step(&mut g[n..], &y[n..], &z[n..], &mut sum[..], &mut dot[..]);
    (sum.iter().sum(), dot.iter().sum())
}

/// Normalises one channel's row `z` into `y` with its batch statistics
/// (two passes, mean then squared deviations: exact where one pass of sums
/// of squares would cancel) and returns (mean, var, inv_std).
fn normalise(z: &[f32], y: &mut [f32], gamma: f32, beta: f32, epsilon: f32, relu: bool) -> (f32, f32, f32) {
    let n = z.len() as f32;
    let mean = sum_by(z, |v| v) / n;
    let var = sum_by(z, |v| (v - mean) * (v - mean)) / n;
    let inv_std = 1.0 / (var + epsilon).sqrt();
    let scale = gamma * inv_std;
    let shift = beta - mean * scale;
    if relu {
        y.iter_mut().zip(z).for_each(|(o, &v)| *o = (v * scale + shift).max(0.0));
    } else {
        y.iter_mut().zip(z).for_each(|(o, &v)| *o = v * scale + shift);
    }
    (mean, var, inv_std)
}

/// The bias and activation of a layer without BatchNorm, in place.
fn add_bias(y: &mut [f32], bias: f32, relu: bool) {
    if relu {
        y.iter_mut().for_each(|v| *v = (*v + bias).max(0.0));
    } else {
        y.iter_mut().for_each(|v| *v += bias);
    }
}

/// `x` split plane by plane into `xs` (a copy when the plane needs no split).
fn split_all(plane: &PlaneConv, x: &[f32], in_plane: usize, xs: &mut Vec<f32>) {
    xs.resize(x.len(), 0.0);
    xs.par_chunks_mut(in_plane).zip(x.par_chunks(in_plane)).for_each(|(out, x)| {
        if plane.splits() {
            plane.split(x, out);
        } else {
            out.copy_from_slice(x);
        }
    });
}

/// Runs `layer` on `x` into `act` (training mode: batch statistics).
pub(crate) fn forward(layer: &Layer, x: Input, act: &mut Act) {
    let (row, batch) = (act.row(), act.batch);
    let in_plane = x.height * x.width;
    assert_eq!(x.values.len(), layer.cin * batch * in_plane, "layer input size");
    let Act { z, y, mean, var, inv_std, xs, .. } = act;
    // The conv writes `z` when a BatchNorm follows, else the output itself.
    let conv_out: &mut Vec<f32> = if layer.norm.is_some() { z } else { y };
    match layer.kind {
        Kind::Pointwise => {
            let w = View::rows(&layer.weight, layer.cout, layer.cin);
            matmul(w, View::rows(x.values, layer.cin, row), conv_out, false);
        }
        Kind::Depthwise { stride } | Kind::Dense { stride } => {
            let plane = PlaneConv::new(x.height, x.width, stride);
            let (out_plane, in_row) = (plane.out_len(), batch * in_plane);
            let dense = matches!(layer.kind, Kind::Dense { .. });
            // Strided taps read the input split into column phases: split
            // each plane once, for every output channel and for backward.
            let src = if plane.splits() {
                split_all(&plane, x.values, in_plane, xs);
                &xs[..]
            } else {
                x.values
            };
            conv_out.par_chunks_mut(row).enumerate().for_each(|(c, out)| {
                out.fill(0.0);
                for (b, o) in out.chunks_exact_mut(out_plane).enumerate() {
                    let inputs = if dense { 0..layer.cin } else { c..c + 1 };
                    for ic in inputs {
                        let w = if dense {
                            &layer.weight[(c * layer.cin + ic) * 9..][..9]
                        } else {
                            &layer.weight[c * 9..][..9]
                        };
                        plane.forward_split(o, &src[ic * in_row + b * in_plane..][..in_plane], w);
                    }
                }
            });
        }
    }
    match &layer.norm {
        Some(norm) => {
            let stats: Vec<(f32, f32, f32)> = z
                .par_chunks(row)
                .zip(y.par_chunks_mut(row))
                .enumerate()
                .map(|(c, (z, y))| normalise(z, y, norm.gamma[c], norm.beta[c], norm.epsilon, layer.relu))
                .collect();
            for (c, (m, v, s)) in stats.into_iter().enumerate() {
                (mean[c], var[c], inv_std[c]) = (m, v, s);
            }
        }
        None => y.par_chunks_mut(row).enumerate().for_each(|(c, y)| add_bias(y, layer.bias[c], layer.relu)),
    }
}

/// Back-propagates `act.dy` through `layer`: returns the parameter
/// gradients and writes the gradient at the input into `dx` (the stem's
/// input is the image, which needs none: `None`).
pub(crate) fn backward(layer: &Layer, x: Input, act: &mut Act, dx: Option<InputGrad>) -> LayerGrads {
    let (row, batch) = (act.row(), act.batch);
    let in_plane = x.height * x.width;
    let in_row = batch * in_plane;
    let n = row as f32;
    let Act { z, y, dy, mean, var, inv_std, xs, .. } = act;
    let (z, y, mean, var, inv_std, xs) = (&z[..], &y[..], &mean[..], &var[..], &inv_std[..], &xs[..]);
    let relu = layer.relu;
    // ReLU's gradient mask: where the output is positive.
    let masked = |o: f32, g: f32| if relu && o <= 0.0 { 0.0 } else { g };

    // Per channel: the gradient before BatchNorm (in place), gamma's and
    // beta's gradients (or the bias's), and, for 3x3 convs, the taps' and
    // the input's gradients while the row is in cache.
    let per_channel =
        |c: usize, dz: &mut [f32], dx_row: Option<&mut [f32]>, accumulate: bool| -> ([f32; 2], Vec<f32>) {
            let (ys, zs) = (&y[c * row..][..row], layer.norm.as_ref().map(|_| &z[c * row..][..row]));
            let sums = match (&layer.norm, zs) {
                (Some(norm), Some(zs)) => {
                    let (m, s) = (mean[c], inv_std[c]);
                    let (dbeta, dgamma) = mask_and_sum(dz, ys, zs, m, relu);
                    let dgamma = dgamma * s;
                    let k = norm.gamma[c] * s;
                    let (mean_dz, mean_dz_xhat) = (dbeta / n, dgamma / n);
                    dz.iter_mut().zip(zs).for_each(|(d, &v)| *d = k * (*d - mean_dz - (v - m) * s * mean_dz_xhat));
                    [dgamma, dbeta]
                }
                _ => {
                    dz.iter_mut().zip(ys).for_each(|(d, &o)| *d = masked(o, *d));
                    [0.0, sum_by(dz, |v| v)]
                }
            };
            let taps = match layer.kind {
                Kind::Pointwise => Vec::new(),
                Kind::Depthwise { stride } | Kind::Dense { stride } => {
                    let plane = PlaneConv::new(x.height, x.width, stride);
                    let out_plane = plane.out_len();
                    let dense = matches!(layer.kind, Kind::Dense { .. });
                    let inputs = if dense { layer.cin } else { 1 };
                    let mut taps = vec![0.0f32; inputs * 9];
                    // The input as forward read it (split at stride 2).
                    let src = if plane.splits() { xs } else { x.values };
                    for (b, g) in dz.chunks_exact(out_plane).enumerate() {
                        for (i, t) in taps.chunks_exact_mut(9).enumerate() {
                            let ic = if dense { i } else { c };
                            plane.weight_grad_split(t, &src[ic * in_row + b * in_plane..][..in_plane], g);
                        }
                    }
                    if let Some(dx_row) = dx_row {
                        if !accumulate {
                            dx_row.fill(0.0);
                        }
                        let w = &layer.weight[c * 9..][..9];
                        for (g, d) in dz.chunks_exact(out_plane).zip(dx_row.chunks_exact_mut(in_plane)) {
                            plane.input_grad(d, g, w);
                        }
                    }
                    taps
                }
            };
            (sums, taps)
        };

    let mut dx = dx;
    assert!(
        dx.is_none() || !matches!(layer.kind, Kind::Dense { .. }),
        "a dense 3x3 conv reads the image, which takes no gradient"
    );
    let depthwise = matches!(layer.kind, Kind::Depthwise { .. });
    let per: Vec<([f32; 2], Vec<f32>)> = match dx.take_if(|_| depthwise) {
        // A depthwise channel's input gradient is its own input row.
        Some(InputGrad { values, accumulate }) => {
            assert_eq!(values.len(), layer.cin * in_row, "input gradient size");
            dy.par_chunks_mut(row)
                .zip(values.par_chunks_mut(in_row))
                .enumerate()
                .map(|(c, (dz, d))| per_channel(c, dz, Some(d), accumulate))
                .collect()
        }
        None => dy.par_chunks_mut(row).enumerate().map(|(c, dz)| per_channel(c, dz, None, false)).collect(),
    };

    let weight = match layer.kind {
        Kind::Pointwise => {
            // dW = dz x^T and dx (+)= W^T dz, over the whole batch at once.
            let dz = View::rows(dy, layer.cout, row);
            let mut weight = vec![0.0f32; layer.cout * layer.cin];
            matmul(dz, View::rows(x.values, layer.cin, row).t(), &mut weight, false);
            if let Some(InputGrad { values, accumulate }) = dx {
                matmul(View::rows(&layer.weight, layer.cout, layer.cin).t(), dz, values, accumulate);
            }
            weight
        }
        _ => per.iter().flat_map(|(_, taps)| taps.iter().copied()).collect(),
    };
    let (gammas, betas): (Vec<f32>, Vec<f32>) = per.iter().map(|([g, b], _)| (*g, *b)).unzip();
    match layer.norm {
        Some(_) => {
            LayerGrads { weight, bias: None, norm: Some((gammas, betas)), stats: Some((mean.to_vec(), var.to_vec())) }
        }
        None => LayerGrads { weight, bias: Some(betas), norm: None, stats: None },
    }
}

#[cfg(test)]
mod tests {
    //! Each kind of fused layer against Burn's `conv2d` and `BatchNorm`
    //! under autodiff: output, input and parameter gradients, and the batch
    //! statistics behind the running averages, at odd sizes and both strides.

    use super::*;
    use crate::cpu::net::Norm;
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
            let mut act = Act::new(&layer, batch, oh, ow);
            let input = Input { values: &x_cm, height, width };
            forward(&layer, input, &mut act);
            close(&format!("{what}: output"), &act.y, &swap(&values(y), batch, cout, oh * ow), 1e-4);
            act.dy = swap(&values(upstream), batch, cout, oh * ow);
            let dense = matches!(kind, Kind::Dense { .. });
            let mut dx = vec![7.0; x_cm.len()];
            let g =
                backward(&layer, input, &mut act, (!dense).then(|| InputGrad { values: &mut dx, accumulate: false }));

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
        let input = Input { values: &x, height: 1, width: 2 };
        let mut act = Act::new(&layer, 1, 1, 2);
        forward(&layer, input, &mut act);
        act.dy = vec![1.0, 0.0, 0.0, 1.0];
        let mut dx = vec![10.0; 4];
        backward(&layer, input, &mut act, Some(InputGrad { values: &mut dx, accumulate: true }));
        // W^T dy = [[1, 3], [2, 4]] [[1, 0], [0, 1]], added to the 10s.
        assert_eq!(dx, [11.0, 13.0, 12.0, 14.0]);
    }
}
