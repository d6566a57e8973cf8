//! `scripts/sweep` end to end with the real `grin` and the real Optuna (in
//! `.venv-sweep`, which the script builds from PyPI on first use): a grid
//! sweep's results.csv, ranking and best.toml and a rerun that runs nothing;
//! two workers sharing one study in a journal file and in a real PostgreSQL,
//! with no trial run twice; a hopeless trial pruned before its last step;
//! Ctrl-C stopping the whole sweep and a rerun continuing it; a failing
//! trial; the SLURM scripts; and sweep files refused before anything runs
//! (values `grin config` refuses, not UTF-8, a huge budget, mixed lists, bad
//! ranges). Tiny CPU runs throughout. Skipped (passing, with a message) where
//! python3, its venv module or PostgreSQL is missing; under CI they fail.

use crate::common;

use common::missing;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
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

/// Longest a sweep in these tests may take, the first one's venv install included.
const LIMIT: Duration = Duration::from_secs(900);

/// Whether the sweep can run here: Python 3.11+ (tomllib) with the venv
/// module (Debian: python3-venv), which installs Optuna on first use.
fn python_ok() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import tomllib, venv, ensurepip"])
        .output()
        .is_ok_and(|o| o.status.success());
    found
        || !missing("python3 (3.11+, with the venv module: Debian's python3-venv) not found; scripts/sweep cannot run")
}

/// Whether Optuna is there: `scripts/sweep --setup` (what a first sweep
/// does) installs it from PyPI into `.venv-sweep` once for all the tests;
/// without PyPI they skip, naming pip's last line (under CI they fail).
fn optuna_ok() -> bool {
    static SETUP: OnceLock<Result<(), String>> = OnceLock::new();
    if !python_ok() {
        return false;
    }
    let setup = SETUP.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sweep");
        let out = Command::new("python3").arg(script).arg("--setup").output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
        out.status.success().then_some(()).ok_or(text)
    });
    match setup {
        Ok(()) => true,
        Err(why) => !missing(&format!("scripts/sweep --setup cannot install Optuna into .venv-sweep: {why}")),
    }
}

/// A finished `scripts/sweep`.
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    fn text(&self) -> String {
        format!("exit {:?}\n{}{}", self.code, self.stdout, self.stderr)
    }
}

/// Starts `python3 scripts/sweep ARGS` in `dir`, in its own process group
/// (as a shell runs a foreground job), output to files under `dir`.
fn start(dir: &Path, args: &[&str], tag: &str) -> Child {
    use std::os::unix::process::CommandExt;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sweep");
    let out = std::fs::File::create(dir.join(format!("{tag}.out"))).unwrap();
    let err = std::fs::File::create(dir.join(format!("{tag}.err"))).unwrap();
    Command::new("python3")
        .arg(script)
        .args(args)
        .args(["--grin", env!("CARGO_BIN_EXE_grin"), "--runs-dir", "runs"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .expect("run python3 scripts/sweep")
}

/// Waits for a started sweep; kills it (and fails) past `limit`, so a hang
/// fails the test instead of stalling it.
fn finish(dir: &Path, mut child: Child, tag: &str, limit: Duration) -> Out {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("scripts/sweep ({tag}) still running after {limit:?}: {}", read(&dir.join(format!("{tag}.out"))));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Out {
        code: status.code(),
        stdout: read(&dir.join(format!("{tag}.out"))),
        stderr: read(&dir.join(format!("{tag}.err"))),
    }
}

fn sweep(dir: &Path, args: &[&str]) -> Out {
    finish(dir, start(dir, args, "sweep"), "sweep", LIMIT)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The sweep file was refused: exit 2, a one-line error naming the file and
/// containing `what` (the key), and nothing made under runs/ (no dataset,
/// no study, no trial). Returns stderr.
fn assert_refused(dir: &Path, out: &Out, what: &str) -> String {
    assert_eq!(out.code, Some(2), "{}", out.text());
    let stderr = &out.stderr;
    assert!(stderr.starts_with("error: configs/sweep.toml: ") && stderr.contains(what), "wanted {what:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line, no traceback: {stderr}");
    assert!(!dir.join("runs").exists(), "nothing made for a refused sweep: {}", out.text());
    stderr.clone()
}

fn setup(sweep_toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("configs")).unwrap();
    std::fs::write(dir.path().join("configs/base.toml"), BASE).unwrap();
    std::fs::write(dir.path().join("configs/sweep.toml"), sweep_toml).unwrap();
    dir
}

type Row = HashMap<String, String>;

/// results.csv as header-keyed rows (the sweep quotes only the error column,
/// the last one, so splitting the others on commas is exact).
fn results(path: &Path) -> Vec<Row> {
    let text = read(path);
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

fn num(row: &Row, key: &str) -> f64 {
    row[key].parse().unwrap_or_else(|_| panic!("{key} = {:?} is not a number in {row:?}", row[key]))
}

fn statuses(rows: &[Row]) -> Vec<(String, String)> {
    rows.iter().map(|r| (r["trial"].clone(), r["status"].clone())).collect()
}

/// Trial names in the order the printed ranking lists them.
fn printed_ranking(stdout: &str) -> Vec<String> {
    let start = stdout.find("ranking by face_ap").expect("ranking printed");
    stdout[start..]
        .lines()
        .skip(2)
        .map_while(|l| {
            let mut parts = l.split_whitespace();
            parts.next()?.parse::<usize>().ok()?;
            parts.next().map(String::from)
        })
        .collect()
}

fn mtimes(dir: &Path) -> Vec<(PathBuf, SystemTime)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(mtimes(&path));
        } else {
            out.push((path.clone(), path.metadata().unwrap().modified().unwrap()));
        }
    }
    out.sort();
    out
}

