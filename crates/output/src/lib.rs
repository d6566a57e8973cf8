//! Writing a file the user named, without losing anything (models, exports,
//! drawings, checkpoints, datasets, summaries: every output goes through
//! [`write_with`]).
//!
//! - A regular file (or a new one) is written to a temporary file beside
//!   it, synced, and renamed over it: a crash or a full disk mid-write
//!   leaves the previous file whole, and no temporary file behind. A file
//!   it replaces keeps its permissions; a read-only one is refused, since
//!   whoever made it read-only did not want it changed.
//! - A symbolic link is written through to its target, as `cp` does.
//! - A character device (`/dev/null`, `/dev/full`, a terminal) is written
//!   through, never replaced; a FIFO too, when it has a reader (opening one
//!   without a reader would wait forever, so that is refused).
//! - An output that is the same file as one of the command's inputs is
//!   refused before anything is written, as `cp` and ffmpeg refuse it. An
//!   input that is a folder (a dataset, a photo source) stands for every
//!   file under it and every file or folder a link under it reaches, so
//!   nothing is written inside any of them, and an output folder holds
//!   none of them, nor a link to one (`reach.rs`).
//!
//! - A name that cannot be a file grin writes (a folder, `x/`, a missing
//!   folder, a link to nothing or to another kind of file) is refused, and
//!   a file of a folder grin keeps for a run or dataset too (`place.rs`).
//! - A temporary file left by a writer that was killed is removed by the
//!   next write into its folder (`temp.rs`).
//! - Several files that are one output (a report) go through
//!   [`write_files`]: none replaces its file until all are written.
//! - A file read now and written back later goes through [`hold`], which
//!   refuses to write over a newer one (`rewrite.rs`).
//!
//! Errors name the path that failed, and the output it was for. A folder
//! written by one process at a time is locked through [`try_lock`]. A
//! binary file's bytes are laid out by [`parts`], whose checksums catch
//! what a crash cannot: a file damaged after it was written. A file the
//! user named is read through [`open_plain`]: a FIFO or a device never hangs
//! a read.
//!
//! A leaf: it depends on no grin crate and on no Burn.
#![forbid(unsafe_code)]

mod lock;
/// The module is the API: `parts::frame`, `parts::unframe`.
pub mod parts;
mod place;
mod plain;
mod reach;
mod replace;
mod rewrite;
mod temp;

pub use lock::{hold_folder, try_lock, HeldFolder, LockMode, Locked, LOCK_FILE};
pub use place::{check_file, check_file_place, refuse_a_kept_file};
pub use plain::{open_plain, read_plain, FOLDER, NOT_A_FILE};
pub use rewrite::{hold, Held};
pub use temp::is_temp_name;

use reach::Reach;
use std::fmt;
use std::fs::Metadata;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What went wrong, and on which path.
#[derive(Debug)]
pub struct OutputError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for OutputError {}

fn fail(path: &Path, message: impl Into<String>) -> OutputError {
    OutputError { path: path.to_path_buf(), message: message.into() }
}

/// Writes `bytes` to `path` (see the crate's rules); `inputs` are the files
/// the command read, which `path` must not be.
pub fn write_file(path: &Path, inputs: &[&Path], bytes: &[u8]) -> Result<(), OutputError> {
    write_with(path, inputs, |w| w.write_all(bytes))
}

/// Writes what `fill` writes to `path` (see the crate's rules).
pub fn write_with(
    path: &Path,
    inputs: &[&Path],
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), OutputError> {
    write_checked(path, inputs, fill, None)
}

/// The refusals [`write_with`] makes before writing (an output that is an
/// input, or inside an input folder), made now: a command checks its
/// outputs before its work (minutes of training or timing), not only after.
///
/// An output that is a folder (a command writes its files into it) must
/// not hold an input: an input named like one of the files it writes
/// (`photos.json`, `shard-00000.bin`) would be replaced (issue 90, round 7).
pub fn check(path: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    let reach = Reach::of(inputs);
    refuse_input_folders(path, &reach)?;
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => refuse_inputs_inside(path, &reach),
        Ok(m) => refuse_inputs(path, &m, inputs, &reach),
        Err(_) => Ok(()),
    }
}

