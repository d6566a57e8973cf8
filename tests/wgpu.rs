//! `grin train --backend wgpu` through the real binary: every feeding mode,
//! two devices on one adapter, and refusals in one line. CI runs it on
//! Mesa's lavapipe; without a wgpu adapter it says it skipped, and fails
//! under `CI=true`.
#![cfg(feature = "wgpu")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GRIN: &str = env!("CARGO_BIN_EXE_grin");

fn adapter_present(test: &str) -> bool {
    if !grin_train::backend::adapters::list().is_empty() {
        return true;
    }
    let none = grin_train::backend::adapters::NONE_FOUND;
    assert!(std::env::var_os("CI").is_none(), "{test}: CI must have a wgpu adapter ({none})");
    eprintln!("{test}: skipped, {none}");
    false
}

/// A tiny run whose precomputed store lives in `dir/store`.
fn write_config(dir: &Path) -> PathBuf {
    let path = dir.join("tiny.toml");
    let store = dir.join("store");
    let text = format!(
        "name = \"tiny\"\n[features]\nwidth = 64\nheight = 48\nseed = 5\n[features.source]\nkind = \"synthetic\"\n\
         max_faces = 2\nmin_face = 12\nmax_face = 36\n[model]\nwidth_mult = 0.5\n[train]\nsteps = 6\nbatch_size = 4\n\
         log_every = 3\ncheckpoint_every = 0\neval_samples = 8\nstore = {:?}\nstore_samples = 64\n",
        store.display().to_string()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn train(config: &Path, runs: &Path, name: &str, extra: &[&str]) -> Output {
    Command::new(GRIN)
        .args(["train", "--backend", "wgpu", "--quiet", "--config"])
        .arg(config)
        .args(["--name", name, "--runs-dir"])
        .arg(runs)
        .args(extra)
        .output()
        .expect("run grin")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn summary(runs: &Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(runs.join(name).join("summary.json")).unwrap()).unwrap()
}

#[test]
fn every_mode_trains_on_wgpu_with_the_balance_check_timed_there() {
    if !adapter_present("every_mode_trains_on_wgpu_with_the_balance_check_timed_there") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let runs = dir.path().join("runs");
    let out = Command::new(GRIN)
        .args(["precompute", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.path().join("store"))
        .args(["--samples", "64"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for mode in ["on-the-fly", "precomputed", "in-vram", "auto"] {
        let out = train(&config, &runs, mode, &["--mode", mode]);
        let e = stderr(&out);
        assert!(out.status.success(), "{mode}: {e}");
        assert!(e.contains("backend wgpu (asked for; device 0: "), "{mode}: {e}");
        assert!(e.contains("balance check on wgpu"), "{mode}: {e}");
        let s = summary(&runs, mode);
        assert_eq!(s["backend"], "wgpu", "{mode}");
        assert_eq!(s["steps"], 6, "{mode}");
        if mode != "auto" {
            assert_eq!(s["mode"], mode, "{e}");
        }
        if mode == "in-vram" {
            assert!(e.contains("in-vram: uploading 64 samples"), "{e}");
        }
        let figures = &s["balance"]["figures"];
        for term in ["ts_s", "ti_s", "tu_s", "tc_s"] {
            assert!(figures[term].as_f64().unwrap() > 0.0, "{mode}: {term} in {figures}");
        }
        assert!(s["final_loss"].as_f64().unwrap().is_finite(), "{mode}");
        assert!(s["face_ap"].as_f64().is_some(), "{mode}: scored on the held-out scenes");
        assert!(runs.join(mode).join("model.grin").exists(), "{mode}");
    }
}

#[test]
fn two_devices_on_one_adapter_train_data_parallel() {
    if !adapter_present("two_devices_on_one_adapter_train_data_parallel") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let runs = dir.path().join("runs");
    let out = train(&config, &runs, "two", &["--mode", "on-the-fly", "--devices", "0,0", "--no-balance"]);
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    assert!(e.contains("data-parallel over 2 devices"), "{e}");
    assert!(summary(&runs, "two")["final_loss"].as_f64().unwrap().is_finite());
}

#[test]
fn a_missing_adapter_or_device_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let runs = dir.path().join("runs");
    // No Vulkan driver at all: the loader is pointed at a driver list that does not exist.
    let out = Command::new(GRIN)
        .args(["train", "--backend", "wgpu", "--quiet", "--config"])
        .arg(&config)
        .arg("--runs-dir")
        .arg(&runs)
        .env("VK_DRIVER_FILES", dir.path().join("none.json"))
        .env("VK_ICD_FILENAMES", dir.path().join("none.json"))
        .output()
        .unwrap();
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    let errors: Vec<&str> = e.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors, ["error: --backend wgpu: no wgpu adapter found (Vulkan, Metal or DX12); on Linux install a Vulkan driver (Debian: mesa-vulkan-drivers; its CPU driver, lavapipe, works without a GPU)"], "{e}");
    assert!(!e.contains("panicked"), "{e}");

    if !adapter_present("a_missing_adapter_or_device_is_one_line_and_exit_2") {
        return;
    }
    let out = train(&config, &runs, "far", &["--devices", "0,9"]);
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("error: --devices 9: there are ") && e.contains("wgpu adapter(s): 0: "), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// Kernel launches of one training step at 160x120, the gpu-bench frame
/// (`grin bench step --launches`, CubeCL's launch log): the step itself
/// (forward, loss, backward, AdamW) and the in-VRAM feed's batch cut. On a
/// GPU the step is bound by the host's cost per launch
/// (docs/benchmarks.md), so a change that adds launches fails here. The
/// step's count is the same at every batch size: lower the budget as
/// launches go, never raise it.
const STEP_LAUNCHES: f64 = 141.0;
/// The step and the batch cut together (the cut is Burn's ops: 56 today).
const ALL_LAUNCHES: f64 = 200.0;

#[test]
fn a_training_step_at_160x120_stays_within_its_launch_budget() {
    if !adapter_present("a_training_step_at_160x120_stays_within_its_launch_budget") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("launches.toml");
    // Half width: lavapipe steps faster, and a layer is as many launches at any width.
    let text = "name = \"launches\"\n[features]\nwidth = 160\nheight = 120\nseed = 5\n[features.source]\n\
                kind = \"synthetic\"\n[model]\nwidth_mult = 0.5\n[train]\nbatch_size = 16\n";
    std::fs::write(&config, text).unwrap();
    for batch in [16, 64] {
        let json = dir.path().join(format!("step-{batch}.json"));
        let out = Command::new(GRIN)
            .args(["bench", "step", "--backend", "wgpu", "--launches", "--warmup", "1", "--steps", "1"])
            .args(["--repeats", "1", "--samples", "128", "--set", &format!("train.batch_size={batch}"), "--config"])
            .arg(&config)
            .arg("--store")
            .arg(dir.path().join("store"))
            .arg("--json")
            .arg(&json)
            .output()
            .expect("run grin");
        assert!(out.status.success(), "batch {batch}: {}", stderr(&out));
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let launches = &report["launches"];
        let (step, cut) = (launches["step_per_step"].as_f64().unwrap(), launches["batch_per_step"].as_f64().unwrap());
        eprintln!("batch {batch}: {step} launches in the step, {cut} cutting the batch");
        assert!(
            step <= STEP_LAUNCHES,
            "batch {batch}: {step} launches in the step, over its budget of {STEP_LAUNCHES}: {launches}"
        );
        assert!(
            step + cut <= ALL_LAUNCHES,
            "batch {batch}: {} launches with the batch cut, over {ALL_LAUNCHES}",
            step + cut
        );
    }
}