/// Trial names a sweep's output says it started.
fn started(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.contains(" started"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn a_grid_sweep_ranks_writes_best_and_a_rerun_runs_nothing() {
    if !optuna_ok() {
        return;
    }
    let dir = setup(
        r#"name = "tiny"
base = "base.toml"
mode = "precomputed"
samples = 64
[params]
"train.lr" = [0.001, 0.003, 0.01]
[set]
"train.loss.box_weight" = 3.0
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml", "--jobs", "2"]);
    let stdout = out.text();
    assert_eq!(out.code, Some(0), "{stdout}");
    assert!(
        stdout.contains("(grid sampler, median pruner from step 5,") && stdout.contains("3 trials, 0 done, 3 to run"),
        "{stdout}"
    );
    assert!(stdout.contains("train.eval_every is 0"), "pruning without validation figures is pointed out: {stdout}");
    // Each finished trial says how far the sweep is, the best so far and (before the last) the ETA.
    let progress: Vec<&str> = stdout.lines().filter(|l| l.contains(" complete: face_ap=")).collect();
    assert_eq!(progress.len(), 3, "{stdout}");
    for (k, line) in progress.iter().enumerate() {
        assert!(line.contains(&format!("[{}/3 done, best face_ap=", k + 1)), "{line}");
        assert_eq!(line.contains(", ETA "), k < 2, "{line}");
    }
    let root = dir.path().join("runs/sweeps/tiny");
    assert!(root.join("data.done").is_file() && root.join("study.journal").is_file(), "{stdout}");
    // Optuna's own pictures, offline: the HTML files and plotly.js beside them.
    for name in ["history.html", "importances.html", "plotly.min.js"] {
        assert!(root.join(name).is_file(), "{name}: {stdout}");
    }
    assert!(read(&root.join("history.html")).contains("face_ap"), "the history names the metric");

    let rows = results(&root.join("results.csv"));
    assert_eq!(statuses(&rows).iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>(), ["complete"; 3], "{rows:?}");
    let mut lrs = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["trial"], format!("trial-{i:04}"));
        for key in ["face_ap", "steps_per_s", "wall_s"] {
            assert!(num(row, key).is_finite(), "{row:?}");
        }
        lrs.push(num(row, "train.lr"));
        let run = root.join("trials").join(&row["trial"]);
        assert!(run.join("summary.json").is_file() && run.join("config.toml").is_file(), "{}", run.display());
        let config = read(&run.join("config.toml"));
        assert!(config.contains("box_weight = 3.0"), "[set] reaches every trial: {config}");
    }
    lrs.sort_by(f64::total_cmp);
    assert_eq!(lrs, [0.001, 0.003, 0.01], "every grid point once");

    // Ranked by face_ap, highest first; equal scores (tiny runs) in trial order.
    let mut expected: Vec<(f64, String)> = rows.iter().map(|r| (num(r, "face_ap"), r["trial"].clone())).collect();
    expected.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let expected: Vec<String> = expected.into_iter().map(|(_, t)| t).collect();
    assert_eq!(printed_ranking(&stdout), expected, "{stdout}");

    let best_row = rows.iter().find(|r| r["trial"] == expected[0]).unwrap();
    let best_text = read(&root.join("best.toml"));
    let best: toml::Table = best_text.parse().unwrap_or_else(|e| panic!("best.toml: {e}\n{best_text}"));
    let train = best["train"].as_table().unwrap();
    assert_eq!(train["lr"].as_float(), Some(num(best_row, "train.lr")), "{best_text}");
    assert_eq!(train["loss"]["box_weight"].as_float(), Some(3.0), "{best_text}");
    assert_eq!(train["mode"].as_str(), Some("precomputed"));
    assert_eq!(train["steps"].as_integer(), Some(10), "base values survive: {best_text}");
    assert_eq!(best["features"]["source"]["kind"].as_str(), Some("synthetic"));
    // Relative paths in a grin config are relative to where grin runs, as for the trials.
    let store = dir.path().join(train["store"].as_str().unwrap());
    assert!(store.is_dir(), "best.toml's store {} resolves from the sweep's folder", store.display());

    let svg = read(&root.join("metric_vs_params.svg"));
    assert!(svg.contains("<svg") && svg.contains("train.lr") && svg.matches("<circle").count() == 3, "{svg}");

    // Rerun: nothing to do, and no trial touched.
    let before = mtimes(&root.join("trials"));
    let again = sweep(dir.path(), &["configs/sweep.toml", "--jobs", "2"]);
    assert_eq!(again.code, Some(0), "{}", again.text());
    assert!(again.stdout.contains("3 trials, 3 done, 0 to run"), "{}", again.text());
    assert!(started(&again.stdout).is_empty(), "{}", again.text());
    assert_eq!(mtimes(&root.join("trials")), before);
    assert_eq!(results(&root.join("results.csv")), rows);
    assert_eq!(printed_ranking(&again.stdout), expected);
}

/// A 4-trial TPE sweep run by two `scripts/sweep` processes at once on one
/// study in `storage` (None: the default journal file): each trial runs
/// once, in one of them, and the study ends with exactly 4 distinct trials.
fn two_workers_share_one_study(name: &str, storage: Option<&str>) {
    let dir = setup(&format!(
        r#"name = "{name}"
base = "base.toml"
mode = "precomputed"
samples = 64
sampler = "tpe"
trials = 4
seed = 3
[params]
"train.lr" = {{ min = 1e-3, max = 1e-2, log = true }}
"train.loss.box_weight" = {{ min = 1.0, max = 3.0 }}
"#
    ));
    let mut args = vec!["configs/sweep.toml"];
    if let Some(url) = storage {
        args.extend(["--storage", url]);
    }
    let a = start(dir.path(), &args, "a");
    let b = start(dir.path(), &args, "b");
    let (a, b) = (finish(dir.path(), a, "a", LIMIT), finish(dir.path(), b, "b", LIMIT));
    assert_eq!((a.code, b.code), (Some(0), Some(0)), "{}\n{}", a.text(), b.text());
    let (ran_a, ran_b) = (started(&a.stdout), started(&b.stdout));
    assert_eq!(ran_a.len() + ran_b.len(), 4, "four trials between them:\n{}\n{}", a.text(), b.text());
    let ran: HashSet<&String> = ran_a.iter().chain(&ran_b).collect();
    assert_eq!(ran.len(), 4, "no trial run by both: {ran_a:?} {ran_b:?}");

    let root = dir.path().join(format!("runs/sweeps/{name}"));
    let rows = results(&root.join("results.csv"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    let mut seen = HashSet::new();
    for row in &rows {
        assert_eq!(row["status"], "complete", "{row:?}");
        let (lr, weight) = (num(row, "train.lr"), num(row, "train.loss.box_weight"));
        assert!((1e-3..=1e-2).contains(&lr) && (1.0..=3.0).contains(&weight), "{row:?}");
        assert!(seen.insert((lr.to_bits(), weight.to_bits())), "duplicate trial {row:?} in {rows:?}");
        assert!(root.join("trials").join(&row["trial"]).join("summary.json").is_file());
        assert!(ran.contains(&row["trial"]), "{row:?} was run by a worker");
    }
}

#[test]
fn two_workers_share_a_journal_file_without_running_a_trial_twice() {
    if !optuna_ok() {
        return;
    }
    two_workers_share_one_study("journal", None);
}

/// A throwaway PostgreSQL server: `initdb` on a temporary folder, `pg_ctl`
/// starting it on a Unix socket in that folder (no TCP port), stopped on drop.
struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// Runs the server's tools as this user (initdb refuses root).
    user: Option<String>,
}

impl Postgres {
    fn start() -> Option<Postgres> {
        let Some(bin) = postgres_bin() else {
            missing("PostgreSQL's initdb and pg_ctl not found (Debian: apt-get install postgresql)");
            return None;
        };
        let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n");
        let user = root.then(|| "postgres".to_string());
        let dir = tempfile::tempdir().unwrap();
        if let Some(user) = &user {
            let owned = Command::new("chown").args(["-R", user]).arg(dir.path()).status();
            if !owned.is_ok_and(|s| s.success()) {
                missing("running as root and no `postgres` user to run the server as");
                return None;
            }
        }
        let pg = Postgres { dir, bin, user };
        let data = pg.dir.path().join("data");
        pg.run("initdb", &["-D", data.to_str().unwrap(), "-U", "postgres", "--auth=trust", "-E", "UTF8"]);
        let options = format!("-c listen_addresses='' -c unix_socket_directories='{}'", pg.dir.path().display());
        let log = pg.dir.path().join("server.log");
        pg.run("pg_ctl", &["-D", data.to_str().unwrap(), "-l", log.to_str().unwrap(), "-o", &options, "-w", "start"]);
        Some(pg)
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let program = self.bin.join(tool);
        let mut cmd = match &self.user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        let out = cmd.args(args).output().unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn url(&self) -> String {
        format!("postgresql://postgres@/postgres?host={}", self.dir.path().display())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        self.run("pg_ctl", &["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]);
    }
}

/// The folder holding initdb and pg_ctl: on PATH, else Debian's versioned folder.
fn postgres_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file());
    on_path.or_else(|| {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .map(|e| e.unwrap().path().join("bin"))
            .filter(|d| d.join("initdb").is_file())
            .collect();
        versions.sort();
        versions.pop()
    })
}

#[test]
fn two_workers_share_a_postgresql_study_without_running_a_trial_twice() {
    if !optuna_ok() {
        return;
    }
    let Some(pg) = Postgres::start() else { return };
    two_workers_share_one_study("postgres", Some(&pg.url()));
}

/// Long enough that the pruner's signal lands well before a hopeless trial's last step.
const PRUNE_STEPS: usize = 1000;

#[test]
fn a_hopeless_trial_is_pruned_before_its_last_step() {
    if !optuna_ok() {
        return;
    }
    // Optuna's grid sampler shuffles the grid by the seed: seed 5 runs
    // 0.01, 0.005, then 1e-9, so two trials have finished before the hopeless
    // one starts and the median pruner has a median to compare with.
    // The sweep polls metrics.csv every quarter second and a step here takes
    // about 4 ms, so the trial runs PRUNE_STEPS / 2 steps (seconds, not a poll
    // or two) after the pruner's first chance at step PRUNE_STEPS / 2: with 80
    // steps the trial could finish before the sweep had read its first row.
    let dir = setup(&format!(
        r#"name = "prune"
base = "base.toml"
mode = "on-the-fly"
seed = 5
pruner_startup_trials = 2
[params]
"train.lr" = [0.01, 0.005, 1e-9]
[set]
"train.steps" = {PRUNE_STEPS}
"train.log_every" = 50
"train.eval_every" = 50
"train.eval_samples" = 32
"train.batch_size" = 8
"#
    ));
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(0), "pruned is not failed: {}", out.text());
    let root = dir.path().join("runs/sweeps/prune");
    let rows = results(&root.join("results.csv"));
    let lrs: Vec<f64> = rows.iter().map(|r| num(r, "train.lr")).collect();
    assert_eq!(lrs, [0.01, 0.005, 1e-9], "Optuna's grid order for seed 5 changed; pick a seed that runs 1e-9 last");
    assert_eq!(
        statuses(&rows)[..2],
        [("trial-0000".into(), "complete".into()), ("trial-0001".into(), "complete".into())]
    );
    let hopeless = &rows[2];
    assert_eq!(hopeless["status"], "pruned", "{}", out.text());
    let at = num(hopeless, "pruned_at");
    assert!(at < PRUNE_STEPS as f64 && at % 50.0 == 0.0, "pruned at a validation step before the last: {hopeless:?}");
    assert!(num(hopeless, "val_face_ap") < num(&rows[0], "val_face_ap").max(num(&rows[1], "val_face_ap")));
    // Stopped by SIGTERM: grin stopped at its next step, wrote no model, and the sweep dropped the checkpoint.
    let run = root.join("trials/trial-0002");
    let csv = read(&run.join("metrics.csv"));
    let last_step: usize = csv.lines().last().unwrap().split(',').next().unwrap().parse().unwrap();
    assert!(last_step < PRUNE_STEPS, "{csv}");
    assert!(!run.join("model.grin").exists() && !run.join("checkpoint.ckpt").exists());
    assert!(read(&root.join("logs/trial-0002.log")).contains("interrupted at step"));
    assert!(out.stdout.contains("trial-0002 pruned: at step"), "{}", out.text());
    let best: toml::Table = read(&root.join("best.toml")).parse().unwrap();
    assert!(best["train"]["lr"].as_float().unwrap() >= 0.005, "a pruned trial is never best");
}

/// A random sweep of `trials` 300-step trials: long enough to interrupt.
fn long_trials(name: &str, trials: usize) -> String {
    format!(
        r#"name = "{name}"
base = "base.toml"
mode = "on-the-fly"
sampler = "random"
trials = {trials}
pruner = "none"
[params]
"train.lr" = {{ min = 3e-3, max = 1e-2, log = true }}
[set]
"train.steps" = 300
"train.log_every" = 5
"#
    )
}

/// Polls `done` until it holds; fails naming `what` past `limit`.
fn wait_until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_stops_the_whole_sweep_and_a_rerun_continues_it() {
    if !optuna_ok() {
        return;
    }
    let dir = setup(&long_trials("stop", 2));
    let root = dir.path().join("runs/sweeps/stop");
    let child = start(dir.path(), &["configs/sweep.toml"], "first");
    // Interrupt while the second trial trains: the first one is finished by then.
    let metrics = root.join("trials/trial-0001/metrics.csv");
    wait_until("the second trial to start", LIMIT, || metrics.is_file());
    let pid = child.id();
    // What a terminal's Ctrl-C does: SIGINT to the foreground process group.
    let kill = Command::new("sh").arg("-c").arg(format!("kill -INT -{pid}")).status().unwrap();
    assert!(kill.success());
    let out = finish(dir.path(), child, "first", Duration::from_secs(120));
    assert_eq!(out.code, Some(130), "{}", out.text());
    assert!(out.stdout.contains("rerun the same command to continue"), "{}", out.text());
    let rows = results(&root.join("results.csv"));
    assert_eq!(
        statuses(&rows),
        [
            ("trial-0000".into(), "complete".into()),
            ("trial-0001".into(), "interrupted".into()),
            ("trial-0002".into(), "waiting".into())
        ],
        "the finished trial is kept, the interrupted one recorded and queued again, nothing else started: {}",
        out.text()
    );
    assert_eq!((rows[2]["continues"].as_str(), &rows[2]["train.lr"]), ("trial-0001", &rows[1]["train.lr"]));
    assert!(rows[1]["error"].contains("interrupted at step"), "grin's last line: {:?}", rows[1]);
    let interrupted = root.join("trials/trial-0001");
    assert!(interrupted.join("checkpoint.ckpt").is_file(), "grin checkpointed on the sweep's one SIGTERM");
    assert!(!root.join("trials/trial-0002").exists());
    let kept = mtimes(&root.join("trials/trial-0000"));

    let again = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(again.code, Some(0), "{}", again.text());
    assert!(again.stdout.contains("2 trials, 1 done, 1 to run"), "{}", again.text());
    assert!(again.stdout.contains("trial-0002 started (continues trial-0001)"), "{}", again.text());
    assert_eq!(started(&again.stdout), ["trial-0002"], "only the interrupted trial runs again: {}", again.text());
    let rows = results(&root.join("results.csv"));
    assert_eq!(
        statuses(&rows),
        [
            ("trial-0000".into(), "complete".into()),
            ("trial-0001".into(), "interrupted".into()),
            ("trial-0002".into(), "complete".into())
        ]
    );
    assert_eq!(rows[2]["train.lr"], rows[1]["train.lr"], "the same params");
    assert_eq!(rows[2]["continues"], "trial-0001");
    // It resumed from the checkpoint instead of starting over.
    let log = read(&root.join("logs/trial-0002.log"));
    assert!(log.contains("resuming") && log.contains("interrupted at step"), "{log}");
    let summary: serde_json::Value = serde_json::from_str(&read(&root.join("trials/trial-0002/summary.json"))).unwrap();
    assert_eq!(summary["steps"], 300);
    assert_eq!(mtimes(&root.join("trials/trial-0000")), kept, "the finished trial was not touched");
}

#[test]
fn a_killed_worker_checkpoints_its_trial_and_requeue_running_continues_it() {
    if !optuna_ok() {
        return;
    }
    let dir = setup(&long_trials("killed", 1));
    let root = dir.path().join("runs/sweeps/killed");
    let mut child = start(dir.path(), &["configs/sweep.toml"], "first");
    wait_until("the trial to start", LIMIT, || root.join("trials/trial-0000/metrics.csv").is_file());
    // SIGKILL: the sweep records nothing. The kernel sends its trial SIGTERM
    // (setpriv --pdeathsig), so grin checkpoints and stops instead of
    // training on unsupervised.
    child.kill().unwrap();
    child.wait().unwrap();
    let log = root.join("logs/trial-0000.log");
    wait_until("grin to stop after its sweep died", Duration::from_secs(120), || {
        read(&log).contains("interrupted at step")
    });
    assert!(root.join("trials/trial-0000/checkpoint.ckpt").is_file());

    // The study still holds the trial as running: a rerun says so and how to queue it again.
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(0), "{}", out.text());
    assert!(out.stdout.contains("1 trials, 0 done, 0 to run"), "{}", out.text());
    assert!(
        out.stdout.contains("note: trial-0000 running") && out.stdout.contains("--requeue-running"),
        "{}",
        out.text()
    );
    assert!(started(&out.stdout).is_empty(), "{}", out.text());

    let out = sweep(dir.path(), &["configs/sweep.toml", "--requeue-running"]);
    assert_eq!(out.code, Some(0), "{}", out.text());
    assert!(out.stdout.contains("trial-0000: recorded as interrupted and queued again"), "{}", out.text());

    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(0), "{}", out.text());
    assert_eq!(started(&out.stdout), ["trial-0001"], "{}", out.text());
    assert!(out.stdout.contains("trial-0001 started (continues trial-0000)"), "{}", out.text());
    let rows = results(&root.join("results.csv"));
    assert_eq!(
        statuses(&rows),
        [("trial-0000".into(), "interrupted".into()), ("trial-0001".into(), "complete".into())],
        "{}",
        out.text()
    );
    assert_eq!(rows[1]["train.lr"], rows[0]["train.lr"], "the same params");
    let log = read(&root.join("logs/trial-0001.log"));
    assert!(log.contains("resuming"), "continued from the checkpoint: {log}");
    let summary: serde_json::Value = serde_json::from_str(&read(&root.join("trials/trial-0001/summary.json"))).unwrap();
    assert_eq!(summary["steps"], 300);
}

