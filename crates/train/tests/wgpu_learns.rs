//! Burn's device path learns as grin's CPU step does: the same short run,
//! from the same weights and the same batches, on wgpu and on the CPU,
//! reaches the same loss and held-out AP at the same step count.
//!
//! CI runs it on Mesa's lavapipe. Without a wgpu adapter it says it
//! skipped; under `CI=true` it fails.
#![cfg(feature = "wgpu")]

mod common;

use burn::tensor::backend::Backend;
use grin_features::{FeatureConfig, SourceConfig};
use grin_model::{file, DetectorSpec, ModelConfig};
use grin_train::backend::{adapters, wgpu_devices, Cpu, Wgpu};
use grin_train::TrainConfig;

/// Steps of the run: the point where `learns.rs`'s CPU run (the same
/// recipe) has its AP well above an untrained model's and still rising.
const STEPS: usize = 400;

#[test]
fn a_short_run_on_wgpu_reaches_the_cpus_loss_and_ap() {
    if adapters::list().is_empty() {
        assert!(std::env::var_os("CI").is_none(), "CI must have a wgpu adapter ({})", adapters::NONE_FOUND);
        eprintln!("skipped: {}", adapters::NONE_FOUND);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let features = FeatureConfig {
        width: 64,
        height: 64,
        seed: 11,
        source: SourceConfig::Synthetic { max_faces: 2, min_face: 18.0, max_face: 40.0, hard_negatives: 0.5 },
        ..FeatureConfig::default()
    };
    // Both runs start from these weights, drawn on the CPU (seeds differ
    // between backends); `short_run` trains a half-width model.
    let spec = DetectorSpec {
        model: ModelConfig { width_mult: 0.5, ..ModelConfig::default() },
        width: 64,
        height: 64,
        channels: 1,
    };
    let init = dir.path().join("init.grin");
    let cpu_device = Default::default();
    <Cpu as Backend>::seed(&cpu_device, 23);
    file::save_model(&init, &spec, &spec.init::<Cpu>(&cpu_device)).unwrap();
    let train_cfg = TrainConfig {
        steps: STEPS,
        batch_size: 8,
        lr: 4e-3,
        warmup_steps: 20,
        log_every: 25,
        checkpoint_every: 0,
        eval_samples: 96,
        init: Some(init),
        ..TrainConfig::default()
    };

    let (_, cpu, cpu_losses) =
        common::short_run_on::<Cpu>("cpu", dir.path(), &features, train_cfg.clone(), "cpu", &cpu_device);
    let gpu_device = wgpu_devices(&[0]).unwrap().remove(0);
    let (_, gpu, gpu_losses) =
        common::short_run_on::<Wgpu>("wgpu", dir.path(), &features, train_cfg, "wgpu", &gpu_device);

    // The last four logged intervals: single rows of batch 8 are noisy.
    let tail = |l: &[f32]| l[l.len() - 4..].iter().sum::<f32>() / 4.0;
    let (cpu_loss, gpu_loss) = (tail(&cpu_losses), tail(&gpu_losses));
    let (cpu_ap, gpu_ap) = (cpu.face_ap.expect("scored"), gpu.face_ap.expect("scored"));
    eprintln!(
        "after {STEPS} steps: loss cpu {cpu_loss:.4} wgpu {gpu_loss:.4} (first {:.4} / {:.4}); AP cpu {cpu_ap:.3} wgpu {gpu_ap:.3}; \
         {:.2} vs {:.2} steps/s",
        cpu_losses[0], gpu_losses[0], cpu.steps_per_s, gpu.steps_per_s
    );
    // The first interval's loss is the same model on the same batches: the
    // two step engines agree to float noise there (`wgpu_step.rs`).
    assert!((cpu_losses[0] - gpu_losses[0]).abs() <= 0.02 * cpu_losses[0], "first interval differs");
    // Then the runs part as rounding differences grow through the steps,
    // like two CPU runs (not bit-deterministic either, `learns.rs`). The
    // margin: within 15% of the CPU's loss and 0.1 of its AP on 96 scenes,
    // while the run itself moves the loss by a factor of about 2 and AP
    // by over 0.3 (`learns.rs`): a step that were wrong would not land there.
    assert!((gpu_loss - cpu_loss).abs() <= 0.15 * cpu_loss, "loss: cpu {cpu_loss}, wgpu {gpu_loss}");
    assert!((gpu_ap - cpu_ap).abs() <= 0.1, "AP: cpu {cpu_ap}, wgpu {gpu_ap}");
    assert!(gpu_loss < 0.75 * gpu_losses[0], "wgpu's loss should fall: {gpu_losses:?}");
}
