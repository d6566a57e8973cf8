//! `scripts/sweep` end to end with the real `grin`: a 3-trial sweep of tiny
//! CPU runs on one precomputed dataset, its results.csv, ranking and
//! best.toml, a resume that reruns nothing, a failing trial, the SLURM
//! scripts, and sweep files refused up front (not UTF-8, a huge trial count,
//! a grid mixing numbers and strings, bad ranges). Skipped (passing, with a
//! message) where python3 is missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

const BASE: &str = r#"name = "tiny"
[features]
width = 64
height = 64
channels = 1
[features.source]
kind = "synthetic"
[model]
width_mult = 0.25
[train]
steps = 10
batch_size = 4
log_every = 10
checkpoint_every = 0
eval_samples = 16
store_samples = 64
warmup_steps = 2
"#;

/// Whether the sweep can run here. Without Python 3.11+ the test says it
/// skipped, and under CI (`CI` set, as `.ci/run` does) it fails instead, so
/// a skip is never counted as the sweep behaving.
fn python_ok() -> bool {
    let found = Command::new("python3").arg("-c").arg("import tomllib").output().is_ok_and(|o| o.status.success());
    if !found {
        let why = "python3 (3.11+, for tomllib) not found; scripts/sweep cannot run";
        assert!(std::env::var_os("CI").is_none(), "{why} (CI is set: a skipped sweep test is a failure here)");
        eprintln!("SKIPPED, NOT PASSED: {why}");
    }
    found
}

fn sweep(dir: &Path, args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sweep");
    Command::new("python3")
        .arg(script)
        .args(args)
        .args(["--grin", env!("CARGO_BIN_EXE_grin"), "--runs-dir", "runs"])
        .current_dir(dir)
        .output()
        .expect("run python3 scripts/sweep")
}