#[test]
fn a_failing_trial_is_recorded_with_its_error_and_not_retried() {
    if !optuna_ok() {
        return;
    }
    // grin config cannot know a file is missing; grin train finds out when it starts.
    let dir = setup(
        r#"name = "oops"
base = "base.toml"
mode = "on-the-fly"
[params]
"train.lr" = [0.003, 0.01]
[set]
"train.init" = "missing.grin"
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(1), "some trial failed: {}", out.text());
    let root = dir.path().join("runs/sweeps/oops");
    let rows = results(&root.join("results.csv"));
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row["status"], "failed", "{row:?}");
        assert!(row["error"].contains("train.init") && row["error"].contains("missing.grin"), "{row:?}");
        assert!(root.join(&row["log"]).is_file());
    }
    assert!(out.stdout.contains("best:    none") && !root.join("best.toml").exists(), "{}", out.text());
    // A failure is the trial's result: a rerun does not run it again.
    let again = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(again.code, Some(1));
    assert!(again.stdout.contains("2 trials, 2 done, 0 to run"), "{}", again.text());
}

#[test]
fn slurm_scripts_make_every_array_task_a_worker_on_the_study() {
    if !optuna_ok() {
        return;
    }
    let dir = setup(
        "name = \"big\"\nbase = \"base.toml\"\ntrials = 40\nsampler = \"tpe\"\n[params]\n\"train.lr\" = { min = 1e-4, max = 1e-2, log = true }\n",
    );
    let out = sweep(dir.path(), &["configs/sweep.toml", "--slurm", "--jobs", "8", "--sbatch=--gres=gpu:1"]);
    let msg = out.text();
    assert_eq!(out.code, Some(0), "{msg}");
    let root = dir.path().join("runs/sweeps/big");
    let array = read(&root.join("sweep.slurm"));
    assert!(array.contains("#SBATCH --array=0-7") && array.contains("#SBATCH --gres=gpu:1"), "{array}");
    let journal = root.join("study.journal").canonicalize().unwrap();
    assert!(array.contains(&format!("--storage {}", journal.display())) && array.contains("--jobs 1"), "{array}");
    assert!(journal.is_file(), "the study exists before any task starts");
    assert!(read(&root.join("precompute.slurm")).contains("--prepare"));
    assert!(read(&root.join("merge.slurm")).contains("--merge"));
    assert!(msg.contains("--dependency=afterok:$pre") && msg.contains("--dependency=afterany:$arr"), "{msg}");
    assert!(!root.join("trials").read_dir().unwrap().any(|_| true), "--slurm runs no trial");
}

