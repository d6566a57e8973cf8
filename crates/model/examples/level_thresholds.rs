//! A copy of a model that uses a face-score threshold per output level:
//! `level_thresholds MODEL OUT T8,T16,T32` folds the thresholds into each
//! head's face bias ([`grin_model::Detector::shift_face_logits`]) and sets
//! the copy's own threshold to 0.5, so every tool that reads OUT (grin eval,
//! grin-detect, the ONNX export) applies T8 at stride 8, T16 at 16 and T32
//! at 32. How docs/model.md measured thresholds per level.

use std::path::Path;

fn run(args: &[String]) -> Result<(), String> {
    let [model, out, thresholds] = args else {
        return Err("usage: level_thresholds MODEL OUT T8,T16,T32 (face scores in (0, 1))".into());
    };
    let shift = grin_model::shift_for_thresholds(thresholds)?;
    let device = Default::default();
    let (mut spec, detector) =
        grin_model::load_model::<burn::backend::NdArray<f32>>(Path::new(model), &device).map_err(|e| e.to_string())?;
    spec.model.score_threshold = 0.5;
    grin_model::save_model(Path::new(out), &spec, &detector.shift_face_logits(shift))
        .map_err(|e| format!("{out}: {e}"))?;
    println!("{out}: {model} with face-score thresholds {thresholds} at strides 8, 16, 32");
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(why) = run(&args) {
        eprintln!("level_thresholds: {why}");
        std::process::exit(2);
    }
}
