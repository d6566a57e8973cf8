//! A CPU run killed with SIGKILL and resumed ends where an uninterrupted run
//! ends: same data order, same optimizer state, same loss curve.
//!
//! Two uninterrupted CPU runs already differ in the last float bits (the
//! order of gradient accumulation is not fixed), and training amplifies
//! that, so "where it ends" is judged against the distance between two
//! uninterrupted runs, measured in the same test.
//!
//! A run stopped with SIGINT (Ctrl-C) or SIGTERM writes a checkpoint at the
//! step it reached, even with periodic checkpoints off, and resumes there.

use crate::common;

use common::{tiny_config, train_command, GRIN};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn write_config(dir: &Path, steps: usize, checkpoint_every: usize) -> std::path::PathBuf {
    let train = format!(
        "steps = {steps}\nbatch_size = 4\nlog_every = 10\ncheckpoint_every = {checkpoint_every}\neval_samples = 8\n"
    );
    tiny_config(dir, &format!("tiny-{steps}-{checkpoint_every}.toml"), &train)
}

fn train(config: &Path, runs: &Path, name: &str, resume: bool) -> std::process::Child {
    train_with(config, runs, name, resume, &[])
}

/// [`train`] with more flags (`--mode`, `--set`).
fn train_with(config: &Path, runs: &Path, name: &str, resume: bool, extra: &[&str]) -> std::process::Child {
    let mut cmd = train_command(config, runs, name);
    cmd.args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
    if resume {
        cmd.arg("--resume");
    }
    cmd.spawn().unwrap()
}

/// Runs `train` to the end; its stderr is drained (and returned), so the
/// piped stream can never fill up and stall the run.
fn train_to_end(config: &Path, runs: &Path, name: &str, resume: bool) -> std::process::Output {
    train_to_end_with(config, runs, name, resume, &[])
}

fn train_to_end_with(config: &Path, runs: &Path, name: &str, resume: bool, extra: &[&str]) -> std::process::Output {
    train_with(config, runs, name, resume, extra).wait_with_output().unwrap()
}

/// (step, loss) per metrics row.
fn losses(runs: &Path, name: &str) -> Vec<(usize, f64)> {
    let csv = std::fs::read_to_string(runs.join(name).join("metrics.csv")).unwrap();
    csv.lines()
        .skip(1)
        .map(|l| {
            let mut cols = l.split(',');
            (cols.next().unwrap().parse().unwrap(), cols.next().unwrap().parse().unwrap())
        })
        .collect()
}

#[test]
fn killed_run_resumes_to_the_same_end() {
    killed_run_resumes_to_the_same_end_in(&[]);
}

