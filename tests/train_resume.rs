//! A CPU run killed with SIGKILL and resumed ends where an uninterrupted run
//! ends: same data order, same optimizer state, same weights.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GRIN: &str = env!("CARGO_BIN_EXE_grin");

fn write_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tiny.toml");
    std::fs::write(
        &path,
        r#"name = "tiny"
[features]
width = 64
height = 64
seed = 5
[features.source]
kind = "synthetic"
max_faces = 2
min_face = 18
max_face = 40
[model]
width_mult = 0.5
[train]
steps = 80
batch_size = 4
log_every = 10
checkpoint_every = 10
eval_samples = 8
"#,
    )
    .unwrap();
    path
}

fn train(config: &Path, runs: &Path, name: &str, resume: bool) -> std::process::Child {
    let mut cmd = Command::new(GRIN);
    cmd.args(["train", "--backend", "cpu", "--quiet", "--config"])
        .arg(config)
        .args(["--name", name, "--runs-dir"])
        .arg(runs)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if resume {
        cmd.arg("--resume");
    }
    cmd.spawn().unwrap()
}

fn weights(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn killed_run_resumes_to_the_same_end() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let runs = dir.path().join("runs");

    assert!(train(&config, &runs, "straight", false).wait().unwrap().success());

    // Kill -9 as soon as the first checkpoint is on disk.
    let mut child = train(&config, &runs, "crashy", false);
    let checkpoint = runs.join("crashy/checkpoint.ckpt");
    let started = Instant::now();
    while !checkpoint.exists() {
        assert!(started.elapsed() < Duration::from_secs(300), "no checkpoint written");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!runs.join("crashy/summary.json").exists(), "the run finished before it could be killed");

    assert!(train(&config, &runs, "crashy", true).wait().unwrap().success());

    // Same weights to the bit: the header names the run-independent spec only.
    assert_eq!(weights(&runs.join("straight/model.grin")), weights(&runs.join("crashy/model.grin")));
    let rows = |name: &str| {
        let csv = std::fs::read_to_string(runs.join(name).join("metrics.csv")).unwrap();
        csv.lines().map(|l| l.split(',').take(5).collect::<Vec<_>>().join(",")).collect::<Vec<_>>()
    };
    assert_eq!(rows("straight"), rows("crashy"), "losses per interval must match");
}
