//! Short runs learn. A tiny detector on procedural scenes: loss falls and
//! held-out AP rises far above an untrained model's, on the validation
//! scenes during training (`train.eval_every`) as on the test scenes at the
//! end. A short run on real photos (Caltech WebFaces crops and CelebA
//! portraits) learns and is scored on whole held-out photos at a larger run
//! size; it needs `../shared/data` beside the repository and skips, saying
//! so, without it. One test binary for both: each links Burn, about 100 s of
//! CI's release build apiece.

use crate::common;
use grin_model::InitDetector;

#[path = "../../features/src/shared_data.rs"]
mod shared_data;

use grin_features::{FeatureConfig, PhotoCrops, SourceConfig, SplitConfig};
use grin_model::file;
use grin_train::scenes::evaluate;
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

#[test]
fn short_run_on_real_crops_learns_and_scores_whole_photos() {
    let Some(data) = shared_data::shared_data() else { return };
    let celeba = data.join("celeba-smile-10k");
    let crops = PhotoCrops { min_face: 20.0, max_face: 60.0, ..PhotoCrops::default() };
    let features = FeatureConfig {
        width: 96,
        height: 72,
        seed: 5,
        split: SplitConfig::default(),
        source: SourceConfig::Mix {
            weights: vec![0.5, 0.5],
            parts: vec![
                SourceConfig::Caltech { root: data.join("caltech-webfaces"), crops: crops.clone() },
                SourceConfig::CelebaAligned {
                    images: celeba.join("images"),
                    attr: celeba.join("list_attr_celeba_000001-010000.txt"),
                    crops,
                },
            ],
        },
        ..FeatureConfig::default()
    };
    let train_cfg = TrainConfig {
        steps: 400,
        batch_size: 8,
        lr: 4e-3,
        warmup_steps: 20,
        log_every: 20,
        checkpoint_every: 0,
        eval_samples: 0,
        eval_photos: 40,
        run_size: Some([160, 120]),
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let (run, summary, losses) = common::short_run("real", dir.path(), &features, train_cfg);
    let device = Default::default();
    let first = losses[..2].iter().sum::<f32>() / 2.0;
    let last = losses[losses.len() - 4..].iter().sum::<f32>() / 4.0;
    eprintln!("loss first {first:.3}, last {last:.3}");
    for r in &summary.photos {
        eprintln!("{}", grin_train::photos::describe(r));
    }
    assert!(last < 0.8 * first, "loss should fall on real crops: first {first}, last {last}");

    // Scored on whole photos of both sources, at the run size, which is
    // also the size model.grin says it runs at.
    let names: Vec<&str> = summary.photos.iter().map(|r| r.source.as_str()).collect();
    assert_eq!(names, ["caltech", "celeba-aligned"]);
    for r in &summary.photos {
        assert_eq!(r.images, 40);
        assert!(r.faces > 0 && r.face_ap.is_some());
        assert_eq!(r.recall_by_size.iter().map(|s| s.faces).sum::<usize>(), r.faces);
    }
    let portraits = &summary.photos[1];
    assert!(portraits.found.is_some() && portraits.smile_faces > 0);
    // 400 tiny steps find some of the big portrait faces already.
    assert!(portraits.face_ap.unwrap() > 0.05, "portrait AP {:?}", portraits.face_ap);
    let (spec, _) = file::load_model::<burn_ndarray::NdArray<f32>>(&run.run_dir.join("model.grin"), &device).unwrap();
    assert_eq!((spec.width, spec.height), (160, 120));
    assert!(run.run_dir.join("pr_curve.svg").exists());
}
