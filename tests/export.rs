//! `grin export` through the real binary: it writes the library's ONNX
//! bytes for `--model` and `--run`, and a bad model, an unwritable `--out`
//! or an unknown `--format` is one line naming it, with nothing written.

use std::path::Path;
use std::process::{Command, Output};

const GRIN: &str = env!("CARGO_BIN_EXE_grin");

fn shipped() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/default.grin")
}

fn grin_export(args: &[&str]) -> Output {
    Command::new(GRIN).arg("export").args(args).output().expect("run grin")
}

/// The one line of an error, checked to be one line.
fn error_line(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "exit status");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr.trim_end().to_string()
}

#[test]
fn export_writes_the_library_bytes_for_a_model_file_and_for_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grin.onnx");
    let model = shipped();
    let run = grin_export(&["--model", model.to_str().unwrap(), "--format", "onnx", "--out", out.to_str().unwrap()]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("opset 13") && stdout.contains("score threshold"), "{stdout}");

    let bytes = std::fs::read(&model).unwrap();
    let (spec, detector) =
        grin_model::file::from_bytes::<burn_ndarray::NdArray<f32>>(&bytes, &Default::default()).unwrap();
    let expected = grin_export::to_onnx(&spec, &detector.folded(&spec));
    assert!(std::fs::read(&out).unwrap() == expected, "the file is the library's export");

    // A run folder: its model.grin; --format defaults to onnx.
    let run_dir = dir.path().join("runs/shipped");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::copy(&model, run_dir.join("model.grin")).unwrap();
    let from_run = dir.path().join("from-run.onnx");
    let run = grin_export(&["--run", run_dir.to_str().unwrap(), "--out", from_run.to_str().unwrap()]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(std::fs::read(&from_run).unwrap() == expected);
    // The run folder is an input as a whole: its config is not the place for an export.
    let config = run_dir.join("config.toml");
    std::fs::write(&config, "name = \"shipped\"\n").unwrap();
    let e = error_line(&grin_export(&["--run", run_dir.to_str().unwrap(), "--out", config.to_str().unwrap()]));
    assert!(e.contains("config.toml") && e.contains("input"), "{e}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "name = \"shipped\"\n");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers.len(), 3, "no temporary left behind: {leftovers:?}");
}

#[test]
fn a_bad_model_is_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.onnx");
    let missing = dir.path().join("missing.grin");
    let e = error_line(&grin_export(&["--model", missing.to_str().unwrap(), "--out", out.to_str().unwrap()]));
    assert!(e.contains(&*missing.to_string_lossy()) && e.contains("cannot read model"), "{e}");

    let not_a_model = dir.path().join("notes.grin");
    std::fs::write(&not_a_model, "hello").unwrap();
    let e = error_line(&grin_export(&["--model", not_a_model.to_str().unwrap(), "--out", out.to_str().unwrap()]));
    assert!(e.contains(&*not_a_model.to_string_lossy()) && e.contains("not a grin model file"), "{e}");

    let empty_run = dir.path().join("runs/empty");
    std::fs::create_dir_all(&empty_run).unwrap();
    let e = error_line(&grin_export(&["--run", empty_run.to_str().unwrap(), "--out", out.to_str().unwrap()]));
    assert!(e.contains("runs/empty/model.grin"), "{e}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn an_unwritable_out_is_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = shipped();
    let model = model.to_str().unwrap();
    for out in [dir.path().join("no/such/folder/grin.onnx"), dir.path().to_path_buf()] {
        let e = error_line(&grin_export(&["--model", model, "--out", out.to_str().unwrap()]));
        assert!(e.contains(&format!("error: {}: ", out.display())), "{e}");
    }
    // Round 10: a missing folder was named only as a temporary file that
    // could not be made, after the export's work.
    let e = error_line(&grin_export(&["--model", model, "--out", &format!("{}/no/x.onnx", dir.path().display())]));
    assert!(e.ends_with("/no does not exist (grin makes no folder for a file it writes)"), "{e}");
    // An ONNX graph under a model's name replaced another run's model.grin
    // (issue 90, round 9), and under a photo's name the photo (round 16).
    for name in ["model.GRIN", "holiday.jpg", "graph", ".onnx"] {
        let named = dir.path().join(name);
        let e = error_line(&grin_export(&["--model", model, "--out", named.to_str().unwrap()]));
        assert!(e.contains("an ONNX graph goes in a file named NAME.onnx"), "{e}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no temporary left behind");
}

#[test]
fn an_out_that_is_the_model_is_refused_and_the_model_kept() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.grin");
    std::fs::copy(shipped(), &model).unwrap();
    let before = std::fs::read(&model).unwrap();
    let m = model.to_str().unwrap();
    let e = error_line(&grin_export(&["--model", m, "--out", m]));
    assert!(e.contains("is also an input"), "{e}");
    assert_eq!(std::fs::read(&model).unwrap(), before);
}

#[test]
fn devices_and_fifos_are_written_through_or_refused_never_replaced() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let model = shipped();
    let model = model.to_str().unwrap();
    // Links in a scratch folder: a wrong grin replaces the link, not the device.
    let null = dir.path().join("null.onnx");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let run = grin_export(&["--model", model, "--out", null.to_str().unwrap()]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_symlink());
    let full = dir.path().join("full.onnx");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    let e = error_line(&grin_export(&["--model", model, "--out", full.to_str().unwrap()]));
    assert!(e.contains("No space left on device"), "{e}");
    let fifo = dir.path().join("pipe.onnx");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let e = error_line(&grin_export(&["--model", model, "--out", fifo.to_str().unwrap()]));
    assert!(e.contains("is a FIFO with no reader"), "{e}");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "still a FIFO");
}

#[test]
fn an_unknown_format_is_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grin.tflite");
    let model = shipped();
    let e = error_line(&grin_export(&[
        "--model",
        model.to_str().unwrap(),
        "--format",
        "tflite",
        "--out",
        out.to_str().unwrap(),
    ]));
    assert_eq!(e, "error: --format tflite: unknown format; grin exports onnx");
    assert!(!out.exists());
}
