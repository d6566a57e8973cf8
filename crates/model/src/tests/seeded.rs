//! `grin_model::seeded`: a seeded model's weights depend on its seed alone.
//! A test binary of its own: the other tests of this crate draw from Burn's
//! generator without seeding it (fresh models, random inputs), which no lock
//! of grin's can keep out of a seeding.

use crate::Detector;
use crate::InitDetector;
use burn::backend::NdArray;
use burn::module::{Module, Param};
use burn::tensor::Tensor;
use grin_net::{DetectorSpec, ModelConfig};

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
                        crate::seeded::<B, _>(device, seed, || spec.init::<B>(device).folded(spec));
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
