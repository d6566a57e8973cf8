//! The detector as the CPU step trains it: every conv as plain data, in one
//! list, with where each one reads its input. Built from the same walk as
//! `forward` and `folded` ([`crate::Detector::trainables`]), so the step
//! knows no layer order, width or tap of its own.

use crate::backend::{values_of as values, DetectorBackend};
use crate::detector::{Detector, Trainable};
use crate::folded::FoldedConv;
use crate::layers::folded_conv;

/// How a conv reads its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// 3x3, padding 1, every output channel reads every input: the stem.
    Dense { stride: usize },
    /// 3x3, padding 1, output channel c reads input channel c.
    Depthwise { stride: usize },
    /// 1x1, stride 1: a matrix product over channels.
    Pointwise,
    /// No weights: the input (half the resolution) upsampled 2x, nearest,
    /// and added to layer `skip`'s output: top-down fusion (`fuse.rs`).
    AddUp { skip: usize },
}

/// Training BatchNorm's parameters.
#[derive(Debug, Clone)]
pub(crate) struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
    pub epsilon: f32,
}

#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub kind: Kind,
    pub cin: usize,
    pub cout: usize,
    /// `[cout, cin (1 when depthwise), k, k]`.
    pub weight: Vec<f32>,
    /// The conv's own bias (zeros when it has none, as before a BatchNorm).
    pub bias: Vec<f32>,
    pub norm: Option<Norm>,
    pub relu: bool,
}

impl Layer {
    fn new(conv: FoldedConv, norm: Option<Norm>) -> Layer {
        let kind = match (conv.kernel, conv.depthwise) {
            (3, true) => Kind::Depthwise { stride: conv.stride },
            (3, false) => Kind::Dense { stride: conv.stride },
            (1, false) if conv.stride == 1 => Kind::Pointwise,
            _ => panic!("the CPU step has no {}x{} stride-{} conv", conv.kernel, conv.kernel, conv.stride),
        };
        let (cin, cout) = (conv.in_channels, conv.out_channels);
        Layer { kind, cin, cout, weight: conv.weight, bias: conv.bias, norm, relu: conv.relu }
    }

    pub(crate) fn stride(&self) -> usize {
        match self.kind {
            Kind::Dense { stride } | Kind::Depthwise { stride } => stride,
            Kind::Pointwise | Kind::AddUp { .. } => 1,
        }
    }
}

/// The whole network: `layers` in run order (the trunk, then each head's
/// convs, finest level first), each reading `inputs[i]` (`None`: the image).
#[derive(Debug, Clone)]
pub(crate) struct Net {
    pub layers: Vec<Layer>,
    pub inputs: Vec<Option<usize>>,
    /// The layers whose outputs are the raw levels, finest first.
    pub outputs: Vec<usize>,
}

impl Net {
    pub(crate) fn new<B: DetectorBackend>(model: &Detector<B>) -> Net {
        let (trainables, heads) = model.trainables();
        let layers: Vec<Layer> = trainables
            .iter()
            .map(|t| match t {
                Trainable::ConvBn { conv, norm, relu } => {
                    let params = Norm {
                        gamma: values(norm.gamma.val()),
                        beta: values(norm.beta.val()),
                        epsilon: norm.epsilon as f32,
                    };
                    Layer::new(folded_conv(conv, *relu), Some(params))
                }
                Trainable::Out(conv) | Trainable::Lateral { conv, .. } => Layer::new(folded_conv(conv, false), None),
                Trainable::AddUp { skip } => {
                    // The channels of the map it adds into.
                    let channels = match &trainables[*skip] {
                        Trainable::ConvBn { conv, .. } => conv.weight.dims()[0],
                        _ => unreachable!("fusion adds into a trunk layer"),
                    };
                    Layer {
                        kind: Kind::AddUp { skip: *skip },
                        cin: channels,
                        cout: channels,
                        weight: Vec::new(),
                        bias: Vec::new(),
                        norm: None,
                        relu: false,
                    }
                }
            })
            .collect();
        let mut inputs: Vec<Option<usize>> = (0..layers.len()).map(|i| i.checked_sub(1)).collect();
        for (i, t) in trainables.iter().enumerate() {
            if let Trainable::Lateral { from, .. } = t {
                inputs[i] = Some(*from);
            }
        }
        let mut outputs = Vec::with_capacity(heads.len());
        for head in &heads {
            inputs[head.first] = Some(head.after);
            outputs.push(head.first + head.len - 1);
        }
        Net { layers, inputs, outputs }
    }
}