/// The same in the two modes that read a precomputed dataset: records are
/// drawn (precomputed) or cut on the device (in-VRAM, here on the CPU
/// backend, end to end) in the order a resumed run must continue.
#[test]
fn killed_run_resumes_to_the_same_end_from_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(dir.path(), 80, 10);
    let out = Command::new(GRIN)
        .args(["precompute", "--samples", "256", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let store = format!("train.store={:?}", data.display().to_string());
    for mode in ["precomputed", "in-vram"] {
        killed_run_resumes_to_the_same_end_in(&["--mode", mode, "--set", &store]);
    }
}

fn killed_run_resumes_to_the_same_end_in(extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), 80, 10);
    let runs = dir.path().join("runs");
    let run = |name: &str, resume: bool| {
        let out = train_to_end_with(&config, &runs, name, resume, extra);
        assert!(out.status.success(), "{extra:?} {name}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run("straight", false);
    run("straight-again", false);

    // Kill -9 as soon as the first checkpoint is on disk.
    let mut child = train_with(&config, &runs, "crashy", false, extra);
    let checkpoint = runs.join("crashy/checkpoint.ckpt");
    let started = Instant::now();
    while !checkpoint.exists() {
        assert!(started.elapsed() < Duration::from_secs(300), "{extra:?}: no checkpoint written");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!runs.join("crashy/summary.json").exists(), "the run finished before it could be killed");

    run("crashy", true);

    let straight = losses(&runs, "straight");
    let again = losses(&runs, "straight-again");
    let resumed = losses(&runs, "crashy");
    let steps: Vec<usize> = straight.iter().map(|r| r.0).collect();
    assert_eq!(steps, resumed.iter().map(|r| r.0).collect::<Vec<_>>(), "one metrics row per interval, none repeated");
    let noise = straight.iter().zip(&again).map(|(a, b)| (a.1 - b.1).abs()).fold(0.0, f64::max);
    for ((step, a), (_, r)) in straight.iter().zip(&resumed) {
        let allowed = 3.0 * noise + 0.01 * a.abs();
        assert!(
            (a - r).abs() <= allowed,
            "{extra:?} step {step}: resumed loss {r} vs uninterrupted {a} (run-to-run noise {noise})"
        );
    }
    // A restart from scratch would land about 0.3 above the curve at the
    // first interval after the checkpoint, far outside this tolerance.
    let final_gap = (straight.last().unwrap().1 - resumed.last().unwrap().1).abs();
    assert!(final_gap <= 3.0 * noise + 0.01 * straight.last().unwrap().1, "{extra:?}: final loss gap {final_gap}");
}

/// Waits for `run`'s first metrics row: the loop is running.
fn wait_for_first_interval(runs: &Path, name: &str) {
    let csv = runs.join(name).join("metrics.csv");
    let started = Instant::now();
    while std::fs::read_to_string(&csv).map(|t| t.lines().count() < 2).unwrap_or(true) {
        assert!(started.elapsed() < Duration::from_secs(300), "no metrics row written");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn interrupted_run_checkpoints_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // No periodic checkpoints: whatever is on disk after the signal, the
    // interrupt wrote. 1,000 steps, so that the signal lands mid-run.
    let config = write_config(dir.path(), 1000, 0);
    let runs = dir.path().join("runs");

    for (signal, name) in [("-INT", "ctrl-c"), ("-TERM", "killed")] {
        let child = train(&config, &runs, name, false);
        wait_for_first_interval(&runs, name);
        let status = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill {signal} failed");
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{name}: exit status {:?}, stderr:\n{stderr}", out.status);
        let step: usize = stderr
            .split("interrupted at step ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no 'interrupted at step N' in stderr:\n{stderr}"));
        assert!((10..1000).contains(&step), "{name}: stopped at step {step}");
        assert!(runs.join(name).join("checkpoint.ckpt").exists(), "{name}: no checkpoint after the interrupt");
        assert!(!runs.join(name).join("model.grin").exists(), "{name}: an interrupted run wrote a model");

        // Another config is refused, naming what changed (round 9 of issue
        // 90: it named nothing), and the checkpoint is kept.
        let changed = train_to_end_with(&config, &runs, name, true, &["--set", "train.lr=0.0123"]);
        let stderr = String::from_utf8_lossy(&changed.stderr);
        assert_eq!(changed.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains("(key `train.lr`: ") && stderr.contains("0.0123 now)"), "{name}: {stderr}");
        assert!(runs.join(name).join("checkpoint.ckpt").exists(), "{name}: the checkpoint kept");

        // Resume from the interrupt's step, not from 0.
        let resumed = train_to_end(&config, &runs, name, true);
        let stderr = String::from_utf8_lossy(&resumed.stderr);
        assert!(resumed.status.success(), "{name}: resume failed:\n{stderr}");
        assert!(stderr.contains(&format!("resuming {name} at step {step}")), "{name}: {stderr}");
        let steps: Vec<usize> = losses(&runs, name).iter().map(|r| r.0).collect();
        assert_eq!(steps, (1..=100).map(|i| i * 10).collect::<Vec<_>>(), "{name}: one metrics row per interval");
        assert!(runs.join(name).join("model.grin").exists());
        assert!(!runs.join(name).join("checkpoint.ckpt").exists(), "{name}: finished run kept its checkpoint");
    }
}

/// Issue 90, round 11: a SIGTERM while the finished model was scored was
/// answered "stopping after this step with a checkpoint", then ignored for
/// the whole scoring (47 s), exit 0. Now it quits at once: the model is
/// written, no checkpoint is left, and the folder reads as a finished run.
#[test]
fn an_interrupt_during_the_final_scoring_quits_at_once_keeping_the_model() {
    let dir = tempfile::tempdir().unwrap();
    // A long scoring (200,000 held-out scenes) after ten steps.
    let train = "steps = 10\nbatch_size = 4\nlog_every = 10\ncheckpoint_every = 0\neval_samples = 200000\n";
    let config = tiny_config(dir.path(), "long-scoring.toml", train);
    let runs = dir.path().join("runs");
    let child = train_with(&config, &runs, "scored", false, &[]);
    let model = runs.join("scored/model.grin");
    wait_for(&model);
    let out = interrupt_within_a_minute(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("`grin eval --run") && stderr.contains("scores it"), "{stderr}");
    let run = runs.join("scored");
    assert!(model.exists() && !run.join("checkpoint.ckpt").exists() && !run.join("summary.json").exists());
    let again = train_to_end(&config, &runs, "scored", false);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("holds a finished run (model.grin, no readable summary.json)"), "{stderr}");
}

/// Issue 90, round 11: a run training from a dataset resumed without a word
/// over the dataset rebuilt with another sample count, whose batch order
/// differs. The checkpoint records the dataset; another is refused.
#[test]
fn a_resume_over_another_dataset_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(dir.path(), 1000, 0);
    let build = |samples: &str| {
        std::fs::remove_dir_all(&data).ok();
        let mut precompute = Command::new(GRIN);
        precompute.args(["precompute", "--samples", samples, "--config"]).arg(&config).arg("--out").arg(&data);
        assert!(precompute.output().unwrap().status.success());
    };
    build("64");
    let store = format!("train.store={:?}", data.display().to_string());
    let runs = dir.path().join("runs");
    let extra = ["--mode", "precomputed", "--set", &store];
    let child = train_with(&config, &runs, "rebuilt", false, &extra);
    wait_for_first_interval(&runs, "rebuilt");
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(130));
    build("32");
    let out = train_to_end_with(&config, &runs, "rebuilt", true, &extra);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("checkpoint was written training from a dataset of 64 samples"), "{stderr}");
    assert!(stderr.contains("the dataset now holds 32 samples"), "{stderr}");
    assert!(runs.join("rebuilt/checkpoint.ckpt").exists(), "the checkpoint is kept");
}

