//! The temporary file [`crate::write_with`] writes beside its target, and
//! the ones a killed writer left behind.
//!
//! A temporary file is named `.TARGET.grin-XXXXXX.tmp` (one recognisable
//! pattern) and locked by its writer (the OS's advisory lock, released
//! however the process ends) from just after it is made until it is
//! renamed or removed. A writer killed mid-write (SIGTERM during `grin
//! export` or `grin model-set`, `kill -9`) leaves its temporary file, full
//! size; the next write into that folder, by any grin command, removes each
//! one whose lock is free, and says so on standard error.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Between the prefix (`.TARGET`) and the random part of every temporary name.
const MARK: &str = ".grin-";
/// The end of every temporary name.
const SUFFIX: &str = ".tmp";

/// A temporary file is made, then locked: in between (microseconds) its
/// lock is free. One untouched for this long with a free lock has no
/// writer, however slow the disk.
const STALE_AFTER: Duration = Duration::from_secs(2);

/// A new temporary file in `dir` for `target_name`, locked for its writer.
pub(crate) fn create(dir: &Path, target_name: &str) -> io::Result<tempfile::NamedTempFile> {
    sweep_once(dir);
    let prefix = format!(".{target_name}{MARK}");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(SUFFIX);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // A new file gets the mode any program's would (0666 less the umask).
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let tmp = builder.tempfile_in(dir)?;
    match tmp.as_file().try_lock() {
        // A filesystem without locks: the file's age alone marks it stale.
        Ok(()) | Err(std::fs::TryLockError::Error(_)) => Ok(tmp),
        Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::other("a sweeping grin locked it first")),
    }
}

/// Whether `name` is one of [`create`]'s temporary files.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(SUFFIX) && name.contains(MARK)
}

/// Removes the stale temporary files in `dir`, once per folder per
/// process: a command that writes many files into one folder (`grin mine`'s
/// crops, a run's checkpoints) lists it once.
fn sweep_once(dir: &Path) {
    static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let first = SWEPT.lock().map(|mut s| s.get_or_insert_with(HashSet::new).insert(key)).unwrap_or(true);
    if first {
        for path in sweep(dir) {
            eprintln!(
                "note: removed {}, a temporary file left by a grin command stopped while it wrote (the file it was \
                 writing was left as it was)",
                path.display()
            );
        }
    }
}

/// Removes every stale temporary file in `dir`; returns their paths.
/// Nothing here is an error: a file that cannot be opened, locked or
/// removed is left where it is.
pub(crate) fn sweep(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_temp_name) {
            continue;
        }
        let path = entry.path();
        if is_stale(&path) && std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// A plain file (never followed through a link) older than [`STALE_AFTER`]
/// whose lock is free: its writer is gone.
fn is_stale(path: &Path) -> bool {
    let Ok(file) = open_no_follow(path) else { return false };
    let Ok(m) = file.metadata() else { return false };
    let old = m.modified().ok().and_then(|t| SystemTime::now().duration_since(t).ok()).is_some_and(|a| a > STALE_AFTER);
    m.is_file() && old && file.try_lock().is_ok()
}

fn open_no_follow(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options.open(path)
}
