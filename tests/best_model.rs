//! `best.grin`, `train.patience` and the TensorBoard event file, on tiny CPU
//! runs: the best model is the step with the highest validation score in
//! `metrics.csv` and scores that again under `grin eval --best`; patience
//! stops a run that stopped improving; a run stopped with Ctrl-C and
//! resumed keeps its best step; and the event file holds what the CSV holds.

use crate::common;

use common::{missing, tiny_config, train_command, GRIN};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn write_config(dir: &Path, steps: usize, patience: usize) -> PathBuf {
    let train = format!(
        "steps = {steps}\nbatch_size = 4\nlr = 0.003\nlog_every = 10\ncheckpoint_every = 0\neval_samples = 16\n\
         eval_every = 10\npatience = {patience}\n"
    );
    tiny_config(dir, &format!("tiny-{steps}-{patience}.toml"), &train)
}

fn train(config: &Path, runs: &Path, name: &str, extra: &[&str]) -> std::process::Child {
    train_command(config, runs, name).args(extra).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(child: std::process::Child) -> Output {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// (step, val_face_ap) of the rows that were scored.
fn val_scores(run: &Path) -> Vec<(usize, f32)> {
    let csv = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "val_face_ap").unwrap();
    lines
        .filter_map(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            Some((cols[0].parse().unwrap(), cols[col].parse().ok()?))
        })
        .collect()
}

fn summary(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap()
}

/// The first step with the highest score: a later equal score is no better.
fn first_best(scores: &[(usize, f32)]) -> (usize, f32) {
    scores.iter().copied().fold((0, f32::NEG_INFINITY), |b, s| if s.1 > b.1 { s } else { b })
}

fn check_best(run: &Path) {
    let scores = val_scores(run);
    let (step, ap) = first_best(&scores);
    let s = summary(run);
    assert_eq!(s["best"]["step"], step, "{}: {scores:?}", run.display());
    assert!((s["best"]["val_face_ap"].as_f64().unwrap() - ap as f64).abs() < 1e-4);
    // best.grin holds that step's weights: it scores the same validation scenes the same.
    let out = Command::new(GRIN)
        .args(["eval", "--best", "--split", "val", "--samples", "16", "--photos", "0", "--run"])
        .arg(run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("face AP@0.5 {ap:.3}")), "best.grin of step {step} (AP {ap}): {stdout}");
}

#[test]
fn best_model_is_the_best_validation_step_and_patience_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");

    // No patience: every step runs, best.grin beside model.grin.
    finish(train(&write_config(dir.path(), 150, 0), &runs, "all", &[]));
    let all = runs.join("all");
    assert!(all.join("best.grin").exists() && all.join("model.grin").exists());
    assert_eq!(summary(&all)["steps"], 150);
    assert_eq!(summary(&all)["stopped_early"], false);
    assert_eq!(val_scores(&all).len(), 15, "a score every 10 steps");
    check_best(&all);

    // Patience 1: the first score that is not a new best ends the run there.
    let out = finish(train(&write_config(dir.path(), 400, 1), &runs, "patient", &[]));
    let patient = runs.join("patient");
    let scores = val_scores(&patient);
    let s = summary(&patient);
    let stopped = scores.last().unwrap().0;
    assert_eq!(s["stopped_early"], true, "40 scores without a single plateau: {scores:?}");
    assert_eq!(s["steps"], stopped);
    assert!(stopped < 400);
    // Every score before the last one improved; the last did not.
    assert!(scores.windows(2).rev().skip(1).all(|w| w[1].1 > w[0].1), "{scores:?}");
    let [.., before, last] = scores[..] else { panic!("{scores:?}") };
    assert!(last.1 <= before.1, "{scores:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("stopping at step {stopped}")));
    assert!(patient.join("model.grin").exists(), "an early stop still writes the last model");
    check_best(&patient);
}

