//! Where a file the user names as an output may go: a file's name in an
//! existing folder, no link to nothing or to another kind of file, and no
//! file of a folder grin keeps for a run or a dataset. Checked before a
//! command's work, and by every write.

use crate::{check, fail, folder_of, OutputError, LOCK_FILE};
use std::io;
use std::path::Path;

/// A file output the user names, checked before the work: a name that
/// cannot be a file ([`check_file_place`]), then [`check`] and
/// [`refuse_a_kept_file`]. The write checks again.
pub fn check_file(path: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    check_file_place(path)?;
    check(path, inputs)?;
    refuse_a_kept_file(path)
}

/// Refuses a name that cannot be a file grin writes: a folder, a name
/// ending in `/`, or one whose folder is missing or is no folder. grin
/// makes no folder for a file: a mistyped folder is the user's to see
/// (round 10: `export --out missing/x.onnx` and `--draw o.png/` failed only
/// when written, as "cannot create a temporary file", after the work).
pub fn check_file_place(path: &Path) -> Result<(), OutputError> {
    file_place(path)?;
    // A regular file is written beside its target and renamed: a folder
    // that takes no new file (read-only, /proc, /sys) is found now, by
    // making one there (round 17: `--draw /sys/x.png` failed after the
    // work). A device or FIFO is written in place.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Ok(());
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let folder = folder_of(path);
    crate::temp::create(folder, &name)
        .map(drop)
        .map_err(|e| fail(path, format!("cannot write in its folder {}: {e}", folder.display())))
}

/// [`check_file_place`] but for the trial file: the writer that is about
/// to make its own.
pub(crate) fn file_place(path: &Path) -> Result<(), OutputError> {
    if path.is_dir() {
        return Err(fail(path, "is a folder: name a file"));
    }
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") || path.file_name().is_none() {
        return Err(fail(path, "ends in /, so names a folder: name a file"));
    }
    refuse_standard_streams(path)?;
    // A link to nothing: writing through it would make a file where the
    // link points, replacing it would lose the link (round 10 replaced it).
    if path.is_symlink() && !path.exists() {
        let target = std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_default();
        return Err(fail(
            path,
            format!("is a link to {target}, which does not exist: remove the link or name another file"),
        ));
    }
    // A link to another kind of file: what the name says is written where
    // the target is, and a model behind `x.png` became a PNG (round 11).
    // (A link to a device, `/dev/null`, is written through as the device is.)
    if let (true, Ok(target)) = (path.is_symlink(), std::fs::canonicalize(path)) {
        let kind = |p: &Path| p.extension().map(|e| e.to_ascii_lowercase());
        if target.is_file() && kind(path) != kind(&target) {
            let message =
                format!("is a link to {}, another kind of file: name that file, or another", target.display());
            return Err(fail(path, message));
        }
    }
    // A socket is no file to write, found now rather than after the work
    // (round 12: `--draw sock.png` after detection).
    #[cfg(unix)]
    if std::fs::metadata(path).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())) {
        return Err(fail(path, "is a socket: not a file grin can write"));
    }
    // Found before the work, as every other refusal here (round 17: a
    // read-only `--draw` target was refused after detection).
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().readonly()) {
        return Err(fail(path, "is read-only: not replaced (make it writable, or name another file)"));
    }
    let folder = folder_of(path);
    match std::fs::metadata(folder) {
        Ok(m) if m.is_dir() => Ok(()),
        Err(e) if e.kind() != io::ErrorKind::NotFound && e.kind() != io::ErrorKind::NotADirectory => {
            Err(fail(path, format!("cannot inspect its folder {}: {e}", folder.display())))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(fail(path, format!("{} does not exist (grin makes no folder for a file it writes)", folder.display())))
        }
        _ => {
            Err(fail(path, format!("{} is not a folder (grin makes no folder for a file it writes)", folder.display())))
        }
    }
}

/// An output that is the file standard output or standard error goes to
/// (`--first-png /dev/stdout > o.raw`, `--draw o.png … > o.png`): what the
/// command writes there would be mixed with it, or lost when it is
/// replaced (round 26 of issue 90 refused it as "another kind of file").
fn refuse_standard_streams(path: &Path) -> Result<(), OutputError> {
    let Ok(out) = std::fs::metadata(path) else { return Ok(()) };
    for (stream, name) in [("/dev/stdout", "standard output"), ("/dev/stderr", "standard error")] {
        if std::fs::metadata(stream).is_ok_and(|m| m.is_file() && crate::same_file(&m, &out)) {
            return Err(fail(
                path,
                format!(
                    "is also {name}: what the command writes there would be mixed with it, or lost; name another file"
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a file the user named as an output when it already is a file of
/// a folder grin keeps for a run or a dataset (one holding [`LOCK_FILE`]):
/// its config, summary, checkpoint, plots and shards are that run's or
/// dataset's, and writing over one damaged it (issue 90, round 10: `grin
/// export --out runs/other/config.toml`). A new file there is the user's
/// to add. Not for the run's or dataset's own writer.
pub fn refuse_a_kept_file(path: &Path) -> Result<(), OutputError> {
    let Ok(real) = std::fs::canonicalize(path) else { return Ok(()) };
    let Some(folder) = real.parent().filter(|_| real.is_file()) else { return Ok(()) };
    if folder.join(LOCK_FILE).symlink_metadata().is_ok() {
        return Err(fail(
            path,
            format!(
                "is a file of {}, a grin run's or dataset's folder (it holds {LOCK_FILE}): writing over it would \
                 damage that run or dataset; name another output",
                folder.display()
            ),
        ));
    }
    Ok(())
}
