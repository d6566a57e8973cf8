use super::*;
use crate::folded::FoldedConv;
use crate::layers::conv_out;
use burn::backend::NdArray;
use burn::tensor::Distribution;
use grin_terms::output::OUTPUTS;

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

#[test]
fn a_widened_fine_head_computes_what_the_narrow_one_did() {
    // The shipped model: trained weights and running statistics, fusion on.
    let device = Default::default();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/default.grin");
    let (spec, narrow) = crate::file::load_model::<NdArray<f32>>(&shipped, &device).unwrap();
    let tap = spec.widths()[2];
    let wide_spec = DetectorSpec { model: ModelConfig { fine_head: tap + 28, ..spec.model.clone() }, ..spec.clone() };
    assert_eq!(wide_spec.head_widths(), [tap + 28, spec.widths()[3], spec.widths()[4]]);
    let wider = narrow.clone().with_fine_head_of(wide_spec.init_seeded(3, &device)).unwrap();
    // Per new channel: its mixing weights, BatchNorm's four values, its output weights.
    assert_eq!(wider.num_params(), narrow.num_params() + 28 * (tap + 4 + OUTPUTS));
    let x = Tensor::<NdArray<f32>, 4>::random([2, 1, spec.height, spec.width], Distribution::Default, &device);
    let (before, after) = (narrow.forward(x.clone()).raw, wider.forward(x).raw);
    let worst = (before - after).abs().max().into_scalar();
    assert!(worst < 1e-4, "the widened model's outputs moved by {worst}");
    // The new channels are live (drawn, not zero) but have no say yet.
    let new_mix = wider.heads[0].folded()[1].weight[tap * tap..].to_vec();
    assert!(new_mix.iter().any(|w| *w != 0.0));
    let out = &wider.heads[0].folded()[2];
    assert!((0..OUTPUTS).all(|o| out.weight[o * (tap + 28) + tap..][..28].iter().all(|w| *w == 0.0)));

    // Narrowing, or a head over another tap, is refused.
    let err = wider.with_fine_head_of(spec.init(&device)).err().unwrap();
    assert_eq!(
        err,
        format!("a stride-8 head of {tap} -> {} channels cannot widen into one of {tap} -> {tap}", tap + 28)
    );
}
