//! The lock on a folder grin writes into: a dataset (grin-store) or a run
//! folder (grin-train), each `DIR/grin.lock`, so that two processes never
//! write one folder at once and nothing rewrites a folder in use.
//!
//! The OS's advisory file lock (std's `File::try_lock`: `flock` on Unix,
//! `LockFileEx` on Windows) is released when the process ends, however it
//! ends: a killed holder leaves no stale lock.
//!
//! The lock file is opened without following a symbolic link and without
//! waiting (a link would have the holder's PID written wherever it points,
//! a dangling one would create a file outside the folder, and a FIFO would
//! block the open): anything but a plain file is refused by name, with
//! what to do.

use crate::{fail, OutputError};
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

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
/// tries to lock it in `mode`, without waiting.
///
/// An exclusive holder writes into its folder (and into the lock file, its
/// PID), so the file must be writable. A shared holder only reads: a lock
/// file it cannot write (another user's, a read-only mount) is opened
/// read-only, which the OS's lock accepts as well.
///
/// A lock file that is a symbolic link, a folder, a FIFO or a device, or one
/// an exclusive holder cannot write, is an error of kind
/// [`io::ErrorKind::InvalidInput`] whose message says what it is and what
/// to do (callers add the path).
pub fn try_lock(path: &Path, mode: LockMode) -> io::Result<Locked> {
    let file = open_lock_file(path, mode)?;
    let try_once = || match mode {
        LockMode::Exclusive => file.try_lock(),
        LockMode::Shared => file.try_lock_shared(),
    };
    // A lock its holder has just released may still be held for a moment
    // by a child process the holder (any thread of it) was starting: the
    // child shares the descriptor from its fork until its exec closes it.
    // A test that wrote a dataset and then opened it was refused so, while
    // another test started `mkfifo`. Busy only when it stays held.
    let mut taken = try_once();
    for _ in 0..BUSY_RETRIES {
        if !matches!(taken, Err(TryLockError::WouldBlock)) {
            break;
        }
        std::thread::sleep(BUSY_PAUSE);
        taken = try_once();
    }
    outcome(file, taken)
}

/// How long a lock found held is tried again before it counts as busy:
/// 10 × 10 ms, far longer than a fork-to-exec window, and unnoticed by a
/// user told the folder is in use.
const BUSY_RETRIES: usize = 10;
const BUSY_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// What a try at locking `file` found.
fn outcome(file: File, taken: Result<(), TryLockError>) -> io::Result<Locked> {
    match taken {
        Ok(()) => Ok(Locked::Held(file)),
        Err(TryLockError::WouldBlock) => Ok(Locked::Busy(file)),
        Err(TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => Ok(Locked::Unsupported(file)),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// A folder a command writes its files into (`grin mine --out`, `grin eval
/// --out`), made when missing and held for that command alone until
/// dropped: two at once shared it, each one's files replacing the other's
/// while both said they wrote it (issue 90, rounds 19 and 20). The folder
/// itself is locked (the OS's lock on its descriptor): no [`LOCK_FILE`] is
/// made, which marks a run's or a dataset's folder. A folder it made and
/// that is still empty when dropped is removed, so a refused command
/// leaves nothing behind.
#[derive(Debug)]
pub struct HeldFolder {
    dir: PathBuf,
    made: bool,
    _lock: File,
}

impl Drop for HeldFolder {
    fn drop(&mut self) {
        if self.made {
            // Fails, as it should, once the command wrote anything there.
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Makes `dir` when missing and holds it ([`HeldFolder`]); another holder
/// is refused at once, by name. (Where the filesystem has no locks, the
/// folder is made and not held.)
pub fn hold_folder(dir: &Path) -> Result<HeldFolder, OutputError> {
    let made = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| fail(dir, format!("cannot create: {e}")))?;
    let folder = File::open(dir).map_err(|e| fail(dir, format!("cannot open: {e}")))?;
    let taken = folder.try_lock();
    let refused = match outcome(folder, taken) {
        Ok(Locked::Held(lock) | Locked::Unsupported(lock)) => {
            return Ok(HeldFolder { dir: dir.to_path_buf(), made, _lock: lock })
        }
        Ok(Locked::Busy(_)) => fail(
            dir,
            "another grin command is writing into this folder: wait for it to end, or name another output folder",
        ),
        Err(e) => fail(dir, format!("cannot lock: {e}")),
    };
    // A folder made here and refused is left as it was found: absent.
    if made {
        let _ = std::fs::remove_dir(dir);
    }
    Err(refused)
}

/// The lock file, opened as [`try_lock`] says; a plain file or an error.
fn open_lock_file(path: &Path, mode: LockMode) -> io::Result<File> {
    let mut writable = OpenOptions::new();
    writable.read(true).write(true).create(true).truncate(false);
    let opened = no_follow(&mut writable).open(path).or_else(|e| match mode {
        LockMode::Shared if e.kind() == io::ErrorKind::PermissionDenied || is_read_only_fs(&e) => {
            no_follow(OpenOptions::new().read(true)).open(path)
        }
        _ => Err(e),
    });
    let file = match opened {
        Ok(file) => file,
        // Say what is there rather than the errno (ELOOP, EISDIR, EACCES).
        Err(e) => return Err(describe(path, mode, e)),
    };
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Err(odd(what_is(&metadata.file_type())));
    }
    // Another name of some file (a hard link): the PID a holder writes
    // would replace what it holds (issue 90, round 9: a model linked as a
    // run's grin.lock was cut to 4 bytes).
    #[cfg(unix)]
    if std::os::unix::fs::MetadataExt::nlink(&metadata) > 1 {
        return Err(odd(HARD_LINK));
    }
    Ok(file)
}

/// `options` set to refuse a symbolic link as the last part of the path,
/// and not to wait on a FIFO (which a plain file never does anyway).
fn no_follow(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options
}

#[cfg(unix)]
fn is_read_only_fs(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EROFS)
}

#[cfg(not(unix))]
fn is_read_only_fs(_: &io::Error) -> bool {
    false
}

/// The error for a lock file that could not be opened: what the path is,
/// when it is something odd, else the OS's reason.
fn describe(path: &Path, mode: LockMode, e: io::Error) -> io::Error {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => odd(what_is(&m.file_type())),
        Ok(_) if e.kind() == io::ErrorKind::PermissionDenied && mode == LockMode::Exclusive => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the lock file cannot be written ({e}): a writer holds it and writes its PID there; make it \
                 writable (chmod u+w) or remove it"
            ),
        ),
        _ => e,
    }
}

const HARD_LINK: &str = "a hard link (one more name of a file)";

fn odd(what: &str) -> io::Error {
    // A lock file grin made holds only its holder's PID; a folder of that
    // name may hold anything, so it is moved aside, not removed.
    let what_to_do = match what {
        "a folder" => "move it elsewhere (it is not grin's) and run again",
        HARD_LINK => "remove this name (the file keeps its others) and run again",
        _ => "remove it (it holds no data) and run again",
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "is {what}, not a file grin made: grin locks a folder, or a shard it is writing, through a plain file \
             of that name, never through a link; {what_to_do}"
        ),
    )
}

fn what_is(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a folder"
    } else {
        "not a plain file"
    }
}

#[cfg(test)]
mod tests;