#[test]
fn values_grin_refuses_are_named_before_anything_runs() {
    if !python_ok() {
        return;
    }
    let dir = setup("");
    let cases = [
        ("[params]\n\"train.lr\" = [0.01, -1.0]\n", "param `train.lr`: value -1.0 is refused by grin config"),
        ("[params]\n\"train.lr\" = { min = -0.1, max = 0.1 }\n", "param `train.lr`: min -0.1 is refused"),
        ("[params]\n\"train.batch_size\" = { min = 1, max = 100000, int = true }\n", "`train.batch_size`: max 100000"),
        ("[params]\n\"train.lrr\" = [0.01]\n", "unknown field `lrr`"),
        ("[params]\n\"train.lr\" = [0.01]\n[set]\n\"train.steps\" = 0\n", "base config with [set]"),
        ("[params]\n\"train.lr\" = [0.01]\n[set]\n\"train.lr\" = 0.1\n", "[set] key `train.lr`: also a param"),
        // A metric no trial could report is refused before the first trial trains.
        (
            "metric = \"val_photo_ap\"\n[params]\n\"train.lr\" = [0.01]\n",
            "metric `val_photo_ap` needs train.val_photos > 0",
        ),
        (
            "metric = \"val_photo_ap\"\n[params]\n\"train.lr\" = [0.01]\n[set]\n\"train.val_photos\" = 5\n",
            "key `train.val_photos`: 5 needs real photos with faces",
        ),
    ];
    for (body, what) in cases {
        let sweep_toml = format!("name = \"bad\"\nbase = \"base.toml\"\nmode = \"on-the-fly\"\n{body}");
        std::fs::write(dir.path().join("configs/sweep.toml"), &sweep_toml).unwrap();
        let out = sweep(dir.path(), &["configs/sweep.toml"]);
        let msg = assert_refused(dir.path(), &out, what);
        if what.starts_with("param `train.lr`: value") {
            assert!(msg.contains("key `train.lr`"), "grin's own words name the key: {msg}");
        }
    }
}

