//! Burn's side of the weights file: grin-net reads and writes it (its own
//! tests hold the checks); here, that Burn agrees with grin-net's layout.

use super::*;
use crate::detector::InitDetector;
use burn::backend::NdArray;
use grin_net::ModelConfig;

type B = NdArray<f32>;

fn spec(top_down: bool, fine_head: usize) -> DetectorSpec {
    let model = ModelConfig { width_mult: 0.25, top_down, fine_head, ..ModelConfig::default() };
    DetectorSpec { model, width: 64, height: 48, channels: 1 }
}

/// grin-net writes Burn's record without Burn: the bytes Burn's own
/// recorder writes for the same model, for every shape of detector a
/// config may ask for.
#[test]
fn burn_writes_what_grin_net_writes() {
    for spec in [spec(false, 0), spec(true, 0), spec(true, 8)] {
        let model = spec.init_seeded::<B>(5, &Default::default());
        let burns = Recorder::<B>::record(&Bytes, model.clone().into_record(), ()).unwrap();
        assert!(burns == grin_net::file::record(&model.weights(&spec)), "{:?}", spec.model);
    }
}

/// A model written and read back is the same model, and the same file.
#[test]
fn a_fresh_model_loads_back_with_the_same_spec_and_weights() {
    let spec = spec(true, 0);
    let model = spec.init_seeded::<B>(7, &Default::default());
    let bytes = to_bytes(&spec, &model);
    let (spec2, model2) = from_bytes::<B>(&bytes, &Default::default()).unwrap();
    assert_eq!(spec2, spec);
    assert!(model2.weights(&spec2) == model.weights(&spec));
    assert_eq!(to_bytes(&spec2, &model2), bytes);
}

/// The shipped model through Burn and back: the same file byte for byte
/// (its parameter ids too).
#[test]
fn the_shipped_model_round_trips_through_burn() {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/default.grin");
    let (spec, model) = load_model::<B>(&shipped, &Default::default()).unwrap();
    assert!(to_bytes(&spec, &model) == std::fs::read(&shipped).unwrap());
}