/// Issue 90, round 20: an on-the-fly run resumed over its source's files
/// changed (other labels) with exit 0. The checkpoint records the files'
/// identity; other files are refused, as a precompute over them is.
#[test]
fn a_resume_over_changed_source_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The photos in a folder of their own: the runs' folder is no input's.
    let set = dir.path().join("set");
    std::fs::create_dir(&set).unwrap();
    for i in 0..4 {
        image::GrayImage::from_fn(96, 96, |x, y| image::Luma([((x * 3 + y * (5 + i)) % 256) as u8]))
            .save(set.join(format!("p{i}.png")))
            .unwrap();
    }
    let manifest = set.join("m.jsonl");
    let lines = |side: u32| {
        (0..4)
            .map(|i| format!("{{\"image\": \"p{i}.png\", \"boxes\": [[10, 10, {side}, {side}]]}}\n"))
            .collect::<String>()
    };
    std::fs::write(&manifest, lines(50)).unwrap();
    let config = dir.path().join("photos.toml");
    let text = format!(
        "name = \"photos\"\n[features]\nwidth = 64\nheight = 64\n[features.split]\ntrain = 1.0\nval = 0.0\n\
         test = 0.0\n[features.source]\nkind = \"jsonl\"\nmanifest = {:?}\n[model]\nwidth_mult = 0.5\n[train]\n\
         steps = 20000\nbatch_size = 4\nlog_every = 10\ncheckpoint_every = 0\neval_samples = 0\neval_photos = 0\n",
        manifest.display().to_string()
    );
    std::fs::write(&config, text).unwrap();
    let runs = dir.path().join("runs");
    let child = train(&config, &runs, "photos", false);
    wait_for_first_interval(&runs, "photos");
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(130));
    std::fs::write(&manifest, lines(60)).unwrap();
    let out = train_to_end(&config, &runs, "photos", true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("checkpoint was written training from source files of fingerprint"), "{stderr}");
    assert!(stderr.contains("Put the source's files back as they were"), "{stderr}");
    assert!(runs.join("photos/checkpoint.ckpt").exists(), "the checkpoint is kept");
}

/// Issue 90, round 13: a SIGTERM during a validation of `train.eval_every`
/// was answered only when the validation ended (58 s with 30,000 scenes).
/// The scoring stops between two batches; the step's checkpoint is written.
#[test]
fn an_interrupt_during_validation_stops_it_and_checkpoints_the_step() {
    let dir = tempfile::tempdir().unwrap();
    // A validation of 200,000 scenes at step 10: minutes, if it ran on.
    let train =
        "steps = 20\nbatch_size = 4\nlog_every = 10\ncheckpoint_every = 0\neval_every = 10\neval_samples = 200000\n";
    let config = tiny_config(dir.path(), "long-validation.toml", train);
    let runs = dir.path().join("runs");
    let child = train_with(&config, &runs, "validated", false, &[]);
    wait_for(&runs.join("validated/config.toml"));
    // Ten tiny steps take well under a second: by now it is validating.
    std::thread::sleep(Duration::from_secs(5));
    let out = interrupt_within_a_minute(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted at step 10 of 20"), "{stderr}");
    assert!(runs.join("validated/checkpoint.ckpt").exists());
}

/// Waits (5 minutes at most) for a run to write `file`.
fn wait_for(file: &Path) {
    let started = Instant::now();
    while !file.exists() {
        assert!(started.elapsed() < Duration::from_secs(300), "{} never written", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to `child`, which must exit within a minute; its output.
fn interrupt_within_a_minute(mut child: std::process::Child) -> std::process::Output {
    let signalled = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    while child.try_wait().unwrap().is_none() {
        if signalled.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("the interrupt was not answered within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Issue 90, round 14: a SIGTERM during the balance check, before the
/// loop, ended the run by the signal (exit 143, without a word). Scenes of
/// 320x320 in batches of 32 make the check last a second or more; the run
/// folder's lock is taken just before it.
#[test]
fn an_interrupt_during_the_balance_check_quits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny_config(dir.path(), "large.toml", "steps = 1000\nbatch_size = 32\n");
    let runs = dir.path().join("runs");
    let large = ["--set", "features.width=320", "--set", "features.height=320"];
    let child = train_with(&config, &runs, "early", false, &large);
    wait_for(&runs.join("early").join(grin_output::LOCK_FILE));
    let out = interrupt_within_a_minute(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("had not started its steps") && !stderr.contains("T_s"), "{stderr}");
}