#[test]
fn a_study_refuses_a_sweep_that_changed_under_it() {
    if !optuna_ok() {
        return;
    }
    let first = "name = \"same\"\nbase = \"base.toml\"\nmode = \"on-the-fly\"\n[params]\n\"train.lr\" = [0.01]\n";
    let dir = setup(first);
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(0), "{}", out.text());
    // Another base value: the trials so far were measured on something else.
    std::fs::write(dir.path().join("configs/sweep.toml"), format!("{first}[set]\n\"train.steps\" = 12\n")).unwrap();
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(2), "{}", out.text());
    assert!(
        out.stderr.contains("study `same`") && out.stderr.contains("key `train.steps` (10 in the study, 12 now)"),
        "{}",
        out.text()
    );
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "{}", out.stderr);

    // A study begun before grin had a key (as `model.top_down` once was):
    // the key, at its default, is accepted with a note; a rerun is quiet.
    std::fs::write(dir.path().join("configs/sweep.toml"), first).unwrap();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-sweep/bin/python");
    let forget = "import optuna, sys\n\
        from optuna.storages.journal import JournalFileBackend\n\
        s = optuna.load_study(study_name='same', storage=optuna.storages.JournalStorage(JournalFileBackend(sys.argv[1])))\n\
        a = s.user_attrs['grin_sweep']\n\
        del a['base_keys']['model.top_down']\n\
        s.set_user_attr('grin_sweep', a)\n";
    let done = Command::new(&python)
        .args(["-c", forget])
        .arg(dir.path().join("runs/sweeps/same/study.journal"))
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(0), "{}", out.text());
    assert!(out.stdout.contains("began before grin had `model.top_down`; at its default"), "{}", out.text());
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_eq!(out.code, Some(0), "{}", out.text());
    assert!(!out.stdout.contains("began before"), "{}", out.text());
}

