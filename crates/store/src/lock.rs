//! Advisory locks on a dataset folder, so that two processes never write
//! one dataset at once, and no process rewrites a dataset a run is
//! training from (a shard truncated under a memory map kills the reader
//! with SIGBUS).
//!
//! The lock is `DIR/grin.lock`, taken through `grin_output::try_lock` (the
//! OS's advisory lock: a killed writer leaves no stale lock). Who holds it
//! how:
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
use grin_output::{try_lock, LockMode, Locked, LOCK_FILE};
use std::fs::File;
use std::path::Path;

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub(crate) struct FolderLock {
    _file: File,
}

/// Locks `dir` for writing (`Exclusive` for a whole dataset or a merge,
/// `Shared` for a part), or says who is in the way. A filesystem without
/// locks (some network mounts) is written without one rather than refused.
pub(crate) fn lock_for_writing(dir: &Path, mode: LockMode) -> Result<Option<FolderLock>> {
    let path = dir.join(LOCK_FILE);
    match try_lock(&path, mode).map_err(|e| StoreError::io(&path, e))? {
        Locked::Held(file) => Ok(Some(FolderLock { _file: file })),
        Locked::Busy(_) => Err(StoreError::Locked {
            path: dir.to_path_buf(),
            message: match mode {
                LockMode::Exclusive => "in use by another grin process (a precompute or merge writing it, or a run training from it); wait for it to finish, or write to another folder",
                LockMode::Shared => "another grin process is writing this whole dataset or merging it; wait for it to finish",
            },
        }),
        Locked::Unsupported(_) => Ok(None),
    }
}

/// A shared lock for a reader, refused while a whole-dataset writer or a
/// merge is at work. A dataset whose lock file cannot be opened (a
/// read-only mount where none was made), or on a filesystem without locks,
/// is read without a lock: nothing can rewrite it there through grin
/// either. A lock file that is a link, a folder or a FIFO is refused by
/// name, as writers refuse it.
pub(crate) fn lock_for_reading(dir: &Path) -> Result<Option<FolderLock>> {
    let path = dir.join(LOCK_FILE);
    match try_lock(&path, LockMode::Shared) {
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Err(StoreError::io(&path, e)),
        Ok(Locked::Held(file)) => Ok(Some(FolderLock { _file: file })),
        Ok(Locked::Busy(_)) => Err(StoreError::Locked {
            path: dir.to_path_buf(),
            message: "a grin precompute or merge is writing this dataset; wait for it to finish",
        }),
        Ok(Locked::Unsupported(_)) | Err(_) => Ok(None),
    }
}

/// An error when a whole-dataset writer or a merge is writing `dir` now
/// (it holds the lock exclusively): a dataset without its manifest yet is
/// being written, not missing. Otherwise nothing, without taking the lock.
pub fn refuse_if_being_written(dir: &Path) -> Result<()> {
    let path = dir.join(LOCK_FILE);
    if !path.is_file() {
        return Ok(());
    }
    match try_lock(&path, LockMode::Shared) {
        Ok(Locked::Busy(_)) => Err(StoreError::Locked {
            path: dir.to_path_buf(),
            message: "a grin precompute or merge is writing this dataset now; wait for it to finish",
        }),
        _ => Ok(()),
    }
}

/// Creates (or opens) a shard's temporary file and locks it exclusively,
/// so that two part writers whose ranges overlap never write one shard at
/// once. The file is emptied only once the lock is held.
pub(crate) fn create_locked(tmp: &Path) -> Result<File> {
    let file = match try_lock(tmp, LockMode::Exclusive).map_err(|e| StoreError::io(tmp, e))? {
        // Without locks on this filesystem it is written unlocked, as a folder there is.
        Locked::Held(file) | Locked::Unsupported(file) => file,
        Locked::Busy(_) => {
            return Err(StoreError::Locked {
                path: tmp.to_path_buf(),
                message: "another grin precompute is writing this shard (overlapping --shards ranges?)",
            })
        }
    };
    file.set_len(0).map_err(|e| StoreError::io(tmp, e))?;
    Ok(file)
}

/// What a dataset folder held before a writer came, so that one refused
/// with nothing written leaves it as it was (issue 90, rounds 16 and 17: a
/// refused writer left its `grin.lock`, and a later one took the folder for
/// grin's and replaced the user's `shard-00000.bin`).
pub(crate) struct Before {
    existed: bool,
    names: std::collections::BTreeSet<String>,
}

impl Before {
    /// Notes `dir`, and refuses it when no grin writer ever held it (no
    /// lock file, no manifest) but it holds files under a dataset's names:
    /// they are someone else's, and a shard was replaced as "left by a
    /// stopped run".
    pub(crate) fn note(dir: &Path) -> Result<Before> {
        let names = Before::note_names(dir);
        let grins = [LOCK_FILE, crate::MANIFEST_FILE].iter().any(|name| names.contains(*name));
        let dataset = |n: &&String| crate::is_dataset_file_name(n.strip_suffix(".tmp").unwrap_or(n));
        if let (false, Some(name)) = (grins, names.iter().find(dataset)) {
            return Err(StoreError::Conflict {
                dir: dir.to_path_buf(),
                message: format!(
                    "holds {name}, which no grin writer made there (the folder has no {LOCK_FILE}): name an empty \
                     folder, or move the file out"
                ),
            });
        }
        Ok(Before { existed: dir.is_dir(), names })
    }

    /// After a writer failed: when it wrote nothing but its lock file, the
    /// lock file goes (taken first, so no other writer is at work), and so
    /// does the folder when it made it.
    pub(crate) fn restore_if_untouched(&self, dir: &Path) {
        let path = dir.join(LOCK_FILE);
        let mut now = Before::note_names(dir);
        if self.names.contains(LOCK_FILE) || !now.remove(LOCK_FILE) || now != self.names {
            return;
        }
        if let Ok(Locked::Held(_file)) = try_lock(&path, LockMode::Exclusive) {
            let _ = std::fs::remove_file(&path);
        }
        if !self.existed {
            let _ = std::fs::remove_dir(dir);
        }
    }

    fn note_names(dir: &Path) -> std::collections::BTreeSet<String> {
        let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
        entries.map(|e| e.file_name().to_string_lossy().into_owned()).collect()
    }
}
