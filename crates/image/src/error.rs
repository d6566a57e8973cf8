//! Errors that name the file (and line) at fault, and counted skips.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a source does with a sample it cannot read (`features.on_bad_sample`):
/// stop with an error that names it, or skip it and count the skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBadSample {
    Error,
    Skip,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// `path:line: message` (line 0 = the whole file).
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    BadInput { path: PathBuf, line: Option<usize>, kind: BadInputKind, message: String },
    #[error("{0}")]
    Config(String),
}

/// What was wrong with an input; skips are counted per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BadInputKind {
    CorruptImage,
    UnreadableFile,
    MalformedAnnotation,
    BadBox,
    EmptyFolder,
    /// Past `features.max_image_pixels` (or `grin-detect --max-pixels`).
    ImageTooLarge,
}

impl BadInputKind {
    pub(crate) const ALL: [BadInputKind; 6] = [
        BadInputKind::CorruptImage,
        BadInputKind::UnreadableFile,
        BadInputKind::MalformedAnnotation,
        BadInputKind::BadBox,
        BadInputKind::EmptyFolder,
        BadInputKind::ImageTooLarge,
    ];

    pub(crate) fn describe(self) -> &'static str {
        match self {
            BadInputKind::CorruptImage => "corrupt or truncated image",
            BadInputKind::UnreadableFile => "unreadable file",
            BadInputKind::MalformedAnnotation => "malformed annotation line",
            BadInputKind::BadBox => "box outside the image or of zero size",
            BadInputKind::EmptyFolder => "empty folder",
            BadInputKind::ImageTooLarge => "image over the size bound",
        }
    }
}

impl InputError {
    pub fn bad(path: impl Into<PathBuf>, line: Option<usize>, kind: BadInputKind, message: impl Into<String>) -> Self {
        InputError::BadInput { path: path.into(), line, kind, message: message.into() }
    }
}

/// Thread-safe skip counts, printed at the end of a run under `on_bad_sample = "skip"`.
#[derive(Debug, Default)]
pub struct SkipCounts {
    counts: [AtomicU64; BadInputKind::ALL.len()],
}

impl SkipCounts {
    pub fn record(&self, kind: BadInputKind) {
        let i = BadInputKind::ALL.iter().position(|k| *k == kind).expect("every kind is listed");
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self, kind: BadInputKind) -> u64 {
        let i = BadInputKind::ALL.iter().position(|k| *k == kind).expect("every kind is listed");
        self.counts[i].load(Ordering::Relaxed)
    }

    /// Adds `other`'s counts to these (a mix reports its parts' skips as one).
    pub fn absorb(&self, other: &SkipCounts) {
        for (mine, theirs) in self.counts.iter().zip(&other.counts) {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// `skipped 3 inputs: 2 corrupt or truncated image, 1 malformed annotation line`, or None.
    pub fn summary(&self) -> Option<String> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let parts: Vec<String> = BadInputKind::ALL
            .iter()
            .filter(|k| self.get(**k) > 0)
            .map(|k| format!("{} {}", self.get(*k), k.describe()))
            .collect();
        Some(format!("skipped {total} inputs: {}", parts.join(", ")))
    }
}

/// Under `Skip`, counts a bad input and carries on; otherwise it is the error.
pub fn skip_or_fail(on_bad: OnBadSample, skips: &SkipCounts, error: InputError) -> Result<(), InputError> {
    match (&error, on_bad) {
        (InputError::BadInput { kind, .. }, OnBadSample::Skip) => {
            skips.record(*kind);
            Ok(())
        }
        _ => Err(error),
    }
}
