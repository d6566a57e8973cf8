//! The lock on a folder grin writes into: a dataset (grin-store) or a run
//! folder (grin-train), each `DIR/grin.lock`, so that two processes never
//! write one folder at once and nothing rewrites a folder in use.
//!
//! The OS's advisory file lock (std's `File::try_lock`: `flock` on Unix,
//! `LockFileEx` on Windows) is released when the process ends, however it
//! ends: a killed holder leaves no stale lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::Path;

/// The lock file's name in a locked folder.
pub const LOCK_FILE: &str = "grin.lock";

/// Whether other holders may share the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    Exclusive,
    Shared,
}

/// What [`try_lock`] found.
#[derive(Debug)]
pub enum Locked {
    /// The lock, held until the file is dropped.
    Held(File),
    /// Another process holds it (in a mode that excludes this one); the
    /// file is open, for what its holder wrote in it.
    Busy(File),
    /// The filesystem has no locks (some network mounts): the caller goes
    /// on without one rather than refusing; the file is open all the same.
    Unsupported(File),
}

/// Opens the lock file at `path` (made when missing, never emptied) and
/// tries to lock it in `mode`, without waiting. A lock file this process
/// cannot write (another user's, a read-only mount) is opened read-only,
/// which the OS's lock accepts as well.
pub fn try_lock(path: &Path, mode: LockMode) -> io::Result<Locked> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .or_else(|_| File::open(path))?;
    let taken = match mode {
        LockMode::Exclusive => file.try_lock(),
        LockMode::Shared => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => Ok(Locked::Held(file)),
        Err(TryLockError::WouldBlock) => Ok(Locked::Busy(file)),
        Err(TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => Ok(Locked::Unsupported(file)),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exclusive_lock_excludes_every_other_and_shared_ones_share() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let held = try_lock(&path, LockMode::Exclusive).unwrap();
        assert!(matches!(held, Locked::Held(_)));
        assert!(matches!(try_lock(&path, LockMode::Exclusive).unwrap(), Locked::Busy(_)));
        assert!(matches!(try_lock(&path, LockMode::Shared).unwrap(), Locked::Busy(_)));
        drop(held);
        let (a, b) = (try_lock(&path, LockMode::Shared).unwrap(), try_lock(&path, LockMode::Shared).unwrap());
        assert!(matches!((&a, &b), (Locked::Held(_), Locked::Held(_))));
        assert!(matches!(try_lock(&path, LockMode::Exclusive).unwrap(), Locked::Busy(_)));
    }
}
