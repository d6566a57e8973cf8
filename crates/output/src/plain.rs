//! Opening a file the user named for reading, as its writer's counterpart:
//! a plain file only. Opening a FIFO waits for a writer, forever, and a
//! read from one waits too; a device such as `/dev/zero` never ends. So the
//! file is opened non-blocking (which changes nothing for a plain file's
//! reads), and what the opened handle is, not what the name was a moment
//! before, decides.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Why a folder is not read as a file.
pub const FOLDER: &str = "is a folder, not a file";
/// Why a FIFO, device or socket is not read.
pub const NOT_A_FILE: &str = "not a regular file (a FIFO, device or socket)";

/// `path` opened for reading when it is a plain file (a link to one is
/// followed). Any other kind is an error of kind `InvalidInput` whose text
/// is [`FOLDER`] or [`NOT_A_FILE`]; a failed open is the system's error.
pub fn open_plain(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    // A socket cannot be opened at all (ENXIO, "No such device or
    // address", round 12): said as what it is, as a FIFO is.
    let file = options.open(path).map_err(|e| match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => io::Error::new(io::ErrorKind::InvalidInput, NOT_A_FILE),
        _ => e,
    })?;
    let metadata = file.metadata()?;
    if metadata.is_dir() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, FOLDER));
    }
    if !metadata.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, NOT_A_FILE));
    }
    Ok(file)
}

/// `path`'s bytes, opened as [`open_plain`] opens it: at most `limit` + 1
/// of them, so that a caller refusing a file past `limit` sees that it is,
/// without reading a huge one whole.
pub fn read_plain(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_plain(path)?.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_device_and_a_folder_are_refused_at_once_and_a_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "x").unwrap();
        assert!(open_plain(&file).is_ok());
        let fifo = dir.path().join("f");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // No writer: a blocking open would never return.
        let e = open_plain(&fifo).unwrap_err();
        assert_eq!((e.kind(), e.to_string()), (io::ErrorKind::InvalidInput, NOT_A_FILE.to_string()));
        assert_eq!(open_plain(Path::new("/dev/zero")).unwrap_err().to_string(), NOT_A_FILE);
        assert_eq!(open_plain(dir.path()).unwrap_err().to_string(), FOLDER);
        assert_eq!(open_plain(&dir.path().join("absent")).unwrap_err().kind(), io::ErrorKind::NotFound);
        // Round 12: a socket was "No such device or address".
        let socket = dir.path().join("s.png");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert_eq!(open_plain(&socket).unwrap_err().to_string(), NOT_A_FILE);
    }

    #[test]
    fn a_read_stops_one_byte_past_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "abcdef").unwrap();
        assert_eq!(read_plain(&file, 3).unwrap(), b"abcd");
        assert_eq!(read_plain(&file, u64::MAX).unwrap(), b"abcdef");
        assert_eq!(read_plain(Path::new("/dev/zero"), 3).unwrap_err().to_string(), NOT_A_FILE);
    }
}
