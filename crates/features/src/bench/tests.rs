//! The measurement code behind `grin features bench` (and the trainer's
//! balance check), and the preview contact sheet.

use crate::augment::AugmentStage;
use crate::bench::{measure_stages, measure_tg, measure_throughput, open_source, Timing};
use crate::{colour, contact_sheet};
use crate::{FaceBox, FeatureConfig, Pipeline, Sample, Smile, SourceConfig, Split, SplitConfig};

fn small_config(workers: usize) -> FeatureConfig {
    FeatureConfig { width: 96, height: 64, workers, ..FeatureConfig::default() }
}

#[test]
fn timing_order_statistics() {
    let t = Timing::from_durations((1..=100).rev().map(|i| i as f64).collect());
    // grin_terms' median (the mean of the two middle values) and nearest-rank p95.
    assert_eq!((t.median_s, t.p95_s, t.min_s, t.samples), (50.5, 95.0, 1.0, 100));
    assert!((t.mean_s - 50.5).abs() < 1e-9);
    assert_eq!(Timing::from_durations(vec![]).samples, 0);
}

#[test]
fn tg_stages_and_throughput_are_measured() {
    let pipeline = Pipeline::new(&small_config(1), Split::Train).unwrap();
    let tg = measure_tg(&pipeline, 20).unwrap();
    assert_eq!(tg.samples, 20);
    assert!(tg.warmup >= 3);
    assert!(tg.median_s > 0.0 && tg.median_s <= tg.p95_s, "{tg:?}");

    let cfg = small_config(1);
    let opened = open_source(&cfg, Split::Train).unwrap();
    let stages = measure_stages(opened.source.as_ref(), &cfg.augment, cfg.seed, 10).unwrap();
    assert_eq!(stages[0].stage, "source:synthetic");
    let names: Vec<&str> = stages[1..].iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(names, AugmentStage::ALL.map(AugmentStage::name));
    assert!(stages.iter().all(|s| s.timing.samples == 10 && s.timing.median_s >= 0.0));
    // Probabilities are the configured ones, reported next to the cost per application.
    let flip = stages.iter().find(|s| s.stage == "flip").unwrap();
    assert_eq!(flip.probability, cfg.augment.flip);

    let par = Pipeline::new(&small_config(2), Split::Train).unwrap();
    let t = measure_throughput(&par, 40, 8).unwrap();
    assert_eq!((t.workers, t.samples), (2, 40));
    assert!(t.samples_per_s > 0.0 && (t.per_core - t.samples_per_s / 2.0).abs() < 1e-9);
    let total: f64 = t.class_fractions.iter().sum();
    assert!((total - 1.0).abs() < 1e-9, "{:?}", t.class_fractions);
}

#[test]
fn crops_source_is_benchmarked_through_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    for (folder, v) in [("smile", 220u8), ("no_smile", 30u8)] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        for i in 0..4 {
            image::GrayImage::from_pixel(64, 64, image::Luma([v]))
                .save(dir.path().join(folder).join(format!("{i}.png")))
                .unwrap();
        }
    }
    let cfg = FeatureConfig {
        width: 128,
        height: 96,
        workers: 1,
        source: SourceConfig::Crops {
            root: dir.path().into(),
            max_faces: 3,
            min_face: 16.0,
            max_face: 48.0,
            rotation_deg: 15.0,
            backgrounds: None,
        },
        split: SplitConfig { train: 1.0, val: 0.0, test: 0.0 },
        ..FeatureConfig::default()
    };
    let opened = open_source(&cfg, Split::Train).unwrap();
    assert_eq!(opened.load_skips.total(), 0);
    let pipeline = Pipeline::from_source(&cfg, Split::Train, opened.source).unwrap();
    let tg = measure_tg(&pipeline, 10).unwrap();
    assert!(tg.median_s > 0.0);
    let t = measure_throughput(&pipeline, 16, 4).unwrap();
    assert!(t.class_fractions[2] < 1.0, "some scenes have faces: {:?}", t.class_fractions);
}

#[test]
fn contact_sheet_draws_samples_and_coloured_boxes() {
    let mut samples = Vec::new();
    for (i, smile) in [Smile::Yes, Smile::No, Smile::Unknown].into_iter().enumerate() {
        let b = FaceBox { x0: 10.0, y0: 8.0, x1: 30.0, y1: 28.0, smile };
        samples.push(Sample {
            width: 40,
            height: 32,
            channels: 1,
            pixels: vec![60 + i as u8; 40 * 32],
            boxes: vec![b],
        });
    }
    let sheet = contact_sheet(&samples, 2);
    // Two columns, two rows of 40x32 cells with 4 px margins.
    assert_eq!(sheet.dimensions(), (2 * 44 + 4, 2 * 36 + 4));
    let cell = |k: u32| (4 + (k % 2) * 44, 4 + (k / 2) * 36);
    for (k, smile) in [Smile::Yes, Smile::No, Smile::Unknown].into_iter().enumerate() {
        let (ox, oy) = cell(k as u32);
        // Box outline at its bottom-right corner, image pixel in the middle of the cell's edge.
        assert_eq!(*sheet.get_pixel(ox + 29, oy + 27), colour(smile));
        assert_eq!(sheet.get_pixel(ox + 35, oy + 2).0, [60 + k as u8; 3]);
    }
}
