//! What the training tests share: a short CPU run of a half-width detector.

use grin_features::{FeatureConfig, SourceConfig};
use grin_net::ModelConfig;
use grin_train::backend::{BackendChoice, Cpu};
use grin_train::TrainBackend;
use grin_train::{build_feed, train, FeedPlan, Mode, RunSpec, Summary, TrainConfig};
use std::path::Path;

/// The tiny learning recipe the learning tests share: 64x64 synthetic
/// scenes of one or two faces.
#[allow(dead_code)] // Each test binary compiles this module; not all learn.
pub(crate) fn tiny_features() -> FeatureConfig {
    FeatureConfig {
        width: 64,
        height: 64,
        seed: 11,
        source: SourceConfig::Synthetic { max_faces: 2, min_face: 18.0, max_face: 40.0, hard_negatives: 0.5 },
        ..FeatureConfig::default()
    }
}

/// ... trained `steps` steps of batch 8, logged every 25, scored on 96
/// held-out scenes at the end.
#[allow(dead_code)]
pub(crate) fn tiny_train(steps: usize) -> TrainConfig {
    TrainConfig {
        steps,
        batch_size: 8,
        lr: 4e-3,
        warmup_steps: 20,
        log_every: 25,
        checkpoint_every: 0,
        eval_samples: 96,
        ..TrainConfig::default()
    }
}

/// Trains on the fly in `dir/name` and returns the run, its summary and the
/// loss of every logged interval (from metrics.csv).
#[allow(dead_code)] // Each test binary compiles this module; not all train on the CPU alone.
pub(crate) fn short_run(
    name: &str,
    dir: &Path,
    features: &FeatureConfig,
    train_cfg: TrainConfig,
) -> (RunSpec, Summary, Vec<f32>) {
    short_run_on::<Cpu>(name, dir, features, train_cfg, BackendChoice::Cpu, &Default::default())
}

/// [`short_run`] on backend `B`'s `device`.
pub(crate) fn short_run_on<B: TrainBackend>(
    name: &str,
    dir: &Path,
    features: &FeatureConfig,
    train_cfg: TrainConfig,
    backend: BackendChoice,
    device: &B::Device,
) -> (RunSpec, Summary, Vec<f32>) {
    let run = RunSpec {
        name: name.into(),
        run_dir: dir.join(name),
        features: features.clone(),
        model: ModelConfig { width_mult: 0.5, ..ModelConfig::default() },
        train: train_cfg,
        mode: Mode::OnTheFly,
        backend,
        resume: false,
        overwrite: false,
        config_toml: String::new(),
        show_progress: false,
        evaluate: true,
        stop: None,
        balance: None,
        data: None,
        lock: None,
    };
    let plan = FeedPlan { prefetch: 2, ..FeedPlan::new(Mode::OnTheFly, features, &run.train, None) };
    let summary = train::<B>(&run, device, &mut |start| build_feed(&plan, device, start)).unwrap();
    let csv = std::fs::read_to_string(run.run_dir.join("metrics.csv")).unwrap();
    let losses = csv.lines().skip(1).map(|l| l.split(',').nth(1).unwrap().parse().unwrap()).collect();
    (run, summary, losses)
}