/// `train.ema`: the average never feeds back into training, so the loss
/// curve is the plain run's; what the run keeps and writes is the average.
#[test]
fn a_run_with_the_weights_average_trains_alike_and_writes_the_average() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let config = write_config(dir.path(), 60, 0);
    finish(train(&config, &runs, "last", &[]));
    let out = finish(train(&config, &runs, "average", &["--set", "train.ema=0.9"]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the weights' moving average (train.ema = 0.9)"));
    let losses = |name: &str| -> Vec<f64> {
        let csv = std::fs::read_to_string(runs.join(name).join("metrics.csv")).unwrap();
        csv.lines().skip(1).map(|l| l.split(',').nth(1).unwrap().parse().unwrap()).collect()
    };
    let (last, average) = (losses("last"), losses("average"));
    assert_eq!(last.len(), 6);
    for (a, b) in last.iter().zip(&average) {
        assert!((a - b).abs() <= 0.01 * a.abs(), "loss {a} against {b}: the average changed training");
    }
    let model = |name: &str| std::fs::read(runs.join(name).join("model.grin")).unwrap();
    assert_ne!(model("last"), model("average"), "model.grin is the last step's weights");
    check_best(&runs.join("average"));
}

#[test]
fn a_resumed_run_keeps_its_best_step_and_its_event_file_matches_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let config = write_config(dir.path(), 600, 0);
    let child = train(&config, &runs, "resumed", &[]);
    let run = runs.join("resumed");
    let started = Instant::now();
    while val_scores_if_any(&run).len() < 3 {
        assert!(started.elapsed() < Duration::from_secs(300), "no validation scores written");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(run.join("best.grin").exists(), "best.grin is written as soon as a score is the best");
    finish(train(&config, &runs, "resumed", &["--resume"]));
    check_best(&run);

    // The event file: every CSV row's step, its loss and validation AP.
    let events = grin_events::read(&std::fs::read(run.join(grin_events::FILE_NAME)).unwrap()).unwrap();
    let csv = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(events.len(), rows.len(), "one event per CSV row, none repeated after --resume");
    for (e, row) in events.iter().zip(&rows) {
        assert_eq!(e.step.to_string(), row[0]);
        let value = |tag: &str| e.scalars.iter().find(|(t, _)| t == tag).map(|(_, v)| *v);
        let loss: f32 = row[1].parse().unwrap();
        assert!((value("loss/total").unwrap() - loss).abs() <= 1e-5 * loss.abs().max(1.0));
        assert_eq!(value("val/face_ap").is_some(), !row[11].is_empty());
    }
}

fn val_scores_if_any(run: &Path) -> Vec<(usize, f32)> {
    if run.join("metrics.csv").exists() {
        val_scores(run)
    } else {
        vec![]
    }
}

#[test]
fn tensorboard_reads_the_event_file_as_metrics_csv_has_it() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/tensorboard");
    let setup = Command::new("python3").arg(&script).arg("--setup").output();
    match &setup {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            missing(&format!("scripts/tensorboard --setup: {}", String::from_utf8_lossy(&o.stderr).trim()));
            return;
        }
        Err(e) => {
            missing(&format!("python3 not found ({e}); scripts/tensorboard cannot run"));
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    finish(train(&write_config(dir.path(), 60, 0), &runs, "tb", &[]));
    let run = runs.join("tb");
    let out = Command::new("python3").arg(&script).arg("read").arg(&run).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tags: std::collections::HashMap<String, Vec<(u64, f64, f64)>> = serde_json::from_slice(&out.stdout).unwrap();

    let csv = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    // (tag, CSV column, half the CSV's last digit): the CSV rounds, the event holds an f32.
    for (tag, name, rounding) in [
        ("loss/total", "loss", 5e-7),
        ("loss/face", "face_loss", 5e-7),
        ("loss/box", "box_loss", 5e-7),
        ("loss/smile", "smile_loss", 5e-7),
        ("train/lr", "lr", 0.0),
        ("train/samples_per_s", "samples_per_s", 5e-3),
        ("device/busy_pct", "gpu_busy_pct", 5e-3),
        ("time/data_wait_ms_per_step", "wait_ms", 5e-4),
        ("time/compute_ms_per_step", "compute_ms", 5e-4),
        ("time/produce_ms_per_batch", "produce_ms", 5e-4),
        ("val/face_ap", "val_face_ap", 5e-5),
    ] {
        let want: Vec<(u64, f64)> = rows
            .iter()
            .filter(|r| !r[column(name)].is_empty())
            .map(|r| (r[0].parse().unwrap(), r[column(name)].parse().unwrap()))
            .collect();
        let got = tags.get(tag).unwrap_or_else(|| panic!("no {tag} among {:?}", tags.keys()));
        assert_eq!(got.len(), want.len(), "{tag}");
        assert!(!want.is_empty(), "{tag}: nothing to compare");
        for ((step, value, _), (want_step, want_value)) in got.iter().zip(&want) {
            assert_eq!(step, want_step, "{tag}");
            let tolerance = 1e-5 * want_value.abs() + rounding;
            assert!((value - want_value).abs() <= tolerance, "{tag} at {step}: {value} vs CSV {want_value}");
        }
    }
    assert!(tags.contains_key("device/predicted_busy_pct"), "the balance check's prediction beside the measurement");
}