/// `sweep`, but killed (and the test failed) if it runs past `limit`, so a
/// hang fails the test instead of stalling it. For short outputs only: the
/// pipes are read after the script exits.
fn sweep_within(dir: &Path, args: &[&str], limit: Duration) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sweep");
    let mut child = Command::new("python3")
        .arg(script)
        .args(args)
        .args(["--grin", env!("CARGO_BIN_EXE_grin"), "--runs-dir", "runs"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3 scripts/sweep");
    let started = Instant::now();
    while child.try_wait().expect("wait for scripts/sweep").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("scripts/sweep {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("collect scripts/sweep output")
}

/// The sweep file was refused: exit 2, a one-line error naming the file and
/// containing `what` (the key), and nothing made under runs/ (no dataset, no
/// trial). Returns stderr.
fn assert_refused(dir: &Path, out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{}", text(out));
    assert!(stderr.starts_with("error: configs/sweep.toml: ") && stderr.contains(what), "wanted {what:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line, no traceback: {stderr}");
    assert!(!dir.join("runs").exists(), "nothing made for a refused sweep: {}", text(out));
    stderr
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn setup(sweep_toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    std::fs::write(dir.path().join("configs/base.toml"), BASE).unwrap();
    std::fs::write(dir.path().join("configs/sweep.toml"), sweep_toml).unwrap();
    dir
}

/// results.csv as header-keyed rows. The error column is last and the only
/// one the sweep quotes, so splitting the other columns on commas is exact.
fn results(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().expect("header").split(',').map(String::from).collect();
    assert_eq!(header.last().map(String::as_str), Some("error"), "{header:?}");
    lines
        .map(|line| {
            let cells: Vec<&str> = line.splitn(header.len(), ',').collect();
            header.iter().cloned().zip(cells.into_iter().map(String::from)).collect()
        })
        .collect()
}

fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    row[key].parse().unwrap_or_else(|_| panic!("{key} = {:?} is not a number in {row:?}", row[key]))
}

/// Trial names in the order the printed ranking lists them.
fn printed_ranking(stdout: &str) -> Vec<String> {
    let start = stdout.find("ranking by face_ap").expect("ranking printed");
    stdout[start..]
        .lines()
        .skip(2)
        .map_while(|l| {
            let mut parts = l.split_whitespace();
            let rank = parts.next()?;
            rank.parse::<usize>().ok()?;
            parts.next().map(String::from)
        })
        .collect()
}

fn mtimes(dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.path(), e.metadata().unwrap().modified().unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn three_trials_rank_write_best_and_resume_without_rerunning() {
    if !python_ok() {
        return;
    }
    let dir = setup(
        r#"name = "tiny"
base = "base.toml"
trials = 3
seed = 5
mode = "precomputed"
samples = 64
[params]
"train.lr" = [0.001, 0.003, 0.01]
"train.loss.box_weight" = { min = 1.0, max = 3.0 }
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml", "--jobs", "2"]);
    let stdout = text(&out);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("3 trials, 0 done, 3 to run"), "{stdout}");
    let root = dir.path().join("runs/sweeps/tiny");
    assert!(root.join("data").is_dir() && root.join("data.done").is_file(), "{stdout}");

    let rows = results(&root.join("results.csv"));
    assert_eq!(rows.len(), 3, "{rows:?}");
    let mut lrs = Vec::new();
    for row in &rows {
        assert_eq!(row["status"], "ok", "{row:?}");
        for key in ["face_ap", "steps_per_s", "wall_s", "train.loss.box_weight"] {
            assert!(num(row, key).is_finite());
        }
        // A 10-step model may match no face at all, and then has no smile to score.
        assert!(row["smile_accuracy"].is_empty() || num(row, "smile_accuracy").is_finite());
        let box_weight = num(row, "train.loss.box_weight");
        assert!((1.0..=3.0).contains(&box_weight), "{row:?}");
        lrs.push(num(row, "train.lr"));
        let run = root.join("trials").join(&row["trial"]);
        assert!(run.join("summary.json").is_file() && run.join("config.toml").is_file(), "{}", run.display());
    }
    lrs.sort_by(f64::total_cmp);
    assert_eq!(lrs, [0.001, 0.003, 0.01]);

    // Ranked by face_ap, highest first; equal scores (tiny runs) in trial-name order.
    let mut expected: Vec<(f64, String)> = rows.iter().map(|r| (num(r, "face_ap"), r["trial"].clone())).collect();
    expected.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let expected: Vec<String> = expected.into_iter().map(|(_, t)| t).collect();
    assert_eq!(printed_ranking(&stdout), expected, "{stdout}");

    let best_row = rows.iter().find(|r| r["trial"] == expected[0]).unwrap();
    let best_text = std::fs::read_to_string(root.join("best.toml")).unwrap();
    let best: toml::Table = best_text.parse().unwrap_or_else(|e| panic!("best.toml: {e}\n{best_text}"));
    let train = best["train"].as_table().unwrap();
    assert_eq!(train["lr"].as_float(), Some(num(best_row, "train.lr")), "{best_text}");
    let box_weight = train["loss"]["box_weight"].as_float().unwrap();
    assert_eq!(box_weight, num(best_row, "train.loss.box_weight"), "{best_text}");
    assert_eq!(train["mode"].as_str(), Some("precomputed"));
    assert_eq!(train["steps"].as_integer(), Some(10), "base values survive: {best_text}");
    assert_eq!(best["features"]["source"]["kind"].as_str(), Some("synthetic"));
    // Relative paths in a grin config are relative to where grin runs, as for the trials.
    let store = dir.path().join(train["store"].as_str().unwrap());
    assert!(store.is_dir(), "best.toml's store {} resolves from the sweep's folder", store.display());

    let svg = std::fs::read_to_string(root.join("metric_vs_params.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("train.lr") && svg.matches("<circle").count() == 6, "{svg}");

    // Rerun: nothing to do, and no trial touched.
    let logs = mtimes(&root.join("logs"));
    let runs = mtimes(&root.join("trials"));
    let again = sweep(dir.path(), &["configs/sweep.toml", "--jobs", "2"]);
    let stdout2 = text(&again);
    assert!(again.status.success(), "{stdout2}");
    assert!(stdout2.contains("3 trials, 3 done, 0 to run"), "{stdout2}");
    assert_eq!(mtimes(&root.join("logs")), logs);
    assert_eq!(mtimes(&root.join("trials")), runs);
    assert_eq!(results(&root.join("results.csv")), rows);
    assert_eq!(printed_ranking(&stdout2), expected);
}

#[test]
fn a_failing_trial_is_recorded_and_the_others_run() {
    if !python_ok() {
        return;
    }
    let dir = setup(
        r#"name = "oops"
base = "base.toml"
# On the fly: this test needs no shared dataset.
mode = "on-the-fly"
[params]
"train.lr" = [0.003, -1.0, 0.01]
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    let stdout = text(&out);
    assert_eq!(out.status.code(), Some(1), "some trial failed: {stdout}");
    let root = dir.path().join("runs/sweeps/oops");
    let rows = results(&root.join("results.csv"));
    assert_eq!(rows.len(), 3, "{rows:?}");
    let failed: Vec<_> = rows.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{rows:?}");
    assert_eq!(failed[0]["train.lr"], "-1.0");
    assert!(failed[0]["error"].contains("train.lr"), "the log's last lines name the key: {:?}", failed[0]);
    assert!(root.join(&failed[0]["log"]).is_file());
    for row in rows.iter().filter(|r| r["status"] == "ok") {
        assert!(num(row, "face_ap").is_finite());
    }
    assert_eq!(printed_ranking(&stdout).len(), 2, "{stdout}");
    assert!(stdout.contains("1 of 3 trials not ok"), "{stdout}");
    let best: toml::Table = std::fs::read_to_string(root.join("best.toml")).unwrap().parse().unwrap();
    assert!(best["train"]["lr"].as_float().unwrap() > 0.0);

    // A rerun retries only the failed trial.
    let again = sweep(dir.path(), &["configs/sweep.toml"]);
    assert!(text(&again).contains("3 trials, 2 done, 1 to run"), "{}", text(&again));
}

#[test]
fn bad_sweeps_are_refused_and_slurm_scripts_are_written() {
    if !python_ok() {
        return;
    }
    let dir = setup(
        r#"name = "feat"
base = "base.toml"
[params]
"features.augment.flip" = [0.0, 0.5]
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let msg = text(&out);
    assert!(msg.contains("configs/sweep.toml: param `features.augment.flip`") && msg.contains("on-the-fly"), "{msg}");
    assert!(!dir.path().join("runs/sweeps/feat/data").exists(), "nothing built for a refused sweep");

    std::fs::write(
        dir.path().join("configs/sweep.toml"),
        "name = \"big\"\nbase = \"base.toml\"\ntrials = 4\nseed = 1\n[params]\n\"train.lr\" = { min = 1e-4, max = 1e-2, log = true }\n",
    )
    .unwrap();
    let out = sweep(dir.path(), &["configs/sweep.toml", "--slurm", "--sbatch=--gres=gpu:1"]);
    let msg = text(&out);
    assert!(out.status.success(), "{msg}");
    let root = dir.path().join("runs/sweeps/big");
    let array = std::fs::read_to_string(root.join("sweep.slurm")).unwrap();
    assert!(array.contains("#SBATCH --array=0-3") && array.contains("#SBATCH --gres=gpu:1"), "{array}");
    assert!(array.contains("--trial \"$SLURM_ARRAY_TASK_ID\""), "{array}");
    assert!(std::fs::read_to_string(root.join("precompute.slurm")).unwrap().contains("--prepare"));
    assert!(std::fs::read_to_string(root.join("merge.slurm")).unwrap().contains("--merge"));
    assert!(msg.contains("--dependency=afterok:$pre") && msg.contains("--dependency=afterany:$arr"), "{msg}");
    assert!(!root.join("trials").read_dir().unwrap().any(|_| true), "--slurm runs no trial");
}

#[test]
fn a_sweep_file_that_is_not_utf8_is_refused_in_one_line() {
    if !python_ok() {
        return;
    }
    let dir = setup("");
    // A Latin-1 "café" in an otherwise good sweep file.
    let bytes: &[u8] =
        b"name = \"latin\"\nbase = \"base.toml\"\nmode = \"on-the-fly\"\n[params]\n\"train.lr\" = [0.01]\n# caf\xe9\n";
    std::fs::write(dir.path().join("configs/sweep.toml"), bytes).unwrap();
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_refused(dir.path(), &out, "not UTF-8");
}

#[test]
fn a_huge_trial_count_is_refused_quickly_even_for_list() {
    if !python_ok() {
        return;
    }
    let dir = setup(
        r#"name = "huge"
base = "base.toml"
trials = 1000000000000
[params]
"train.lr" = { min = 1e-4, max = 1e-2, log = true }
"#,
    );
    let out = sweep_within(dir.path(), &["configs/sweep.toml", "--list"], Duration::from_secs(30));
    let msg = assert_refused(dir.path(), &out, "key `trials`");
    assert!(msg.contains("100000"), "the limit is named: {msg}");

    // A grid of 10^8 points: refused without `trials`, and with it --list
    // prints the first points without building the product.
    let grid = (b'a'..=b'h')
        .map(|c| format!("\"train.{}\" = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n", c as char))
        .collect::<String>();
    std::fs::write(
        dir.path().join("configs/sweep.toml"),
        format!("name = \"grid\"\nbase = \"base.toml\"\n[params]\n{grid}"),
    )
    .unwrap();
    let out = sweep_within(dir.path(), &["configs/sweep.toml", "--list"], Duration::from_secs(30));
    assert_refused(dir.path(), &out, "key `trials`");
    std::fs::write(
        dir.path().join("configs/sweep.toml"),
        format!("name = \"grid\"\nbase = \"base.toml\"\ntrials = 3\n[params]\n{grid}"),
    )
    .unwrap();
    let out = sweep_within(dir.path(), &["configs/sweep.toml", "--list"], Duration::from_secs(30));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(listed.lines().count(), 3, "{listed}");
    assert!(listed.lines().nth(2).unwrap().ends_with("train.g=0  train.h=2"), "last key varies fastest: {listed}");
    assert!(!dir.path().join("runs").exists(), "--list runs nothing");
}

#[test]
fn a_grid_mixing_numbers_and_strings_is_refused_before_any_trial() {
    if !python_ok() {
        return;
    }
    let dir = setup(
        r#"name = "mixed"
base = "base.toml"
mode = "on-the-fly"
[params]
"train.lr" = [0.01, "fast"]
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    let msg = assert_refused(dir.path(), &out, "param `train.lr`");
    assert!(msg.contains("\"fast\""), "the bad value is named: {msg}");
}

#[test]
fn bad_counts_ranges_and_grid_values_are_refused_before_any_trial() {
    if !python_ok() {
        return;
    }
    let dir = setup("");
    let cases = [
        ("trials = 0\n[params]\n\"train.lr\" = [0.01]\n", "key `trials`"),
        ("trials = -3\n[params]\n\"train.lr\" = [0.01]\n", "key `trials`"),
        ("trials = 2.5\n[params]\n\"train.lr\" = [0.01]\n", "key `trials`"),
        ("[params]\n\"train.lr\" = { min = 0.1, max = 0.01 }\n", "param `train.lr`: min"),
        ("[params]\n\"train.lr\" = { min = 0.0, max = 0.1, log = true }\n", "param `train.lr`: a log range"),
        ("[params]\n\"train.lr\" = { min = -1.0, max = 0.1, log = true }\n", "param `train.lr`: a log range"),
        ("[params]\n\"model.width_mult\" = [1, 0.5]\n", "param `model.width_mult`: grid mixes"),
        ("[params]\n\"train.lr\" = [0.01, nan]\n", "param `train.lr`: grid value 2"),
        ("[params]\n\"train.lr\" = [[0.01, 0.1]]\n", "param `train.lr`: grid value 1"),
    ];
    for (body, what) in cases {
        let sweep_toml = format!("name = \"bad\"\nbase = \"base.toml\"\nmode = \"on-the-fly\"\n{body}");
        std::fs::write(dir.path().join("configs/sweep.toml"), &sweep_toml).unwrap();
        let out = sweep(dir.path(), &["configs/sweep.toml"]);
        assert_refused(dir.path(), &out, what);
    }
}
