//! The trained detector as plain data, for an inference engine that runs
//! without Burn: every conv with its BatchNorm folded into its weights and
//! bias, in the order the layers run, and where each head reads the trunk.
//!
//! [`crate::Weights::folded`] builds it from the architecture's one list of convs,
//! so an engine that runs it needs to know no layer order, channel count or
//! tap of its own (as candle's yolo-v8 folds BatchNorm on load).

/// A conv whose BatchNorm (if any) is folded in, with its activation.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldedConv {
    pub in_channels: usize,
    pub out_channels: usize,
    /// Square side: 3 (padding 1) or 1 (no padding).
    pub kernel: usize,
    pub stride: usize,
    /// Each output channel reads only its own input channel.
    pub depthwise: bool,
    /// `[out_channels, in_channels (1 when depthwise), kernel, kernel]`.
    pub weight: Vec<f32>,
    /// `[out_channels]`, added before the ReLU.
    pub bias: Vec<f32>,
    pub relu: bool,
}

/// One output level: `convs` run in order on the trunk's output after
/// trunk layer `after` (with `fuse`, plus the coarser features it brings);
/// the last gives [`crate::OUTPUTS`] channels.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldedHead {
    pub after: usize,
    pub fuse: Option<FoldedFuse>,
    pub convs: Vec<FoldedConv>,
}

/// Top-down fusion into a head's input: `lateral` (a 1x1 conv) runs on the
/// output of trunk layer `from` (half the resolution), each of its values
/// is repeated over a 2x2 block (nearest upsampling; the last row and
/// column are cut to the head's map when its side is odd) and added.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldedFuse {
    pub from: usize,
    pub lateral: FoldedConv,
}

/// `into[c][y][x] += coarse[c][y / 2][x / 2]`: the one statement of the
/// fusion's upsample-and-add on plain planes, `into` being `height x width`
/// per channel and `coarse` `ceil(height / 2) x ceil(width / 2)`.
pub fn add_upsampled(into: &mut [f32], coarse: &[f32], channels: usize, height: usize, width: usize) {
    let (ch, cw) = (height.div_ceil(2), width.div_ceil(2));
    assert_eq!(into.len(), channels * height * width, "fine map size");
    assert_eq!(coarse.len(), channels * ch * cw, "coarse map size");
    for (fine, coarse) in into.chunks_exact_mut(height * width).zip(coarse.chunks_exact(ch * cw)) {
        for (y, row) in fine.chunks_exact_mut(width).enumerate() {
            let source = &coarse[(y / 2) * cw..][..cw];
            for (x, v) in row.iter_mut().enumerate() {
                *v += source[x / 2];
            }
        }
    }
}

/// The whole detector. Its raw output is the heads' outputs, finest level
/// first, concatenated point-wise (as grin-model's `DetectorOutput` holds them).
#[derive(Debug, Clone, PartialEq)]
pub struct FoldedDetector {
    pub trunk: Vec<FoldedConv>,
    /// In [`crate::Points`] level order.
    pub heads: Vec<FoldedHead>,
}

/// Folds inference BatchNorm `y = (x - mean) * gamma / sqrt(var + epsilon) + beta`
/// into the bias-free conv `weight` it follows (`[out, ...]`, the same
/// number of values per output channel): scales each output channel's
/// weights and returns the bias.
pub(crate) fn fold_batch_norm(weight: &mut [f32], [gamma, beta, mean, var]: [&[f32]; 4], epsilon: f32) -> Vec<f32> {
    let per_out = weight.len() / gamma.len();
    weight
        .chunks_mut(per_out)
        .enumerate()
        .map(|(o, taps)| {
            let scale = gamma[o] / (var[o] + epsilon).sqrt();
            taps.iter_mut().for_each(|w| *w *= scale);
            beta[o] - mean[o] * scale
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_scales_each_output_channel_and_moves_the_mean_into_the_bias() {
        // Two output channels of two taps each.
        let mut weight = [1.0, 2.0, -1.0, 0.5];
        // Channel 0: scale 2 / sqrt(3 + 1) = 1, bias 0.5 - 4 * 1 = -3.5.
        // Channel 1: scale 3 / sqrt(0 + 1) = 3, bias 1 - 2 * 3 = -5.
        let bias = fold_batch_norm(&mut weight, [&[2.0, 3.0], &[0.5, 1.0], &[4.0, 2.0], &[3.0, 0.0]], 1.0);
        assert_eq!(weight, [1.0, 2.0, -3.0, 1.5]);
        assert_eq!(bias, [-3.5, -5.0]);
    }
}
