//! What the integration tests that run `grin` share. Each test binary uses
//! part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

pub(crate) const GRIN: &str = env!("CARGO_BIN_EXE_grin");

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
