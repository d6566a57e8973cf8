//! What the training tests share: a short CPU run of a half-width detector.

use grin_features::FeatureConfig;
use grin_model::{ModelConfig, TrainBackend};
use grin_train::backend::Cpu;
use grin_train::{build_feed, train, FeedPlan, Mode, RunSpec, Summary, TrainConfig};
use std::path::Path;

/// Trains on the fly in `dir/name` and returns the run, its summary and the
/// loss of every logged interval (from metrics.csv).
#[allow(dead_code)] // Each test binary compiles this module; not all train on the CPU alone.
pub fn short_run(
    name: &str,
    dir: &Path,
    features: &FeatureConfig,
    train_cfg: TrainConfig,
) -> (RunSpec, Summary, Vec<f32>) {
    short_run_on::<Cpu>(name, dir, features, train_cfg, "cpu", &Default::default())
}

/// [`short_run`] on backend `B`'s `device`.
pub fn short_run_on<B: TrainBackend>(
    name: &str,
    dir: &Path,
    features: &FeatureConfig,
    train_cfg: TrainConfig,
    backend: &str,
    device: &B::Device,
) -> (RunSpec, Summary, Vec<f32>) {
    let run = RunSpec {
        name: name.into(),
        run_dir: dir.join(name),
        features: features.clone(),
        model: ModelConfig { width_mult: 0.5, ..ModelConfig::default() },
        train: train_cfg,
        mode: Mode::OnTheFly,
        backend: backend.into(),
        resume: false,
        overwrite: false,
        config_toml: String::new(),
        show_progress: false,
        evaluate: true,
        stop: None,
        balance: None,
    };
    let plan = FeedPlan { prefetch: 2, ..FeedPlan::new(Mode::OnTheFly, features, &run.train, None) };
    let summary = train::<B>(&run, device, |start| build_feed(&plan, device, start)).unwrap();
    let csv = std::fs::read_to_string(run.run_dir.join("metrics.csv")).unwrap();
    let losses = csv.lines().skip(1).map(|l| l.split(',').nth(1).unwrap().parse().unwrap()).collect();
    (run, summary, losses)
}
