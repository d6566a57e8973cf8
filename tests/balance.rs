//! The balance check runs before every training run, whatever the mode,
//! and what it predicted lands in summary.json beside what the run measured.

use crate::common;

use common::{tiny_config, train_command, GRIN};
use std::path::Path;
use std::process::Command;

/// The tiny run, 6 steps of 4.
fn tiny(dir: &Path) -> std::path::PathBuf {
    tiny_config(dir, "tiny.toml", "steps = 6\nbatch_size = 4\nlog_every = 3\neval_samples = 4\n")
}

fn train(config: &Path, runs: &Path, name: &str, extra: &[&str]) -> (String, serde_json::Value) {
    let out = train_command(config, runs, name).args(["--mode", "on-the-fly"]).args(extra).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "grin train failed: {stderr}");
    let summary = std::fs::read_to_string(runs.join(name).join("summary.json")).unwrap();
    (stderr, serde_json::from_str(&summary).unwrap())
}

#[test]
fn an_explicit_mode_is_checked_and_the_prediction_is_kept_beside_the_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny(dir.path());
    let (stderr, summary) = train(&config, dir.path(), "checked", &[]);
    assert!(stderr.contains("balance check on cpu"), "{stderr}");
    assert!(stderr.contains("T_g/C*B = "), "{stderr}");
    // The chosen mode gets its verdict: a busy share, or a warning naming a better mode.
    assert!(
        stderr.contains("balance: on-the-fly should keep") || stderr.contains("warning: on-the-fly keeps"),
        "{stderr}"
    );
    let b = &summary["balance"];
    assert_eq!(b["mode"], "on-the-fly");
    let predicted = b["predicted_busy_pct"].as_f64().unwrap();
    assert!(predicted > 0.0 && predicted <= 100.0, "{predicted}");
    let ts = b["figures"]["ts_s"].as_f64().unwrap();
    let ti = b["figures"]["ti_s"].as_f64().unwrap();
    assert!(ts > 0.0 && ti > 0.0, "T_s {ts}, T_i {ti}");
    assert!(summary["gpu_busy_pct"].as_f64().is_some());
}

#[test]
fn no_balance_skips_the_check_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny(dir.path());
    let (stderr, summary) = train(&config, dir.path(), "unchecked", &["--no-balance"]);
    assert!(stderr.contains("balance check skipped (--no-balance)"), "{stderr}");
    assert!(!stderr.contains("balance check on"), "{stderr}");
    assert!(summary["balance"].is_null(), "{summary}");
}

#[test]
fn the_check_says_it_is_measuring_unless_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny(dir.path());
    let (quiet, _) = train(&config, dir.path(), "quiet", &[]);
    assert!(!quiet.contains("balance check: timing"), "--quiet: {quiet}");
    assert!(quiet.contains("balance check on cpu"), "--quiet silences progress, not results: {quiet}");
    // --quiet is one flag for every command, before or after the subcommand.
    let out = Command::new(GRIN)
        .args(["train", "--backend", "cpu", "--mode", "on-the-fly", "--config"])
        .arg(&config)
        .args(["--name", "talkative", "--runs-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("balance check: timing T_g on 64 scenes"), "{stderr}");
    let out = Command::new(GRIN).args(["--quiet", "eval", "--help"]).output().unwrap();
    assert!(out.status.success(), "--quiet before the subcommand: {}", String::from_utf8_lossy(&out.stderr));
}
