//! How an output's bytes reach its file: a regular file is replaced by a
//! temporary file written whole beside it, in two steps ([`stage`], then
//! [`Staged::commit`]) so that several files can be written as one; a
//! device or a FIFO is written through.

use crate::{fail, folder_of, temp, OutputError};
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A target's new bytes, whole and synced in a temporary file in its
/// folder (`temp.rs`). Dropped without a commit, the temporary file is
/// deleted and the target left as it was.
pub(crate) struct Staged {
    tmp: tempfile::NamedTempFile,
    target: PathBuf,
}

/// Writes what `fill` writes to a temporary file beside `target`, with the
/// permissions of the file it will replace.
pub(crate) fn stage(
    target: &Path,
    existing: Option<&Metadata>,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<Staged, OutputError> {
    let dir = folder_of(target);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp = temp::create(dir, &name)
        .map_err(|e| fail(target, format!("cannot create a temporary file in {}: {e}", dir.display())))?;
    let tmp_path = tmp.path().to_path_buf();
    let on_tmp = |what: &str, e: io::Error| fail(target, format!("{what} {}: {e}", tmp_path.display()));
    if let Some(m) = existing {
        std::fs::set_permissions(&tmp_path, m.permissions()).map_err(|e| on_tmp("cannot set the permissions of", e))?;
    }
    {
        let mut w = io::BufWriter::new(tmp.as_file_mut());
        fill(&mut w).and_then(|()| w.flush()).map_err(|e| on_tmp("cannot write", e))?;
    }
    tmp.as_file().sync_all().map_err(|e| on_tmp("cannot sync", e))?;
    Ok(Staged { tmp, target: target.to_path_buf() })
}

impl Staged {
    /// Renames the new bytes over the target.
    pub(crate) fn commit(self) -> Result<(), OutputError> {
        let Staged { tmp, target } = self;
        let tmp_path = tmp.path().to_path_buf();
        tmp.persist(&target)
            .map_err(|e| fail(&target, format!("cannot rename into place {}: {}", tmp_path.display(), e.error)))?;
        // The rename is durable once the folder's entry is on disk too.
        File::open(folder_of(&target)).and_then(|d| d.sync_all()).ok();
        Ok(())
    }
}

/// Devices and FIFOs are written in place; anything else is refused.
pub(crate) fn write_through(
    path: &Path,
    m: &Metadata,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), OutputError> {
    let kind = kind_of(m);
    let mut file = match kind {
        Kind::CharDevice => OpenOptions::new().write(true).open(path),
        Kind::Fifo => open_fifo(path)?,
        Kind::Other(what) => return Err(fail(path, format!("is {what}: not a file grin can write"))),
    }
    .map_err(|e| fail(path, format!("cannot open for writing: {e}")))?;
    let mut w = io::BufWriter::new(&mut file);
    fill(&mut w).and_then(|()| w.flush()).map_err(|e| fail(path, format!("cannot write: {e}")))
}

enum Kind {
    CharDevice,
    Fifo,
    Other(&'static str),
}

#[cfg(unix)]
fn kind_of(m: &Metadata) -> Kind {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_char_device() {
        Kind::CharDevice
    } else if t.is_fifo() {
        Kind::Fifo
    } else if t.is_block_device() {
        Kind::Other("a block device")
    } else if t.is_socket() {
        Kind::Other("a socket")
    } else {
        Kind::Other("not a regular file")
    }
}

#[cfg(not(unix))]
fn kind_of(_: &Metadata) -> Kind {
    Kind::Other("not a regular file")
}

/// A FIFO opened without waiting: with no reader that fails (ENXIO) at
/// once instead of blocking forever. Once a reader is known to be there,
/// it is opened again for ordinary blocking writes.
#[cfg(unix)]
fn open_fifo(path: &Path) -> Result<io::Result<File>, OutputError> {
    use std::os::unix::fs::OpenOptionsExt;
    match OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(probe) => {
            let file = OpenOptions::new().write(true).open(path);
            drop(probe);
            Ok(file)
        }
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            Err(fail(path, "is a FIFO with no reader: start the reader first"))
        }
        Err(e) => Ok(Err(e)),
    }
}

#[cfg(not(unix))]
fn open_fifo(path: &Path) -> Result<io::Result<File>, OutputError> {
    Err(fail(path, "is not a regular file"))
}