/// An input inside the output folder `path`, or a link in it that reaches
/// one (a report written there is written through it), compared by
/// resolved paths as [`refuse_input_folders`] compares.
fn refuse_inputs_inside(path: &Path, reach: &Reach) -> Result<(), OutputError> {
    let Ok(folder) = std::fs::canonicalize(path) else { return Ok(()) };
    // The folder's own walk only when no input lies in it.
    let held = match reach.inside(&folder) {
        Some(input) => format!("holds an input ({})", input.display()),
        None => match reach.link_into(&folder) {
            Some((link, input)) => format!("holds a link ({}) to an input ({})", link.display(), input.display()),
            None => return Ok(()),
        },
    };
    Err(fail(
        path,
        format!("{held}, which the files written there could replace; name another output folder, or move it out"),
    ))
}

/// Refuses when standard output is a file that is one of `inputs`, or
/// lies in an input folder (a run's `config.toml`, a dataset's manifest, a
/// source's photo): the shell opened it for the command (`grin-detect
/// --json r.jpg >> r.jpg`, `grin verify st >> st/manifest.json`), which
/// appended to what it read (rounds 25 and 27 of issue 90), where `cat`
/// refuses with "input file is output file".
pub fn refuse_stdout_on_inputs(inputs: &[&Path]) -> Result<(), OutputError> {
    // `/dev/stdout` is this process's descriptor 1, whatever it names.
    let Ok(out) = std::fs::metadata("/dev/stdout") else { return Ok(()) };
    if !out.is_file() {
        return Ok(());
    }
    let why = "the output would be written into it; send the output elsewhere";
    if let Some(input) = inputs.iter().find(|input| std::fs::metadata(input).is_ok_and(|m| same_file(&out, &m))) {
        return Err(fail(input, format!("is also standard output: {why}")));
    }
    let Ok(file) = std::fs::canonicalize("/dev/stdout") else { return Ok(()) };
    let reach = Reach::of(inputs);
    match reach.file_at(&file).or_else(|| reach.folder_holding(&file)) {
        Some(input) => {
            Err(fail(&file, format!("is also standard output, and lies in an input ({}): {why}", input.display())))
        }
        None => Ok(()),
    }
}

/// Whether `a` and `b` name one existing file (by device and inode: a
/// link or a hard link to it counts).
pub fn is_same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => same_file(&a, &b),
        _ => false,
    }
}

/// Whether `a` and `b` name one file, existing or to be made: the same
/// file, or one name in the same folder however each path reaches it (`x`,
/// `./x`, `/abs/x`, a linked or bind-mounted folder). Two outputs of one
/// command on one place lose the first (round 19: `--order-out o.json
/// --json ./o.json`, a new file, kept only the figures).
pub fn is_same_place(a: &Path, b: &Path) -> bool {
    is_same_file(a, b)
        || (a.file_name().is_some() && a.file_name() == b.file_name() && is_same_file(folder_of(a), folder_of(b)))
}

/// A check run once the new bytes are written and synced, just before they
/// replace the file: an error leaves the file as it is.
type BeforeRename<'a> = Option<&'a dyn Fn() -> Result<(), OutputError>>;

/// [`write_with`], with `check` run before a regular file is replaced.
fn write_checked(
    path: &Path,
    inputs: &[&Path],
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    check: BeforeRename<'_>,
) -> Result<(), OutputError> {
    match target_of(path, inputs)? {
        Target::Replace(target, existing) => {
            let staged = replace::stage(&target, existing.as_ref(), fill)?;
            if let Some(check) = check {
                check()?;
            }
            staged.commit()
        }
        Target::Through(m) => replace::write_through(path, &m, fill),
    }
}

/// Writes several files as one output (a report's pictures and figures):
/// each is written whole beside its target first, and none replaces its
/// target until all are, so a full disk or a refusal midway leaves every
/// earlier file as it was (round 26 of issue 90: a report half replaced).
/// Each must be a regular file or a new one ([`check_files`]).
pub fn write_files(files: &[(PathBuf, Vec<u8>)], inputs: &[&Path]) -> Result<(), OutputError> {
    let mut staged = Vec::new();
    for (path, bytes) in files {
        match target_of(path, inputs)? {
            Target::Replace(target, existing) => {
                staged.push(replace::stage(&target, existing.as_ref(), |w| w.write_all(bytes))?)
            }
            Target::Through(_) => return Err(not_one_of_files(path)),
        }
    }
    staged.into_iter().try_for_each(replace::Staged::commit)
}

