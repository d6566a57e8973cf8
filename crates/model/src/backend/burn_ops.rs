//! The detector's ops composed from Burn's own: what [`super::DetectorBackend`]
//! does on a backend that supplies nothing of its own (CUDA, and autodiff
//! over any backend), and the reference the CPU kernels are tested against.

use super::{Geometry, NormOutput, NormSettings};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::NodeId;
use burn::backend::Autodiff;
use burn::tensor::activation::relu;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::ops::{ConvOptions, FloatTensor};
use burn::tensor::{Slice, Tensor, TensorMetadata, TensorPrimitive};

fn float<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

fn primitive<B: Backend, const D: usize>(t: Tensor<B, D>) -> FloatTensor<B> {
    t.into_primitive().tensor()
}

fn per_channel<B: Backend>(t: FloatTensor<B>) -> Tensor<B, 3> {
    let channels = t.shape()[0];
    float::<B, 1>(t).reshape([1, channels, 1])
}

fn channels_of<B: Backend>(t: Tensor<B, 3>) -> FloatTensor<B> {
    let channels = t.dims()[1];
    primitive(t.reshape([channels]))
}

fn conv_options(channels: usize, stride: usize) -> ConvOptions<2> {
    ConvOptions::new([stride, stride], [1, 1], [1, 1], channels)
}

/// `[batch, channels, points]` viewed as `[batch, channels, height, width]`.
fn image<B: Backend>(x: FloatTensor<B>, height: usize, width: usize) -> FloatTensor<B> {
    let [b, c, _] = x.shape().dims();
    B::float_reshape(x, [b, c, height, width].into())
}

fn flat<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let [b, c, h, w] = x.shape().dims();
    B::float_reshape(x, [b, c, h * w].into())
}

pub fn depthwise3x3<B: Backend>(x: FloatTensor<B>, weight: FloatTensor<B>, geometry: Geometry) -> FloatTensor<B> {
    let (Geometry { height, width, stride }, channels) = (geometry, weight.shape()[0]);
    flat::<B>(B::conv2d(image::<B>(x, height, width), weight, None, conv_options(channels, stride)))
}

/// The depthwise conv under autodiff, with the weight gradient computed by
/// [`depthwise3x3_weight_grad`] instead of Burn's: burn-cubecl 0.21 (CUDA,
/// wgpu) computes a grouped conv's weight gradient with one convolution per
/// group (`conv_weight_grad_groups`), so one per channel of a depthwise
/// layer, thousands of launches a step. The forward pass and the input
/// gradient stay Burn's (one grouped kernel each).
pub fn depthwise3x3_tracked<B: Backend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    weight: FloatTensor<Autodiff<B, C>>,
    geometry: Geometry,
) -> FloatTensor<Autodiff<B, C>> {
    #[derive(Debug)]
    struct Depthwise;

    impl<B: Backend> Backward<B, 2> for Depthwise {
        type State = (NodeId, NodeId, Geometry);

        fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
            let [node_x, node_weight] = ops.parents;
            let grad = grads.consume::<B>(&ops.node);
            let (x_state, weight_state, geometry) = ops.state;
            let x = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(x_state);
            let weight = checkpointer.retrieve_node_output::<B::FloatTensorPrimitive>(weight_state);
            let Geometry { height, width, stride } = geometry;
            let (out_height, out_width) = geometry.out_size();
            if let Some(node) = node_x {
                let channels = weight.shape()[0];
                let image_grad = image::<B>(grad.clone(), out_height, out_width);
                let dx = B::conv2d_x_backward(
                    image::<B>(x.clone(), height, width),
                    weight,
                    image_grad,
                    conv_options(channels, stride),
                );
                grads.register::<B>(node.id, flat::<B>(dx));
            }
            if let Some(node) = node_weight {
                grads.register::<B>(node.id, depthwise3x3_weight_grad::<B>(x, grad, geometry));
            }
        }
    }

    match Depthwise.prepare::<C>([x.node.clone(), weight.node.clone()]).compute_bound().stateful() {
        OpsKind::Tracked(mut prep) => {
            let (x_state, weight_state) = (prep.checkpoint(&x), prep.checkpoint(&weight));
            prep.finish((x_state, weight_state, geometry), depthwise3x3::<B>(x.primitive, weight.primitive, geometry))
        }
        OpsKind::UnTracked(prep) => prep.finish(depthwise3x3::<B>(x.primitive, weight.primitive, geometry)),
    }
}

