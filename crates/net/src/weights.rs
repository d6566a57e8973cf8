//! A detector's weights as plain data: what the weights file holds
//! ([`crate::file`]), and what Burn's `Detector` is built from and written
//! back as (grin-model).

use crate::folded::{fold_batch_norm, FoldedConv, FoldedDetector, FoldedFuse, FoldedHead};
use crate::spec::{Conv, DetectorSpec};

/// BatchNorm's epsilon, as Burn's `BatchNormConfig` has it by default: not
/// in the file (a setting, not a weight), so stated here for every reader.
pub const BATCH_NORM_EPSILON: f64 = 1e-5;

/// One parameter tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Burn's parameter id, kept so that a model read and written back is
    /// the same file.
    pub id: String,
    pub shape: Vec<usize>,
    /// Row-major.
    pub values: Vec<f32>,
}

/// A detector: its spec, and every tensor in the order of
/// [`crate::Architecture::tensor_shapes`] (each conv's weight, then its
/// bias or its BatchNorm's gamma, beta, running mean and running variance).
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    pub spec: DetectorSpec,
    pub tensors: Vec<Tensor>,
}

impl Weights {
    /// Whether every tensor has the shape the spec's architecture gives
    /// it, in order.
    pub fn fit(&self) -> bool {
        self.tensors.iter().map(|t| &t.shape).eq(self.spec.architecture().tensor_shapes().iter())
    }

    /// Every conv with its BatchNorm folded in, in the order the layers
    /// run, and where each head reads the trunk: what an engine without
    /// Burn runs. The weights fit the spec (what [`crate::file`] checks).
    pub fn folded(&self) -> FoldedDetector {
        debug_assert!(self.fit(), "weights fit their spec");
        let arch = self.spec.architecture();
        let mut tensors = self.tensors.iter();
        let mut fold = |conv: &Conv| folded(conv, &mut tensors);
        let mut trunk = vec![fold(&arch.stem)];
        // Where each block ends in the trunk.
        let mut ends = Vec::with_capacity(arch.blocks.len());
        for block in &arch.blocks {
            trunk.extend(block.iter().map(&mut fold));
            ends.push(trunk.len() - 1);
        }
        let taps: Vec<usize> = arch.taps().into_iter().map(|block| ends[block]).collect();
        let mut heads: Vec<FoldedHead> = arch
            .heads
            .iter()
            .zip(&taps)
            .map(|(convs, &after)| FoldedHead { after, fuse: None, convs: convs.iter().map(&mut fold).collect() })
            .collect();
        if let Some(lateral) = &arch.top_down {
            heads[0].fuse = Some(FoldedFuse { from: taps[1], lateral: fold(lateral) });
        }
        FoldedDetector { trunk, heads }
    }
}

/// `conv` with the tensors it holds taken from `tensors`, its BatchNorm
/// (if any) folded in.
fn folded<'a>(conv: &Conv, tensors: &mut impl Iterator<Item = &'a Tensor>) -> FoldedConv {
    let mut next = || tensors.next().expect("a tensor for every conv").values.clone();
    let mut weight = next();
    let bias = if conv.norm {
        let [gamma, beta, mean, var] = std::array::from_fn(|_| next());
        fold_batch_norm(&mut weight, [&gamma, &beta, &mean, &var], BATCH_NORM_EPSILON as f32)
    } else {
        next()
    };
    FoldedConv {
        in_channels: conv.input,
        out_channels: conv.output,
        kernel: conv.kernel,
        stride: conv.stride,
        depthwise: conv.depthwise,
        weight,
        bias,
        relu: conv.relu,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::points::conv_out;
    use crate::spec::Budget;
    use grin_terms::output::OUTPUTS;

    /// `spec`'s weights, each tensor's values its own (positive, so that a
    /// running variance is one).
    pub(crate) fn weights_of(spec: DetectorSpec) -> Weights {
        let shapes = spec.architecture().tensor_shapes();
        let tensors = shapes
            .into_iter()
            .enumerate()
            .map(|(i, shape)| {
                let values = (0..shape.iter().product()).map(|k| 0.25 + ((i * 31 + k) % 17) as f32 / 16.0).collect();
                Tensor { id: format!("param{i}"), shape, values }
            })
            .collect();
        Weights { spec, tensors }
    }

    #[test]
    fn the_folded_detector_has_the_layers_taps_and_cost_of_the_architecture() {
        let spec = DetectorSpec { model: ModelConfig::default(), width: 96, height: 64, channels: 1 };
        let folded = weights_of(spec.clone()).folded();
        // Stem, then (depthwise, pointwise) per block; blocks 3, 5 and 7 are tapped.
        assert_eq!(folded.trunk.len(), 17);
        assert_eq!(folded.heads.iter().map(|h| h.after).collect::<Vec<_>>(), [8, 12, 16]);
        let channels: Vec<usize> = folded.trunk.iter().map(|c| c.out_channels).collect();
        assert_eq!(channels, [16, 16, 32, 32, 32, 32, 48, 48, 48, 48, 80, 80, 80, 80, 112, 112, 112]);
        // Counted on the plain data, the cost is the budget's.
        let cost = |conv: &FoldedConv, (h, w): (usize, usize)| {
            let (h, w) = (conv_out(h, conv.stride), conv_out(w, conv.stride));
            (h, w, (h * w * conv.weight.len()) as u64)
        };
        let (mut size, mut macs) = ((64, 96), 0);
        let mut at_layer = Vec::new();
        for conv in &folded.trunk {
            let (h, w, m) = cost(conv, size);
            (size, macs) = ((h, w), macs + m);
            at_layer.push(size);
        }
        for head in &folded.heads {
            let mut size = at_layer[head.after];
            for conv in &head.convs {
                let (h, w, m) = cost(conv, size);
                (size, macs) = ((h, w), macs + m);
            }
            assert_eq!(head.convs.last().unwrap().out_channels, OUTPUTS);
        }
        assert_eq!(Budget::of(&spec).mflops, 2.0 * macs as f64 / 1e6);
    }

    #[test]
    fn folding_takes_each_convs_own_tensors() {
        let spec = DetectorSpec {
            model: ModelConfig { top_down: true, ..ModelConfig::default() },
            width: 64,
            height: 48,
            channels: 1,
        };
        let weights = weights_of(spec);
        let folded = weights.folded();
        // The stem: weight, then gamma, beta, mean and variance folded in.
        let t = |i: usize| &weights.tensors[i].values;
        let scale = t(1)[0] / (t(4)[0] + BATCH_NORM_EPSILON as f32).sqrt();
        assert_eq!(folded.trunk[0].weight[0], t(0)[0] * scale);
        assert_eq!(folded.trunk[0].bias[0], t(2)[0] - t(3)[0] * scale);
        // The fusion's lateral conv is the file's last conv: its weight and bias as they are.
        let n = weights.tensors.len();
        let lateral = &folded.heads[0].fuse.as_ref().unwrap().lateral;
        assert_eq!((&lateral.weight, &lateral.bias), (t(n - 2), t(n - 1)));
        assert_eq!(folded.heads[0].fuse.as_ref().unwrap().from, folded.heads[1].after);
    }
}
