//! One error type; every variant names the file (or dataset folder) at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    // `error`, not `source`: as a source the OS message would print twice
    // in a chain ("path: No space left on device: No space left on device").
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    /// The file is not what the store expects: not JSON, another program's
    /// file, a newer format version, or fields that contradict each other.
    #[error("{}: {message}", path.display())]
    Format { path: PathBuf, message: String },
    /// A manifest names a file outside its dataset folder.
    #[error("{}: file name {name:?} points outside the dataset folder (only plain file names are allowed)", manifest.display())]
    UnsafePath { manifest: PathBuf, name: String },
    #[error("{}: {actual} bytes, expected {expected} (truncated, or not this dataset's file)", path.display())]
    Size { path: PathBuf, expected: u64, actual: u64 },
    /// The dataset folder already holds shards made from another config or layout.
    #[error("{}: {message}", dir.display())]
    Conflict { dir: PathBuf, message: String },
    /// Another process holds the dataset's lock (`lock.rs`).
    #[error("{}: {message}", path.display())]
    Locked { path: PathBuf, message: &'static str },
    /// A shard whose bytes no longer hash to the manifest's checksum.
    #[error("{}: checksum {actual}, the manifest says {expected}: the shard was damaged or rewritten (run `grin verify`)", path.display())]
    Checksum { path: PathBuf, expected: String, actual: String },
    /// `--merge` found parts that do not make one dataset.
    #[error("{}: cannot merge: {message}", dir.display())]
    Merge { dir: PathBuf, message: String },
    #[error("generating samples {first}..{end}: {error}")]
    Generate { first: u64, end: u64, error: grin_image::InputError },
    /// A record whose labels or boxes no model may train on.
    #[error("{}: record {index}: {message} (run `grin verify`)", path.display())]
    BadRecord { path: PathBuf, index: u64, message: String },
    #[error("record {index} is out of range: the dataset has {len} records")]
    Index { index: u64, len: u64 },
    #[error("batch is {got:?} (width, height, channels) but the dataset's records are {expected:?}")]
    BatchShape { expected: (u32, u32, u32), got: (u32, u32, u32) },
    /// A bad argument from the caller (shard range, batch size, fractions).
    #[error("{0}")]
    Usage(String),
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        StoreError::Io { path: path.into(), error }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        StoreError::Format { path: path.into(), message: message.into() }
    }
}

pub(crate) type Result<T, E = StoreError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::StoreError;

    #[test]
    fn io_errors_name_the_file_once() {
        let err = StoreError::io("/data/shard-00000.bin", std::io::Error::from(std::io::ErrorKind::StorageFull));
        // What `anyhow`'s `{:#}` prints: the error, then each source in turn.
        let mut chain = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            chain += &format!(": {s}");
            source = s.source();
        }
        assert_eq!(chain.matches("no storage space").count(), 1, "{chain}");
        assert!(chain.starts_with("/data/shard-00000.bin: "), "{chain}");
    }
}