#[test]
fn features_keys_are_refused_when_trials_share_a_dataset() {
    if !python_ok() {
        return;
    }
    let dir = setup("name = \"feat\"\nbase = \"base.toml\"\n[params]\n\"features.augment.flip\" = [0.0, 0.5]\n");
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    let msg = assert_refused(dir.path(), &out, "`features.augment.flip`");
    assert!(msg.contains("on-the-fly"), "{msg}");
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
fn a_huge_budget_or_grid_is_refused_quickly() {
    if !python_ok() {
        return;
    }
    let dir = setup(
        "name = \"huge\"\nbase = \"base.toml\"\ntrials = 1000000000000\n[params]\n\"train.lr\" = { min = 1e-4, max = 1e-2, log = true }\n",
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    let msg = assert_refused(dir.path(), &out, "key `trials`");
    assert!(msg.contains("100000"), "the limit is named: {msg}");
    // A grid of 10^8 points: the grid sampler would hold every one in memory.
    let grid = (b'a'..=b'h')
        .map(|c| format!("\"train.{}\" = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n", c as char))
        .collect::<String>();
    std::fs::write(
        dir.path().join("configs/sweep.toml"),
        format!("name = \"grid\"\nbase = \"base.toml\"\n[params]\n{grid}"),
    )
    .unwrap();
    let started = Instant::now();
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    let msg = assert_refused(dir.path(), &out, "100000000 points");
    assert!(msg.contains("sampler = \"random\""), "the way out is named: {msg}");
    assert!(started.elapsed() < Duration::from_secs(30), "refused without building the grid");
}

#[test]
fn a_list_mixing_numbers_and_strings_is_refused_before_any_trial() {
    if !python_ok() {
        return;
    }
    let dir = setup(
        "name = \"mixed\"\nbase = \"base.toml\"\nmode = \"on-the-fly\"\n[params]\n\"train.lr\" = [0.01, \"fast\"]\n",
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    let msg = assert_refused(dir.path(), &out, "param `train.lr`");
    assert!(msg.contains("\"fast\""), "the bad value is named: {msg}");
}

#[test]
fn bad_counts_ranges_samplers_and_list_values_are_refused_before_any_trial() {
    if !python_ok() {
        return;
    }
    let dir = setup("");
    let cases = [
        ("trials = 0\n[params]\n\"train.lr\" = [0.01]\n", "key `trials`"),
        ("trials = -3\n[params]\n\"train.lr\" = [0.01]\n", "key `trials`"),
        ("trials = 2.5\n[params]\n\"train.lr\" = [0.01]\n", "key `trials`"),
        ("sampler = \"cmaes\"\n[params]\n\"train.lr\" = [0.01]\n", "key `sampler`"),
        (
            "tpe_startup_trials = 3\n[params]\n\"train.lr\" = [0.01]\n",
            "key `tpe_startup_trials` is for sampler = \"tpe\"",
        ),
        (
            "sampler = \"tpe\"\ntpe_startup_trials = 0\n[params]\n\"train.lr\" = [0.01]\n",
            "key `tpe_startup_trials` must be",
        ),
        ("sampler = \"grid\"\n[params]\n\"train.lr\" = { min = 0.001, max = 0.01 }\n", "needs every param as a list"),
        ("pruner = \"median\"\nmetric = \"steps_per_s\"\n[params]\n\"train.lr\" = [0.01]\n", "key `pruner`"),
        ("metric = \"face_AP\"\n[params]\n\"train.lr\" = [0.01]\n", "key `metric`: 'face_AP' is not a summary figure"),
        ("[params]\n\"train.lr\" = { min = 0.1, max = 0.01 }\n", "param `train.lr`: min"),
        ("[params]\n\"train.lr\" = { min = 0.0, max = 0.1, log = true }\n", "param `train.lr`: a log range"),
        ("[params]\n\"train.lr\" = { min = -1.0, max = 0.1, log = true }\n", "param `train.lr`: a log range"),
        ("[params]\n\"model.width_mult\" = [1, 0.5]\n", "param `model.width_mult`: grid mixes"),
        ("[params]\n\"train.lr\" = [0.01, nan]\n", "param `train.lr`: grid value 2"),
        ("[params]\n\"train.lr\" = [0.01, 0.01]\n", "grid value 2 (0.01) repeats value 1"),
        ("[params]\n\"train.lr\" = [[0.01, 0.1]]\n", "param `train.lr`: grid value 1"),
    ];
    for (body, what) in cases {
        let sweep_toml = format!("name = \"bad\"\nbase = \"base.toml\"\nmode = \"on-the-fly\"\n{body}");
        std::fs::write(dir.path().join("configs/sweep.toml"), &sweep_toml).unwrap();
        let out = sweep(dir.path(), &["configs/sweep.toml"]);
        assert_refused(dir.path(), &out, what);
    }
}

#[test]
fn a_sweep_can_choose_on_the_best_models_validation_score() {
    if !optuna_ok() {
        return;
    }
    let dir = setup(
        r#"name = "best"
base = "base.toml"
mode = "precomputed"
samples = 64
metric = "best_val_face_ap"
[params]
"train.lr" = [0.003, 0.01]
[set]
"train.eval_every" = 5
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    let stdout = out.text();
    assert_eq!(out.code, Some(0), "{stdout}");
    let root = dir.path().join("runs/sweeps/best");
    let rows = results(&root.join("results.csv"));
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        let run = root.join("trials").join(&row["trial"]);
        let summary: serde_json::Value = serde_json::from_str(&read(&run.join("summary.json"))).unwrap();
        assert_eq!(num(row, "best_val_face_ap"), summary["best"]["val_face_ap"].as_f64().unwrap(), "{row:?}");
        assert_eq!(num(row, "best_step"), summary["best"]["step"].as_f64().unwrap());
        assert!(run.join("best.grin").is_file() && run.join("model.grin").is_file());
    }
    // Without validation scores there is no best model to choose on: refused before anything trains.
    let dir = setup(
        r#"name = "nobest"
base = "base.toml"
metric = "best_val_face_ap"
[params]
"train.lr" = [0.003, 0.01]
"#,
    );
    let out = sweep(dir.path(), &["configs/sweep.toml"]);
    assert_refused(dir.path(), &out, "metric `best_val_face_ap` needs train.eval_every > 0");
}

/// The figures a sweep may optimise (`SUMMARY_METRICS` in its sweep_file.py) are
/// keys `grin_train::Summary` writes, so a rename in Rust fails here, not
/// after a sweep's first trial. `best_val_face_ap` is the summary's
/// `best.val_face_ap`.
#[test]
fn the_sweeps_metrics_are_keys_of_the_summary() {
    let file = "scripts/grin_sweep/sweep_file.py";
    let script = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join(file));
    // The quoted names from `NAME = ` to the tuple's closing parenthesis.
    let names = |name: &str| -> Vec<String> {
        let at = script.find(&format!("\n{name} = ")).unwrap_or_else(|| panic!("{name} in {file}"));
        let tuple = &script[at..at + script[at..].find(')').unwrap()];
        tuple.split('"').skip(1).step_by(2).map(String::from).collect()
    };
    let (metrics, more) = (names("METRICS"), names("SUMMARY_METRICS"));
    assert!(metrics.len() >= 5 && more.len() >= 3, "read {metrics:?} and {more:?} from {file}");
    // Every optional figure set, as a run that scored its scenes has them.
    let run = grin_terms::summary::RunFigures {
        face_ap: Some(0.5),
        smile_accuracy: Some(0.5),
        ..grin_terms::summary::RunFigures::example(grin_terms::Mode::Precomputed)
    };
    let summary = grin_train::Summary {
        run,
        photos: Vec::new(),
        val_photos: Vec::new(),
        val_photo_ap: Some(0.5),
        balance: None,
        best: Some(grin_train::Best { step: 10, val_face_ap: 0.5 }),
        stopped_early: false,
    };
    let json = serde_json::to_value(&summary).unwrap();
    for name in metrics.iter().chain(&more) {
        let value = match name.as_str() {
            "best_val_face_ap" => &json["best"]["val_face_ap"],
            key => &json[key],
        };
        assert!(value.is_number(), "scripts/sweep's metric {name:?} is not a number in summary.json: {value}");
    }
}
