//! The two building blocks of the detector, each able to report its own cost.
//!
//! Activations flow as [`FeatureMap`]s, `[batch, channels, height * width]`:
//! a 1x1 conv is then a plain matmul, BatchNorm reduces over the last axis
//! and the depthwise op reads rows directly, so the backbone never reshapes
//! (on burn-ndarray every reshape copies the tensor, in both passes).

use burn::module::{Module, Param, RunningState};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use crate::backend::{values_of as values, DetectorBackend, Geometry, NormSettings};
use burn::tensor::TensorPrimitive;
use grin_net::{conv_out, Conv, FoldedConv, BATCH_NORM_EPSILON};

/// `onto` with `corner`'s values in its leading corner (`corner` is no
/// larger along any axis): how a layer widens with its weights kept.
pub(crate) fn into_corner<B: Backend, const D: usize>(onto: Tensor<B, D>, corner: Tensor<B, D>) -> Tensor<B, D> {
    let dims = corner.dims();
    debug_assert!(dims.iter().zip(onto.dims()).all(|(c, o)| *c <= o), "the corner fits");
    // Detached: a parameter made from it is a leaf again (autodiff backends).
    onto.slice_assign(std::array::from_fn::<_, D, _>(|i| 0..dims[i]), corner).detach()
}

/// Activations `[batch, channels, height * width]` and their spatial size.
#[derive(Debug, Clone)]
pub(crate) struct FeatureMap<B: Backend> {
    pub values: Tensor<B, 3>,
    pub height: usize,
    pub width: usize,
}

impl<B: Backend> FeatureMap<B> {
    pub(crate) fn from_image(x: Tensor<B, 4>) -> Self {
        let [b, c, height, width] = x.dims();
        FeatureMap { values: x.reshape([b, c, height * width]), height, width }
    }
}

/// Conv + BatchNorm + optional ReLU.
#[derive(Module, Debug)]
pub(crate) struct ConvBn<B: Backend> {
    pub(crate) conv: Conv2d<B>,
    pub(crate) norm: BatchNorm<B>,
    pub(crate) relu: bool,
}

impl<B: Backend> ConvBn<B> {
    /// `layer` (a conv followed by BatchNorm), freshly drawn.
    pub(crate) fn new(layer: &Conv, device: &B::Device) -> Self {
        debug_assert!(layer.norm, "a conv with BatchNorm");
        let pad = layer.kernel / 2;
        let conv = Conv2dConfig::new([layer.input, layer.output], [layer.kernel, layer.kernel])
            .with_stride([layer.stride, layer.stride])
            .with_groups(layer.groups())
            .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
            .with_bias(false)
            .init(device);
        let norm = BatchNormConfig::new(layer.output).with_epsilon(BATCH_NORM_EPSILON).init(device);
        ConvBn { conv, norm, relu: layer.relu }
    }

    /// `wider` (this layer with more output channels, freshly drawn) with
    /// this layer's weights and statistics in its first channels: those
    /// compute what they did, and the new ones start as `wider` drew them.
    pub(crate) fn widened(self, wider: ConvBn<B>) -> ConvBn<B> {
        let (old, mut conv, mut norm) = (self.norm, wider.conv, wider.norm);
        conv.weight = Param::from_tensor(into_corner(conv.weight.val(), self.conv.weight.val()));
        norm.gamma = Param::from_tensor(into_corner(norm.gamma.val(), old.gamma.val()));
        norm.beta = Param::from_tensor(into_corner(norm.beta.val(), old.beta.val()));
        norm.running_mean = RunningState::new(into_corner(norm.running_mean.value(), old.running_mean.value()));
        norm.running_var = RunningState::new(into_corner(norm.running_var.value(), old.running_var.value()));
        ConvBn { conv, norm, relu: self.relu }
    }
}

/// `conv` as plain data; a conv without bias gets zeros.
pub fn folded_conv<B: DetectorBackend>(conv: &Conv2d<B>, relu: bool) -> FoldedConv {
    let [out_channels, in_per_group, kernel, kw] = conv.weight.dims();
    debug_assert!(kernel == kw && conv.stride[0] == conv.stride[1], "square kernels and strides only");
    let depthwise = conv.groups > 1;
    debug_assert!(!depthwise || (conv.groups == out_channels && in_per_group == 1), "depthwise or dense only");
    FoldedConv {
        in_channels: if depthwise { out_channels } else { in_per_group },
        out_channels,
        kernel,
        stride: conv.stride[0],
        depthwise,
        weight: values(conv.weight.val()),
        bias: conv.bias.as_ref().map_or_else(|| vec![0.0; out_channels], |b| values(b.val())),
        relu,
    }
}

impl<B: DetectorBackend> ConvBn<B> {
    pub(crate) fn forward(&self, x: FeatureMap<B>) -> FeatureMap<B> {
        let FeatureMap { values, height, width } = conv(&self.conv, x);
        FeatureMap { values: batch_norm(&self.norm, values, self.relu), height, width }
    }
}

