use super::*;
use crate::layers::conv_out;
use burn::backend::NdArray;

#[test]
fn the_folded_walk_has_the_layers_taps_and_cost_of_the_model() {
    let spec = DetectorSpec { model: ModelConfig::default(), width: 96, height: 64, channels: 1 };
    let model = spec.init::<NdArray<f32>>(&Default::default());
    let folded = model.folded();
    // Stem, then (depthwise, pointwise) per block; blocks 3, 5 and 7 are tapped.
    assert_eq!(folded.trunk.len(), 17);
    assert_eq!(folded.heads.iter().map(|h| h.after).collect::<Vec<_>>(), [8, 12, 16]);
    let channels: Vec<usize> = folded.trunk.iter().map(|c| c.out_channels).collect();
    assert_eq!(channels, [16, 16, 32, 32, 32, 32, 48, 48, 48, 48, 80, 80, 80, 80, 112, 112, 112]);
    // Counted on the plain data, the cost is the model's own count.
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
    assert_eq!(macs, model.macs(64, 96));
}
