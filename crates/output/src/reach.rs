//! The files an input folder stands for include the ones its links reach:
//! a photo in a source's folder that is a link to a file elsewhere is read
//! as one of its photos, and `grin features preview --out` named at that
//! file replaced it (issue 90, round 12).

use crate::same_file;
use std::collections::HashSet;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

/// Entries a walk looks at before it gives up: a photo folder holds tens of
/// thousands; a walk of `/` must still end.
const MOST_ENTRIES: usize = 2_000_000;

/// The first link under `folder` that reaches the file `out` describes.
/// Links to folders are followed once each (a link to a folder above would
/// loop).
pub(crate) fn link_to(folder: &Path, out: &Metadata) -> Option<PathBuf> {
    let mut folders = vec![folder.to_path_buf()];
    let mut linked: HashSet<PathBuf> = HashSet::new();
    let mut seen = 0;
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            seen += 1;
            if seen > MOST_ENTRIES {
                return None;
            }
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => folders.push(path),
                Ok(kind) if kind.is_symlink() => match std::fs::metadata(&path) {
                    Ok(target)
                        if target.is_dir() && std::fs::canonicalize(&path).is_ok_and(|real| linked.insert(real)) =>
                    {
                        folders.push(path)
                    }
                    Ok(target) if target.is_dir() => {}
                    Ok(target) if same_file(&target, out) => return Some(path),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    None
}