/// The nine taps of a 3x3 conv (padding 1): for each, the strided slice of
/// the zero-padded input it reads, stacked as `[batch, channels, 9,
/// out_height * out_width]` (tap `3 * row + column`, the weight's order).
fn taps<B: Backend>(x: Tensor<B, 3>, geometry: Geometry) -> Tensor<B, 4> {
    let Geometry { height, width, stride } = geometry;
    let [batch, channels, _] = x.dims();
    let (out_height, out_width) = geometry.out_size();
    let padded = x.reshape([batch, channels, height, width]).pad((1, 1, 1, 1), 0.0);
    // Tap k of a side reads padded rows (columns) k, k + stride, ..., `out` of them.
    let along =
        |k: usize, out: usize| Slice::new(k as isize, Some((k + (out - 1) * stride + 1) as isize), stride as isize);
    let taps: Vec<Tensor<B, 4>> = (0..9)
        .map(|t| {
            padded.clone().slice([Slice::full(), Slice::full(), along(t / 3, out_height), along(t % 3, out_width)])
        })
        .collect();
    Tensor::stack::<5>(taps, 2).reshape([batch, channels, 9, out_height * out_width])
}

/// The depthwise 3x3 conv's weight gradient, `[channels, 1, 3, 3]`, from
/// its input `x` and the output's gradient `grad` (`[batch, channels,
/// points]` both): each tap's slice times the gradient, summed over batch
/// and points, the nine at once so that the product and the sums are one
/// kernel each.
pub fn depthwise3x3_weight_grad<B: Backend>(
    x: FloatTensor<B>,
    grad: FloatTensor<B>,
    geometry: Geometry,
) -> FloatTensor<B> {
    let [batch, channels, points] = grad.shape().dims();
    let taps = taps(float::<B, 3>(x), geometry);
    let grad = float::<B, 3>(grad).reshape([batch, channels, 1, points]);
    primitive((taps * grad).sum_dim(3).sum_dim(0).reshape([channels, 1, 3, 3]))
}

/// A dense 3x3 conv (padding 1, no bias) of `x` (`[batch, in, height *
/// width]`) with `weight` (`[out, in, 3, 3]`) as the taps times the weight,
/// one product batched over the images: under autodiff its weight gradient
/// is a batched product too. burn-cubecl 0.21 computes a conv's weight
/// gradient as one product whose sum runs over batch and points on two
/// thread blocks: the stem's took 40 of a 64 ms step's GPU time at batch
/// 256 on an H200 (`docs/benchmarks.md`).
pub fn dense3x3_by_taps<B: Backend>(x: Tensor<B, 3>, weight: Tensor<B, 4>, geometry: Geometry) -> Tensor<B, 3> {
    let [batch, channels, _] = x.dims();
    let [out, _, _, _] = weight.dims();
    let taps = taps(x, geometry);
    let points = taps.dims()[3];
    weight.reshape([1, out, channels * 9]).matmul(taps.reshape([batch, channels * 9, points]))
}

