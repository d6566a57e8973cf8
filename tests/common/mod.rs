//! What the integration tests that run `grin` share. Each test binary uses
//! part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const GRIN: &str = env!("CARGO_BIN_EXE_grin");

/// The tiny run the tests train, but for its `[train]` table: 64x64
/// synthetic scenes of at most two faces 18-40 px, a half-width network.
const TINY: &str = "name = \"tiny\"\n[features]\nwidth = 64\nheight = 64\nseed = 5\n[features.source]\n\
                    kind = \"synthetic\"\nmax_faces = 2\nmin_face = 18\nmax_face = 40\n[model]\nwidth_mult = 0.5\n";

/// Writes `dir/file`: the tiny run with `train` as its `[train]` table.
pub(crate) fn tiny_config(dir: &Path, file: &str, train: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, format!("{TINY}[train]\n{train}")).unwrap();
    path
}

/// `grin train` of `config` on the CPU, quiet, as run `name` under `runs`.
pub(crate) fn train_command(config: &Path, runs: &Path, name: &str) -> Command {
    let mut cmd = Command::new(GRIN);
    cmd.args(["train", "--backend", "cpu", "--quiet", "--config"])
        .arg(config)
        .args(["--name", name, "--runs-dir"])
        .arg(runs);
    cmd
}

/// Skips (or, under CI, fails) a test for a missing tool, saying which.
pub(crate) fn missing(why: &str) -> bool {
    assert!(std::env::var_os("CI").is_none(), "{why} (CI is set: a skipped test is a failure here)");
    eprintln!("SKIPPED, NOT PASSED: {why}");
    true
}