/// Runs `conv` through the cheapest equivalent: a matmul for a 1x1 conv,
/// the depthwise op for a depthwise 3x3, else Burn's conv on a 4-D view.
pub(crate) fn conv<B: DetectorBackend>(conv: &Conv2d<B>, x: FeatureMap<B>) -> FeatureMap<B> {
    let [out_c, in_per_group, kh, kw] = conv.weight.dims();
    let square = conv.stride[0] == conv.stride[1] && conv.dilation == [1, 1];
    let padded = matches!(conv.padding, PaddingConfig2d::Explicit(1, 1, 1, 1));
    let depthwise = (kh, kw) == (3, 3) && in_per_group == 1 && conv.groups == out_c && padded && square;
    let pointwise = (kh, kw) == (1, 1) && conv.groups == 1 && conv.stride == [1, 1];
    let mut y = if depthwise {
        let stride = conv.stride[0];
        let values = depthwise3x3(x.values, conv.weight.val(), x.height, x.width, stride);
        FeatureMap { values, height: conv_out(x.height, stride), width: conv_out(x.width, stride) }
    } else if pointwise {
        // A 1x1 conv is a matmul over channels, and so is its backward pass:
        // on Burn's CPU backends that is 10-40x faster than the generic conv
        // backward, and on CUDA it is what the conv would become anyway.
        let values = conv.weight.val().reshape([1, out_c, in_per_group]).matmul(x.values);
        FeatureMap { values, height: x.height, width: x.width }
    } else {
        let [b, c, _] = x.values.dims();
        FeatureMap::from_image(conv.forward(x.values.reshape([b, c, x.height, x.width])))
    };
    if let Some(bias) = &conv.bias {
        y.values = y.values + bias.val().reshape([1, out_c, 1]);
    }
    y
}

/// The depthwise 3x3 convolution (padding 1) of `x`, `[batch, channels,
/// height * width]`; the output is `[batch, channels, out_height * out_width]`.
pub fn depthwise3x3<B: DetectorBackend>(
    x: Tensor<B, 3>,
    weight: Tensor<B, 4>,
    height: usize,
    width: usize,
    stride: usize,
) -> Tensor<B, 3> {
    let geometry = Geometry { height, width, stride };
    let out = B::depthwise3x3(x.into_primitive().tensor(), weight.into_primitive().tensor(), geometry);
    Tensor::from_primitive(TensorPrimitive::Float(out))
}

/// BatchNorm (then ReLU if `relu`) over `[batch, channels, points]` with
/// `norm`'s parameters, as Burn's `BatchNorm::forward` computes it: batch
/// statistics, folded into the running averages, when autodiff is on;
/// the running averages otherwise.
pub fn batch_norm<B: DetectorBackend>(norm: &BatchNorm<B>, x: Tensor<B, 3>, relu_after: bool) -> Tensor<B, 3> {
    let channels = x.dims()[1];
    if B::ad_enabled(&x.device()) {
        let settings = NormSettings { epsilon: norm.epsilon, relu: relu_after };
        let (gamma, beta) = (norm.gamma.val().into_primitive().tensor(), norm.beta.val().into_primitive().tensor());
        let out = B::batch_norm_train(x.into_primitive().tensor(), gamma, beta, settings);
        let m = norm.momentum;
        let update = |state: Tensor<B, 1>, batch| {
            let batch = Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(batch));
            state.mul_scalar(1.0 - m).add(batch.mul_scalar(m)).detach()
        };
        norm.running_mean.update(update(norm.running_mean.value_sync(), out.mean));
        norm.running_var.update(update(norm.running_var.value_sync(), out.var));
        return Tensor::from_primitive(TensorPrimitive::Float(out.output));
    }
    let per_channel = |t: Tensor<B, 1>| t.reshape([1, channels, 1]);
    // One multiply-add per element: the per-channel scale and shift are tiny.
    let scale = per_channel(norm.gamma.val()) / per_channel(norm.running_var.value()).add_scalar(norm.epsilon).sqrt();
    let shift = per_channel(norm.beta.val()) - per_channel(norm.running_mean.value()) * scale.clone();
    let y = x * scale + shift;
    if relu_after {
        relu(y)
    } else {
        y
    }
}

/// Depthwise 3x3 then pointwise 1x1: the MobileNet block that keeps the
/// model under 100k parameters.
#[derive(Module, Debug)]
pub(crate) struct DwSep<B: Backend> {
    depthwise: ConvBn<B>,
    pointwise: ConvBn<B>,
}

impl<B: Backend> DwSep<B> {
    pub(crate) fn new(depthwise: &Conv, pointwise: &Conv, device: &B::Device) -> Self {
        DwSep { depthwise: ConvBn::new(depthwise, device), pointwise: ConvBn::new(pointwise, device) }
    }

    /// `wider` (this block with more output channels) with this block's
    /// weights in its first channels ([`ConvBn::widened`]).
    pub(crate) fn widened(self, wider: DwSep<B>) -> DwSep<B> {
        DwSep { depthwise: self.depthwise, pointwise: self.pointwise.widened(wider.pointwise) }
    }

    /// Its two convs in the order they run.
    pub(crate) fn layers(&self) -> [&ConvBn<B>; 2] {
        [&self.depthwise, &self.pointwise]
    }
}

impl<B: DetectorBackend> DwSep<B> {
    pub(crate) fn forward(&self, x: FeatureMap<B>) -> FeatureMap<B> {
        self.pointwise.forward(self.depthwise.forward(x))
    }
}
