use super::*;
use burn::backend::NdArray;
use burn::tensor::Distribution;
use grin_net::ModelConfig;
use grin_terms::output::OUTPUTS;

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
    let head = wider.folded(&wide_spec).heads.swap_remove(0);
    let new_mix = head.convs[1].weight[tap * tap..].to_vec();
    assert!(new_mix.iter().any(|w| *w != 0.0));
    let out = &head.convs[2];
    assert!((0..OUTPUTS).all(|o| out.weight[o * (tap + 28) + tap..][..28].iter().all(|w| *w == 0.0)));

    // Narrowing, or a head over another tap, is refused.
    let err = wider.with_fine_head_of(spec.init(&device)).err().unwrap();
    assert_eq!(
        err,
        format!("a stride-8 head of {tap} -> {} channels cannot widen into one of {tap} -> {tap}", tap + 28)
    );
}

#[test]
fn a_grey_model_split_into_colour_computes_what_it_did_on_the_luma() {
    let device = Default::default();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets/default.grin");
    let (spec, grey) = crate::file::load_model::<NdArray<f32>>(&shipped, &device).unwrap();
    assert_eq!(spec.channels, 1);
    let shares = [0.2126, 0.7152, 0.0722];
    let colour = grey.clone().with_colour_input(shares).unwrap();
    assert_eq!(colour.num_params(), grey.num_params() + 2 * spec.widths()[0] * 9);
    let rgb = Tensor::<NdArray<f32>, 4>::random([2, 3, spec.height, spec.width], Distribution::Default, &device);
    let luma = (0..3).map(|c| rgb.clone().narrow(1, c, 1).mul_scalar(shares[c])).reduce(|a, b| a + b).unwrap();
    let (before, after) = (grey.forward(luma).raw, colour.forward(rgb).raw);
    let worst = (before - after).abs().max().into_scalar();
    assert!(worst < 1e-3, "the colour model's outputs moved by {worst}");
    // A model that reads colour already has no grey conv to split.
    assert!(colour.with_colour_input(shares).is_none());
}
