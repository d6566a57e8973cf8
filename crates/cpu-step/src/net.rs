//! The detector as the CPU step trains it: every conv as plain data, in one
//! list, with where each one reads its input. Built from the same walk as
//! `forward` and `folded` ([`grin_model::Detector::trainables`]), so the step
//! knows no layer order, width or tap of its own.

use grin_model::folded_conv;
use grin_model::graph::{fused_channels, Wiring};
use grin_model::{values_of as values, DetectorBackend};
use grin_model::{Detector, Trainable};
use grin_net::FoldedConv;

pub(crate) use grin_model::graph::Kind;

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
    fn new(kind: Kind, conv: FoldedConv, norm: Option<Norm>) -> Layer {
        let (cin, cout) = (conv.in_channels, conv.out_channels);
        Layer { kind, cin, cout, weight: conv.weight, bias: conv.bias, norm, relu: conv.relu }
    }

    pub(crate) fn stride(&self) -> usize {
        self.kind.stride()
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
    /// Whether each layer leaves its output to its readers: a dense or 1x1
    /// layer with BatchNorm whose every reader is a depthwise layer, which
    /// maps each image's plane of `z` in cache as it pads it into lines.
    /// Its output, among the largest buffers of the step (the stem's is 20
    /// MB at batch 64), is then never written nor read back: a step bound
    /// by memory traffic at large batches (docs/benchmarks.md).
    pub deferred: Vec<bool>,
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
                    Layer::new(Kind::of(*conv), folded_conv(conv, *relu), Some(params))
                }
                Trainable::Out(conv) | Trainable::Lateral { conv, .. } => {
                    Layer::new(Kind::of(*conv), folded_conv(conv, false), None)
                }
                Trainable::AddUp { skip } => {
                    let channels = fused_channels(&trainables, *skip);
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
        let wiring = Wiring::of(&trainables, &heads);
        let deferred = (0..layers.len())
            .map(|i| {
                let read_by: Vec<&Layer> = wiring.readers(i).map(|j| &layers[j]).collect();
                let fused = layers.iter().any(|l| l.kind == Kind::AddUp { skip: i });
                matches!(layers[i].kind, Kind::Dense { .. } | Kind::Pointwise)
                    && layers[i].norm.is_some()
                    && !wiring.outputs.contains(&i)
                    && !fused
                    && !read_by.is_empty()
                    && read_by.iter().all(|l| matches!(l.kind, Kind::Depthwise { .. }))
            })
            .collect();
        let Wiring { inputs, outputs } = wiring;
        Net { layers, inputs, outputs, deferred }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use grin_model::InitDetector;

    /// Which layers leave their output to their readers, with top-down
    /// fusion on and off: exactly the BatchNorm layers that only depthwise
    /// layers read (the stem and the 1x1 layers before a depthwise one),
    /// never an output, a fused map or a layer a 1x1 conv reads.
    #[test]
    fn only_layers_read_by_depthwise_layers_alone_defer_their_output() {
        for top_down in [false, true] {
            let spec = grin_net::DetectorSpec {
                model: grin_net::ModelConfig { top_down, ..grin_net::ModelConfig::default() },
                width: 64,
                height: 48,
                channels: 1,
            };
            // Under grin's generator lock: the parameters are drawn as `Net` reads them.
            let device = Default::default();
            let net =
                grin_model::seeded::<NdArray<f32>, _>(&device, 3, || Net::new(&spec.init::<NdArray<f32>>(&device)));
            assert!(net.deferred[0], "the stem, read by the first depthwise layer");
            for (i, layer) in net.layers.iter().enumerate() {
                let readers: Vec<Kind> =
                    (0..net.layers.len()).filter(|&j| net.inputs[j] == Some(i)).map(|j| net.layers[j].kind).collect();
                let fused = net.layers.iter().any(|l| l.kind == Kind::AddUp { skip: i });
                let want = layer.norm.is_some()
                    && !matches!(layer.kind, Kind::Depthwise { .. })
                    && !fused
                    && !readers.is_empty()
                    && readers.iter().all(|k| matches!(k, Kind::Depthwise { .. }));
                assert_eq!(net.deferred[i], want, "layer {i} ({:?}), top-down {top_down}", layer.kind);
            }
            assert!(net.outputs.iter().all(|&o| !net.deferred[o]));
            assert!(net.deferred.iter().filter(|&&d| d).count() >= 4, "the trunk's 1x1 layers defer");
        }
    }
}