/// Training BatchNorm (+ ReLU) under autodiff as one op with its own
/// backward, instead of the dozen ops [`batch_norm_train`] composes and
/// the two dozen Burn's autodiff records to differentiate them: on a GPU
/// each op costs the host more than the device (the step is host-bound,
/// `docs/benchmarks.md`). With `xhat = (x - mean) / sqrt(var + eps)` and
/// `g` the output's gradient (zero where the ReLU cut): `dbeta = Σg`,
/// `dgamma = Σ g·xhat`, `dx = gamma / sqrt(var + eps) · (g - Σg/n - xhat·Σ(g·xhat)/n)`,
/// sums over batch and points, `n` their count.
pub fn batch_norm_tracked<B: Backend, C: CheckpointStrategy>(
    x: FloatTensor<Autodiff<B, C>>,
    gamma: FloatTensor<Autodiff<B, C>>,
    beta: FloatTensor<Autodiff<B, C>>,
    settings: NormSettings,
) -> NormOutput<Autodiff<B, C>> {
    /// What the backward pass reads: `xhat`, `gamma / sqrt(var + eps)`
    /// (`[1, channels, 1]`) and, after a ReLU, the output (its mask).
    type State<B> = (FloatTensor<B>, FloatTensor<B>, Option<FloatTensor<B>>);

    #[derive(Debug)]
    struct Norm;

    impl<B: Backend> Backward<B, 3> for Norm {
        type State = State<B>;

        fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
            let [node_x, node_gamma, node_beta] = ops.parents;
            let (xhat, scale, output) = ops.state;
            let g = float::<B, 3>(grads.consume::<B>(&ops.node));
            let g = match output {
                Some(y) => g.mask_fill(float::<B, 3>(y).lower_equal_elem(0.0), 0.0),
                None => g,
            };
            let xhat = float::<B, 3>(xhat);
            let [batch, _, points] = xhat.dims();
            let sum_g = g.clone().sum_dim(2).sum_dim(0);
            let sum_gx = (g.clone() * xhat.clone()).sum_dim(2).sum_dim(0);
            if let Some(node) = node_x {
                let inv_n = 1.0 / (batch * points) as f64;
                let dx = (g - sum_g.clone().mul_scalar(inv_n) - xhat * sum_gx.clone().mul_scalar(inv_n))
                    * float::<B, 3>(scale);
                grads.register::<B>(node.id, primitive(dx));
            }
            if let Some(node) = node_gamma {
                grads.register::<B>(node.id, channels_of(sum_gx));
            }
            if let Some(node) = node_beta {
                grads.register::<B>(node.id, channels_of(sum_g));
            }
        }
    }

    let inner = float::<B, 3>(x.primitive);
    let mean = inner.clone().mean_dim(2).mean_dim(0);
    let centered = inner - mean.clone();
    let var = centered.clone().square().mean_dim(2).mean_dim(0);
    let xhat = centered / var.clone().add_scalar(settings.epsilon).sqrt();
    let gamma_3 = per_channel::<B>(gamma.primitive.clone());
    let y = xhat.clone() * gamma_3.clone() + per_channel::<B>(beta.primitive.clone());
    let y = if settings.relu { relu(y) } else { y };
    let output = primitive(y);
    let parents = [x.node.clone(), gamma.node.clone(), beta.node.clone()];
    let output = match Norm.prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let scale = gamma_3 / var.clone().add_scalar(settings.epsilon).sqrt();
            let kept = settings.relu.then(|| output.clone());
            prep.finish((primitive(xhat), primitive(scale), kept), output)
        }
        OpsKind::UnTracked(prep) => prep.finish(output),
    };
    let untracked = |t: Tensor<B, 3>| <Autodiff<B, C> as AutodiffBackend>::from_inner(channels_of(t));
    NormOutput { output, mean: untracked(mean), var: untracked(var) }
}

/// The loss's total tied to the raw output as one op: its backward is the
/// gradient [`crate::loss()`] took by hand, times the upstream gradient (a
/// one-element tensor).
pub fn loss_tracked<B: Backend, C: CheckpointStrategy>(
    total: FloatTensor<Autodiff<B, C>>,
    raw: FloatTensor<Autodiff<B, C>>,
    gradient: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    #[derive(Debug)]
    struct Loss;

    impl<B: Backend> Backward<B, 1> for Loss {
        type State = FloatTensor<B>;

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let [node_raw] = ops.parents;
            let upstream = float::<B, 1>(grads.consume::<B>(&ops.node)).reshape([1, 1, 1]);
            if let Some(node) = node_raw {
                grads.register::<B>(node.id, primitive(float::<B, 3>(ops.state) * upstream));
            }
        }
    }

    match Loss.prepare::<C>([raw.node]).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish(gradient.primitive, total.primitive),
        OpsKind::UnTracked(prep) => prep.finish(total.primitive),
    }
}

pub fn batch_norm_train<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    settings: NormSettings,
) -> NormOutput<B> {
    let x = float::<B, 3>(x);
    let mean = x.clone().mean_dim(2).mean_dim(0);
    let centered = x - mean.clone();
    let var = centered.clone().square().mean_dim(2).mean_dim(0);
    let scale = per_channel(gamma) / var.clone().add_scalar(settings.epsilon).sqrt();
    let y = centered * scale + per_channel(beta);
    let y = if settings.relu { relu(y) } else { y };
    NormOutput { output: primitive(y), mean: channels_of(mean), var: channels_of(var) }
}
