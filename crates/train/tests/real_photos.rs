//! A short run on real photos (Caltech WebFaces crops and CelebA portraits)
//! learns, and is scored on whole held-out photos at a larger run size.
//! Needs `../shared/data` beside the repository; skips, saying so, without it.

mod common;

#[path = "../../features/tests/shared_data/mod.rs"]
mod shared_data;

use grin_features::{FeatureConfig, PhotoCrops, SourceConfig, SplitConfig};
use grin_model::file;
use grin_train::TrainConfig;

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
        eprintln!("{}", grin_train::photo_eval::describe(r));
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
