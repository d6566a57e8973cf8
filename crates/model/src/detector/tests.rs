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

#[test]
fn a_seeded_model_draws_the_same_weights_whatever_draws_beside_it() {
    type B = NdArray<f32>;
    let device = Default::default();
    let spec = DetectorSpec { model: ModelConfig::default(), width: 64, height: 48, channels: 1 };
    // The values, not the record: Burn gives each parameter a new id.
    let weights = |model: &Detector<B>| {
        struct Values(Vec<f32>);
        impl burn::module::ModuleVisitor<B> for Values {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                self.0.extend(param.val().into_data().iter::<f32>());
            }
        }
        let mut values = Values(Vec::new());
        model.visit(&mut values);
        values.0
    };
    let alone = weights(&spec.init_seeded::<B>(7, &device));
    // Other "runs" seed and draw from the same generator meanwhile, as the
    // in-VRAM feed does every batch; and a lazily drawn model would take
    // its weights from whichever seed came last.
    let (spec, device) = (&spec, &device);
    let beside = std::thread::scope(|s| {
        let others: Vec<_> = (0..3u64)
            .map(|i| {
                s.spawn(move || {
                    for step in 0..50 {
                        let seed = 100 + 10 * i + step;
                        crate::seeded::<B, _>(device, seed, || spec.init::<B>(device).folded());
                    }
                })
            })
            .collect();
        let mine: Vec<_> = (0..20).map(|_| weights(&spec.init_seeded::<B>(7, device))).collect();
        others.into_iter().for_each(|t| t.join().unwrap());
        mine
    });
    assert!(beside.iter().all(|w| *w == alone), "a seeded model's weights moved with the draws beside it");
    assert_ne!(weights(&spec.init_seeded::<B>(8, device)), alone, "another seed, other weights");
}
