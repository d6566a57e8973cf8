//! Advisory locks on a dataset folder, so that two processes never write
//! one dataset at once, and no process rewrites a dataset a run is
//! training from (a shard truncated under a memory map kills the reader
//! with SIGBUS).
//!
//! The lock is `DIR/grin.lock`, locked with the OS's advisory file lock
//! (std's `File::try_lock`: `flock` on Unix, `LockFileEx` on Windows), which
//! the OS releases when the process ends, however it ends: a killed writer
//! leaves no stale lock. Who holds it how:
//!
//! | holder                                   | mode      |
//! |------------------------------------------|-----------|
//! | a writer of the whole dataset, `--merge` | exclusive |
//! | a `--shards A..B` writer                 | shared    |
//! | an open [`crate::Store`] (a reader)      | shared    |
//!
//! Job-array tasks write disjoint shard ranges side by side, so part
//! writers share the lock; each shard's temporary file is locked
//! exclusively while it is written, so two parts that overlap never write
//! one shard at once.

use crate::error::{Result, StoreError};
use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

pub(crate) const LOCK_FILE: &str = "grin.lock";

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub(crate) struct FolderLock {
    _file: File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Exclusive,
    Shared,
}

/// Locks `dir` for writing (`Exclusive` for a whole dataset or a merge,
/// `Shared` for a part), or says who is in the way. A filesystem without
/// locks (some network mounts) is written without one rather than refused.
pub(crate) fn lock_for_writing(dir: &Path, mode: Mode) -> Result<Option<FolderLock>> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    let taken = match mode {
        Mode::Exclusive => file.try_lock(),
        Mode::Shared => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => Ok(Some(FolderLock { _file: file })),
        Err(TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: dir.to_path_buf(),
            message: match mode {
                Mode::Exclusive => "in use by another grin process (a precompute or merge writing it, or a run training from it); wait for it to finish, or write to another folder",
                Mode::Shared => "another grin process is writing this whole dataset or merging it; wait for it to finish",
            },
        }),
        Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => Ok(None),
        Err(TryLockError::Error(e)) => Err(StoreError::io(&path, e)),
    }
}

/// A shared lock for a reader, refused while a whole-dataset writer or a
/// merge is at work. A dataset on a read-only mount, or one whose lock file
/// cannot be made, is read without a lock: nothing can rewrite it there
/// through grin either.
pub(crate) fn lock_for_reading(dir: &Path) -> Result<Option<FolderLock>> {
    let path = dir.join(LOCK_FILE);
    let opened = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
    let Ok(file) = opened.or_else(|_| File::open(&path)) else {
        return Ok(None);
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(FolderLock { _file: file })),
        Err(TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: dir.to_path_buf(),
            message: "a grin precompute or merge is writing this dataset; wait for it to finish",
        }),
        Err(TryLockError::Error(_)) => Ok(None),
    }
}

/// Creates (or opens) a shard's temporary file and locks it exclusively,
/// so that two part writers whose ranges overlap never write one shard at
/// once. The file is emptied only once the lock is held.
pub(crate) fn create_locked(tmp: &Path) -> Result<File> {
    let file =
        OpenOptions::new().write(true).create(true).truncate(false).open(tmp).map_err(|e| StoreError::io(tmp, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(StoreError::Locked {
                path: tmp.to_path_buf(),
                message: "another grin precompute is writing this shard (overlapping --shards ranges?)",
            })
        }
        Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {}
        Err(TryLockError::Error(e)) => return Err(StoreError::io(tmp, e)),
    }
    file.set_len(0).map_err(|e| StoreError::io(tmp, e))?;
    Ok(file)
}