/// [`write_files`]' refusals, made before the work: every refusal of a
/// single output, and a FIFO or a device, which is written as it goes, not
/// whole beside it (round 27: a report name that was a FIFO or `/dev/full`
/// failed after the others were replaced).
pub fn check_files(paths: &[PathBuf], inputs: &[&Path]) -> Result<(), OutputError> {
    for path in paths {
        place::check_file_place(path)?;
        if let Target::Through(_) = target_of(path, inputs)? {
            return Err(not_one_of_files(path));
        }
    }
    Ok(())
}

fn not_one_of_files(path: &Path) -> OutputError {
    fail(
        path,
        "is not a regular file (a FIFO or a device): the files of one output are each written whole, then \
         replaced together; remove it, or name another folder",
    )
}

/// Where an output's bytes go, once it is known to be no input: a regular
/// file (resolved through a symbolic link, so the link survives) or a new
/// one is replaced; a device or a FIFO is written through.
enum Target {
    Replace(PathBuf, Option<Metadata>),
    Through(Metadata),
}

fn target_of(path: &Path, inputs: &[&Path]) -> Result<Target, OutputError> {
    place::file_place(path)?;
    let reach = Reach::of(inputs);
    refuse_input_folders(path, &reach)?;
    let existing = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Target::Replace(path.to_path_buf(), None)),
        Err(e) => return Err(fail(path, format!("cannot inspect: {e}"))),
    };
    refuse_inputs(path, &existing, inputs, &reach)?;
    if !existing.is_file() {
        return Ok(Target::Through(existing));
    }
    let target = std::fs::canonicalize(path).map_err(|e| fail(path, format!("cannot resolve: {e}")))?;
    Ok(Target::Replace(target, Some(existing)))
}

/// The same file: by device and inode (a hard link or a symbolic link to
/// an input is that input), or resolved to a file a link in an input
/// folder reaches.
fn refuse_inputs(path: &Path, out: &Metadata, inputs: &[&Path], reach: &Reach) -> Result<(), OutputError> {
    let same = |input: &&&Path| std::fs::metadata(input).is_ok_and(|m| same_file(out, &m));
    let input = match inputs.iter().find(same) {
        Some(input) => Some(*input),
        None => std::fs::canonicalize(path).ok().and_then(|resolved| reach.file_at(&resolved)),
    };
    match input {
        Some(input) => Err(fail(
            path,
            format!("is also an input ({}): refusing to overwrite it; name another output", input.display()),
        )),
        None => Ok(()),
    }
}

/// An output inside an input folder, or a folder a link in one reaches,
/// whether or not it exists yet (a new file there would still change what
/// the folder holds). Compared by resolved paths, so `./data/../data/x`
/// and links are caught too.
fn refuse_input_folders(path: &Path, reach: &Reach) -> Result<(), OutputError> {
    let Some(resolved) = resolve_output(path) else { return Ok(()) };
    match reach.folder_holding(&resolved) {
        Some(input) => Err(fail(
            path,
            format!("is inside an input folder ({}): refusing to write there; name another output", input.display()),
        )),
        None => Ok(()),
    }
}

/// Where `path` resolves to: the file itself when it exists, else its
/// nearest existing folder resolved, joined with the rest of the path (a
/// command may make the missing folders before it writes). None when no
/// part of it resolves.
fn resolve_output(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        rest.push(at.file_name()?);
        at = folder_of(at);
        if let Ok(resolved) = std::fs::canonicalize(at) {
            return Some(rest.iter().rev().fold(resolved, |p, part| p.join(part)));
        }
    }
}

/// The folder `path`'s file is in: its parent, or `.` for a bare name.
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(unix)]
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(_: &Metadata, _: &Metadata) -> bool {
    false
}
