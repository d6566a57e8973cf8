//! `grin simulate` end to end: flags, `--from-run` with a summary.json this
//! test writes, and the errors a user sees.

use grin_terms::summary::RunFigures;
use grin_terms::Mode;
use std::path::Path;
use std::process::{Command, Output};

fn grin(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grin")).args(args).current_dir(cwd).output().expect("run grin")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The number printed after `label` on the report line that starts with it.
fn figure(stdout: &str, label: &str) -> f64 {
    let line = stdout.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label}"));
    let rest = line.trim_start()[label.len()..].trim_start();
    let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    number.parse().unwrap_or_else(|_| panic!("no number in {line:?}"))
}

#[test]
fn flags_give_the_steady_state_and_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["simulate", "--load-ms", "100", "--load-jitter-ms", "10", "--loaders", "2", "--step-ms", "10"];
    std::fs::create_dir(dir.path().join("pics")).unwrap();
    let out = grin(&[&args[..], &["--seconds", "60", "--seed", "3", "--out", "pics/t.svg"]].concat(), dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("prediction min(1, N*S/L) = 20.0%"), "{stdout}");
    let busy = figure(&stdout, "device busy");
    assert!((busy - 20.0).abs() < 3.0, "busy {busy}%\n{stdout}");
    assert!(figure(&stdout, "batches consumed") > 1000.0, "{stdout}");
    let svg = std::fs::read_to_string(dir.path().join("pics/t.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("loader 1") && svg.contains("device busy"));

    // Same seed, same figures.
    let again = grin(&[&args[..], &["--seconds", "60", "--seed", "3", "--out", "t2.svg"]].concat(), dir.path());
    let (stdout2, _) = text(&again);
    assert_eq!(stdout.lines().take(5).collect::<Vec<_>>(), stdout2.lines().take(5).collect::<Vec<_>>());
}

#[test]
fn from_run_uses_the_measured_figures_and_flags_override() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("runs/r1");
    std::fs::create_dir_all(&run).unwrap();
    let figures = RunFigures {
        load_ms_per_batch: 40.0,
        load_jitter_ms: 2.0,
        loaders: 2,
        step_ms: 10.0,
        gpu_busy_pct: 47.5,
        ..RunFigures::example(Mode::OnTheFly)
    };
    std::fs::write(run.join("summary.json"), serde_json::to_string(&figures).unwrap()).unwrap();
    let out = grin(&["simulate", "--from-run", "runs/r1", "--seconds", "20"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("2 loaders x 40.000±2.000 ms per batch, queue 4, step 10.000 ms"), "{stdout}");
    assert!(stdout.contains("prediction min(1, N*S/L) = 50.0%"), "{stdout}");
    assert!(stdout.contains("(on-the-fly): predicted") && stdout.contains("vs measured 47.5% device busy"), "{stdout}");
    assert!(dir.path().join("timeline.svg").is_file());

    let out = grin(&["simulate", "--from-run", "runs/r1", "--loaders", "8", "--seconds", "5"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("8 loaders x 40.000") && stdout.contains("= 100.0%"), "{stdout}");
}

#[test]
fn bad_input_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = grin(&["simulate", "--load-ms", "10", "--step-ms", "5"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("--loaders is required"), "{stderr}");

    let out = grin(&["simulate", "--from-run", "runs/missing"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("runs/missing/summary.json"), "{stderr}");

    std::fs::create_dir_all(dir.path().join("r")).unwrap();
    let mut damaged = serde_json::to_value(RunFigures::example(Mode::InVram)).unwrap();
    damaged.as_object_mut().unwrap().remove("load_ms_per_batch");
    std::fs::write(dir.path().join("r/summary.json"), damaged.to_string()).unwrap();
    let out = grin(&["simulate", "--from-run", "r"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("r/summary.json") && stderr.contains("load_ms_per_batch"), "{stderr}");

    // Counts are bounded: 10^8 loaders exhausted memory, 10^7 ran for minutes (issue 90).
    for (loaders, queue, why) in [
        ("0", "1", "--loaders: loaders 0 must be within 1..=4096"),
        ("100000000", "1", "loaders 100000000 must be within 1..=4096"),
        ("4", "4294967296", "--queue: queue capacity 4294967296 must be within 1..=1048576 batches"),
    ] {
        let args = ["simulate", "--load-ms", "10", "--step-ms", "5", "--loaders", loaders, "--queue", queue];
        let out = grin(&args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out).1.contains(why), "{args:?}: {}", text(&out).1);
    }
    // Round 10: an SVG under another name, a missing folder found at the end.
    for (out_name, why) in [
        ("t.png", "--out t.png: the timeline is an SVG picture; name it .svg"),
        ("missing/t.svg", "missing/t.svg: missing does not exist (grin makes no folder for a file it writes)"),
    ] {
        let args = ["simulate", "--load-ms", "10", "--step-ms", "5", "--loaders", "2", "--out", out_name];
        let out = grin(&args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out).1.contains(why), "{args:?}: {}", text(&out).1);
        assert!(!dir.path().join("missing").exists() && !dir.path().join("t.png").exists());
    }
    // Round 7: the drawn length had no range (-3, 0, NaN drew nothing), and
    // a negative number was read as a flag.
    for (flag, value, why) in [
        ("--timeline-seconds", "-3", "-3 must be a number of seconds > 0"),
        ("--timeline-seconds", "nan", "nan must be a number of seconds > 0"),
        // Round 9: the quantity was named, not its flag.
        ("--step-ms", "-1", "--step-ms: step time -1.0 ms must be at least 0.001 ms"),
        // Round 10: a step of 1e-300 ms was blamed on --seconds.
        ("--step-ms", "1e-300", "--step-ms: step time 1e-300 ms must be at least"),
        ("--load-ms", "-1", "--load-ms: load time -1 ms must be a finite number >= 0"),
    ] {
        let mut args = vec!["simulate", "--loaders", "2", flag, value];
        if flag != "--load-ms" {
            args.extend(["--load-ms", "10"]);
        }
        if flag != "--step-ms" {
            args.extend(["--step-ms", "5"]);
        }
        let out = grin(&args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out).1.contains(why), "{args:?}: {}", text(&out).1);
    }
}
