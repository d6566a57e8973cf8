//! A file read now and written back later (a model file that `grin
//! model-set` or `grin calibrate` changes in place): never written over a
//! newer one.
//!
//! Both ways at once, since each misses what the other catches:
//! - **Locked**: [`hold`] takes the OS's advisory lock on the file for the
//!   whole read-modify-write, so a second grin that holds it meanwhile is
//!   refused at once (two `grin model-set` runs on one file lost one of
//!   their changes, 6 times in 6).
//! - **Compared**: just before the rename that replaces it,
//!   [`Held::write_back`] checks that the file is still the one read
//!   (device and inode, size, modification time, content hash). A program
//!   that takes no lock (`cp`, an editor, a training run's final write)
//!   and changed it in between makes the write-back refused, the newer
//!   file kept (`grin calibrate` wrote its old model over one replaced
//!   1.5 s into its run).

use crate::{fail, OutputError};
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file held for rewriting: locked until dropped.
#[derive(Debug)]
pub struct Held {
    path: PathBuf,
    stamp: Stamp,
    /// The lock lives as long as this handle.
    _file: File,
}

/// What identifies the file's content as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
    hash: u64,
}

/// Holds `path` for rewriting: opens it (a plain file, without waiting on
/// a FIFO), locks it exclusively without waiting, and records what it
/// holds. Call before reading the file, so that what is read is what is
/// checked.
pub fn hold(path: &Path) -> Result<Held, OutputError> {
    // A file replaced between the open and the lock is opened again: the
    // lock must be on the file the path names.
    for _ in 0..3 {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(fail(
                    path,
                    "another grin process is rewriting it (grin model-set or grin calibrate): wait for it to end, \
                     then run again",
                ))
            }
            // No locks on this filesystem: the comparison still guards it.
            Err(std::fs::TryLockError::Error(_)) => {}
        }
        let held = file.metadata().map_err(|e| fail(path, format!("cannot inspect: {e}")))?;
        let now = std::fs::metadata(path).map_err(|e| fail(path, format!("cannot inspect: {e}")))?;
        if identity(&held) == identity(&now) {
            let stamp = stamp(&file, &held).map_err(|e| fail(path, format!("cannot read: {e}")))?;
            return Ok(Held { path: path.to_path_buf(), stamp, _file: file });
        }
    }
    Err(fail(path, "is being replaced again and again while grin opens it: run again when it is not"))
}

impl Held {
    /// Writes `bytes` over the file as [`crate::write_file`] does, unless
    /// it changed since it was held: then nothing is written and the error
    /// says so.
    pub fn write_back(&self, bytes: &[u8]) -> Result<(), OutputError> {
        crate::write_checked(&self.path, &[], |w| w.write_all(bytes), Some(&|| self.unchanged()))
    }

    /// An error unless the file at the path is still the one held.
    fn unchanged(&self) -> Result<(), OutputError> {
        let changed = || {
            fail(
                &self.path,
                "changed since grin read it (another program wrote it meanwhile): not written over, so the newer \
                 file is kept; run the command again on it",
            )
        };
        let file = open(&self.path)?;
        let m = file.metadata().map_err(|e| fail(&self.path, format!("cannot inspect: {e}")))?;
        if identity(&m) != (self.stamp.device, self.stamp.inode) || m.len() != self.stamp.len {
            return Err(changed());
        }
        let now = stamp(&file, &m).map_err(|e| fail(&self.path, format!("cannot read: {e}")))?;
        if now != self.stamp {
            return Err(changed());
        }
        Ok(())
    }
}

/// The file for reading: a plain file, opened without waiting (a FIFO
/// would wait for a writer forever).
fn open(path: &Path) -> Result<File, OutputError> {
    crate::open_plain(path).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidInput => {
            fail(path, "is not a plain file: it cannot be changed in place (write the result elsewhere)")
        }
        _ => fail(path, format!("cannot open: {e}")),
    })
}

fn stamp(file: &File, m: &Metadata) -> io::Result<Stamp> {
    use std::io::Seek;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut reader = file;
    // From the start, wherever an earlier read left the handle.
    reader.seek(io::SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let (device, inode) = identity(m);
    Ok(Stamp { device, inode, len: m.len(), modified: m.modified().ok(), hash: hasher.digest() })
}

#[cfg(unix)]
fn identity(m: &Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn identity(_: &Metadata) -> (u64, u64) {
    (0, 0)
}
