//! The README's front door held to a real run: the files Quickstart step 1
//! says a run folder holds are the files a run of `configs/demo.toml`
//! (shortened to a few steps) leaves, no more and no fewer. The command
//! examples themselves are checked by `doc_examples.rs`; `grin-detect
//! --draw`'s promise by `crates/infer/tests/cli.rs`.

use crate::common::train_command;
use std::collections::BTreeSet;
use std::path::Path;

/// The paragraph of README.md that follows Quickstart's first command.
fn run_paragraph() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme.find("**1. Train**").expect("README.md: Quickstart step 1 is gone");
    let after = &readme[start..];
    let body = after.split("```").nth(2).expect("README.md: step 1 has no command block");
    body.split("\n\n").find(|p| !p.trim().is_empty()).unwrap_or_default().to_string()
}

/// The file names the paragraph puts in backticks (`config.toml`, not
/// `runs/demo/`, `scripts/tensorboard` or `--runs-dir DIR`).
fn promised(paragraph: &str) -> BTreeSet<String> {
    paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.contains('.') && !w.contains(['/', ' ']) && !w.starts_with('-'))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_run_folder_holds_what_the_readme_says() {
    let paragraph = run_paragraph();
    let mut files = promised(&paragraph);
    assert!(files.contains("model.grin") && files.contains("config.toml"), "{files:?} from:\n{paragraph}");
    // Only a config with real photos draws a precision-recall curve, as the paragraph says.
    assert!(paragraph.contains("`pr_curve.svg` for a config with real photos"), "{paragraph}");
    files.remove("pr_curve.svg");

    let runs = tempfile::tempdir().unwrap();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/demo.toml");
    let out = train_command(&config, runs.path(), "demo")
        .args(["--set", "train.steps=4", "--set", "train.log_every=2", "--set", "train.eval_samples=8"])
        .args(["--set", "train.warmup_steps=1", "--no-balance"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written: BTreeSet<String> = std::fs::read_dir(runs.path().join("demo"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, files, "the run folder (left) against README.md's Quickstart step 1 (right)");
}
