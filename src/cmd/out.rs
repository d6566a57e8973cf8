//! A command's standard output, written so that a closed pipe ends the
//! command quietly (`grin config --keys | head -1`): `println!` panics
//! there ("failed printing to stdout: Broken pipe", exit 101). The reader
//! has what it asked for, so the command ends with status 0, as ripgrep
//! and grin-detect do.

use std::fmt;
use std::io::{self, Write};

/// The reader of standard output went away; `main` ends quietly on it.
#[derive(Debug)]
pub(crate) struct ClosedPipe;

impl fmt::Display for ClosedPipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for ClosedPipe {}

/// Writes `args` to standard output: a closed pipe is [`ClosedPipe`], any
/// other failure (a full disk behind `>`) an error naming stdout.
pub(crate) fn write(args: fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(ClosedPipe.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to standard output")),
    }
}
