//! A tiny detector really learns: loss falls and held-out AP rises far
//! above an untrained model's, on the validation scenes during training
//! (`train.eval_every`) as on the test scenes at the end.

mod common;

use grin_train::eval::evaluate;
use grin_train::TrainConfig;

#[test]
fn loss_falls_and_ap_rises() {
    let dir = tempfile::tempdir().unwrap();
    let features = common::tiny_features();
    let train_cfg = TrainConfig { eval_every: 250, ..common::tiny_train(1000) };
    let (run, summary, losses) = common::short_run("tiny", dir.path(), &features, train_cfg);
    let device = Default::default();
    assert_eq!(losses.len(), 40, "one row per 25 steps");
    let first = losses[0];
    // Batches of 8 make single rows noisy; CPU Burn is not bit-deterministic
    // either, so the bounds leave room (measured over 4 runs: last/first 0.54-0.56, AP 0.75-0.84).
    let last = losses[losses.len() - 4..].iter().sum::<f32>() / 4.0;
    assert!(last < 0.7 * first, "loss should fall: first {first}, last {last}");

    let spec = run.detector_spec();
    let untrained = spec.init::<burn_ndarray::NdArray<f32>>(&device);
    let before = evaluate(&untrained, &spec, &features, 96, &device).unwrap().face_ap.expect("scenes hold faces");
    let after = summary.run.face_ap.expect("evaluated");
    // Printed so that a failure in CI shows how far off it was.
    eprintln!("loss last/first {:.3}, AP {after:.3} (untrained {before:.3})", last / first);
    assert!(after > before + 0.3 && after > 0.4, "AP {after} should rise well above untrained {before}");
    assert!(run.run_dir.join("model.grin").exists() && run.run_dir.join("training.svg").exists());

    // Validation AP in metrics.csv on the rows at each multiple of eval_every, empty elsewhere.
    let csv = std::fs::read_to_string(run.run_dir.join("metrics.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|&c| c == "val_face_ap").expect("val_face_ap column");
    let mut val = Vec::new();
    for line in csv.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        let step: usize = cells[0].parse().unwrap();
        match (step.is_multiple_of(250), cells[col]) {
            (true, ap) => val.push(ap.parse::<f32>().unwrap_or_else(|_| panic!("step {step}: {line}"))),
            (false, ap) => assert!(ap.is_empty(), "step {step} scored off the interval: {line}"),
        }
    }
    eprintln!("validation AP at 250, 500, 750, 1000: {val:?}");
    assert_eq!(val.len(), 4, "{csv}");
    assert!(val.iter().all(|ap| (0.0..=1.0).contains(ap)), "{val:?}");
    assert!(val[3] > before + 0.3, "validation AP {val:?} should rise well above untrained {before}");
    // The summary records the loaders that really ran (the feature workers)
    // and one loader's time per batch, which is what `grin simulate` models.
    let workers = grin_features::Pipeline::new(&features, grin_features::Split::Train).unwrap().workers();
    assert_eq!(summary.run.loaders, workers);
    let per_loader = summary.run.produce_ms_per_batch * workers as f64;
    assert!((summary.run.load_ms_per_batch - per_loader).abs() < 1e-9 && per_loader > 0.0, "{summary:?}");
}
