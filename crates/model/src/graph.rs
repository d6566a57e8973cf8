//! The detector as a training step walks it: every trainable conv in one
//! list ([`Detector::trainables`]), what kind of conv each is, and where
//! each reads its input. Read from the module's shapes alone, never its
//! values: the CPU step (grin-cpu-step) and the device step
//! (grin-device-step) both take their layer order, widths and taps from
//! here, and neither knows one of its own.

use crate::detector::{HeadSpan, Trainable};
use burn::nn::conv::Conv2d;
use burn::tensor::backend::Backend;

/// How a conv reads its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 3x3, padding 1, every output channel reads every input: the stem.
    Dense { stride: usize },
    /// 3x3, padding 1, output channel c reads input channel c.
    Depthwise { stride: usize },
    /// 1x1, stride 1: a matrix product over channels.
    Pointwise,
    /// No weights: the input (half the resolution) upsampled 2x, nearest,
    /// and added to layer `skip`'s output: top-down fusion.
    AddUp { skip: usize },
}

impl Kind {
    /// The kind of `conv` (square kernels and strides, padding 1 on a 3x3).
    pub fn of<B: Backend>(conv: &Conv2d<B>) -> Kind {
        let [out_channels, in_per_group, kernel, _] = conv.weight.dims();
        let stride = conv.stride[0];
        let depthwise = conv.groups > 1;
        debug_assert!(!depthwise || (conv.groups == out_channels && in_per_group == 1), "depthwise or dense only");
        match (kernel, depthwise) {
            (3, true) => Kind::Depthwise { stride },
            (3, false) => Kind::Dense { stride },
            (1, false) if stride == 1 => Kind::Pointwise,
            _ => panic!("the training steps have no {kernel}x{kernel} stride-{stride} conv"),
        }
    }

    pub fn stride(&self) -> usize {
        match *self {
            Kind::Dense { stride } | Kind::Depthwise { stride } => stride,
            Kind::Pointwise | Kind::AddUp { .. } => 1,
        }
    }
}

/// Where each layer of [`Detector::trainables`]' list reads its input
/// (`None`: the image), and which layers' outputs are the raw levels,
/// finest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wiring {
    pub inputs: Vec<Option<usize>>,
    pub outputs: Vec<usize>,
}

impl Wiring {
    /// Each layer reads the one before it, but a fusion's lateral conv
    /// reads its tap and each head's first layer the trunk layer it hangs
    /// from.
    pub fn of<B: Backend>(trainables: &[Trainable<'_, B>], heads: &[HeadSpan]) -> Wiring {
        let mut inputs: Vec<Option<usize>> = (0..trainables.len()).map(|i| i.checked_sub(1)).collect();
        for (i, t) in trainables.iter().enumerate() {
            if let Trainable::Lateral { from, .. } = t {
                inputs[i] = Some(*from);
            }
        }
        let mut outputs = Vec::with_capacity(heads.len());
        for head in heads {
            inputs[head.first] = Some(head.after);
            outputs.push(head.first + head.len - 1);
        }
        Wiring { inputs, outputs }
    }

    /// The layers that read layer `i`'s output.
    pub fn readers(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.inputs.len()).filter(move |&j| self.inputs[j] == Some(i))
    }
}

/// The channels a fusion adds into: those of its trunk layer `skip`.
pub fn fused_channels<B: Backend>(trainables: &[Trainable<'_, B>], skip: usize) -> usize {
    match &trainables[skip] {
        Trainable::ConvBn { conv, .. } => conv.weight.dims()[0],
        _ => unreachable!("fusion adds into a trunk layer"),
    }
}
