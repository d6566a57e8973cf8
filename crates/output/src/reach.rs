//! Where a command's inputs lie once every link is followed. An input
//! folder stands for the files under it and for what its links reach: a
//! photo in a source's folder that is a link to a file elsewhere, or a
//! subfolder that is a link to a folder elsewhere, is read as one of its
//! photos (issue 90: `grin features preview --out` replaced such a photo in
//! round 12, and in round 15 through a linked folder; `eval --out` and
//! `mine --out` wrote their reports into the folder a link's photo lies in).
//! An input file stands for where its name lies and where it resolves.
//!
//! Folders are compared by path and by identity (device and inode): a bind
//! mount shows one folder under a second path that no link resolves (round
//! 18: `features preview --out` replaced a photo through one). Every folder
//! under an input folder is known by identity too: a bind mount of a
//! source's `images/` reaches no input folder's own identity (round 22).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Entries a walk looks at before it gives up: a photo folder holds tens of
/// thousands; a walk of `/` must still end.
const MOST_ENTRIES: usize = 2_000_000;

/// An input as the user named it (or the link that reaches it), and where
/// it lies, resolved.
struct Place {
    named: PathBuf,
    at: PathBuf,
}

/// A folder's identity, whatever path shows it.
type Id = (u64, u64);

#[cfg(unix)]
fn id_of(path: &Path) -> Option<Id> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn id_of(_: &Path) -> Option<Id> {
    None
}

/// Every place the inputs stand for, resolved.
pub(crate) struct Reach {
    /// Input folders, and every folder a link under one reaches.
    folders: Vec<Place>,
    /// Their identities, in the same order.
    folder_ids: Vec<Option<Id>>,
    /// The identity of each folder under one of them, with that one's index.
    inner_ids: HashMap<Id, usize>,
    /// Input files (where each name lies, and where it resolves), and every
    /// file a link under an input folder reaches.
    files: Vec<Place>,
}

impl Reach {
    pub(crate) fn of(inputs: &[&Path]) -> Reach {
        let mut reach =
            Reach { folders: Vec::new(), folder_ids: Vec::new(), inner_ids: HashMap::new(), files: Vec::new() };
        let mut walk = Vec::new();
        for input in inputs {
            let named = || input.to_path_buf();
            match std::fs::canonicalize(input) {
                Ok(at) if at.is_dir() => {
                    walk.push(at.clone());
                    reach.folders.push(Place { named: named(), at });
                    continue;
                }
                Ok(at) => reach.files.push(Place { named: named(), at }),
                Err(_) => {}
            }
            // Where the name itself lies (a link named as an input is
            // replaced by a write into its folder, not followed).
            if let Some(at) = own_place(input) {
                reach.files.push(Place { named: named(), at });
            }
        }
        reach.follow_links(walk);
        reach.folder_ids = reach.folders.iter().map(|f| id_of(&f.at)).collect();
        reach
    }

    /// Walks the folders in `walk` (the input folders, in `self.folders`'
    /// order), adding what each link under them reaches and each folder's
    /// identity; a linked folder is walked once (a link to a folder above
    /// would loop).
    fn follow_links(&mut self, walk: Vec<PathBuf>) {
        let mut walked: HashSet<PathBuf> = walk.iter().cloned().collect();
        // Each folder to walk, with the input folder it stands for.
        let mut walk: Vec<(PathBuf, usize)> = walk.into_iter().enumerate().map(|(i, dir)| (dir, i)).collect();
        let mut seen = 0;
        while let Some((dir, input)) = walk.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                seen += 1;
                if seen > MOST_ENTRIES {
                    return;
                }
                let path = entry.path();
                match entry.file_type() {
                    Ok(kind) if kind.is_dir() => {
                        if let Some(id) = id_of(&path) {
                            self.inner_ids.entry(id).or_insert(input);
                        }
                        walk.push((path, input));
                    }
                    Ok(kind) if kind.is_symlink() => {
                        let Ok(at) = std::fs::canonicalize(&path) else { continue };
                        if !at.is_dir() {
                            self.files.push(Place { named: path, at });
                        } else if !stands_for(&dir, &at) {
                            continue;
                        } else if walked.insert(at.clone()) {
                            walk.push((at.clone(), self.folders.len()));
                            self.folders.push(Place { named: path, at });
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The input folder a resolved output path lies in, by path or, for a
    /// second path to it, by one of the output's folders being that folder.
    pub(crate) fn folder_holding(&self, resolved: &Path) -> Option<&Path> {
        let by_path = self.folders.iter().find(|f| resolved.starts_with(&f.at));
        let by_id = || {
            let ids: Vec<Id> = resolved.ancestors().filter_map(id_of).collect();
            let i = self.folder_ids.iter().position(|id| id.is_some_and(|id| ids.contains(&id)));
            let i = i.or_else(|| ids.iter().find_map(|id| self.inner_ids.get(id).copied()))?;
            Some(&self.folders[i])
        };
        by_path.or_else(by_id).map(|f| f.named.as_path())
    }

    /// The input a resolved output path is.
    pub(crate) fn file_at(&self, resolved: &Path) -> Option<&Path> {
        self.files.iter().find(|f| f.at == resolved).map(|f| f.named.as_path())
    }

    /// An input that lies inside the resolved folder `folder`, by path or
    /// by one of the input's folders being `folder`.
    pub(crate) fn inside(&self, folder: &Path) -> Option<&Path> {
        let mut all = self.folders.iter().chain(&self.files);
        if let Some(p) = all.clone().find(|p| p.at.starts_with(folder)) {
            return Some(p.named.as_path());
        }
        let wanted = id_of(folder)?;
        // Inputs share their folders (a source's photos): each folder is
        // looked at once, and a walk up stops at one already seen.
        let mut seen: HashSet<&Path> = HashSet::new();
        all.find(|p| p.at.ancestors().take_while(|a| seen.insert(a)).any(|a| id_of(a) == Some(wanted)))
            .map(|p| p.named.as_path())
    }

    /// The first link under the output folder `folder` that reaches an
    /// input, with that input: a file written there is written through it.
    pub(crate) fn link_into(&self, folder: &Path) -> Option<(PathBuf, &Path)> {
        let mut walk = vec![folder.to_path_buf()];
        let mut seen = 0;
        while let Some(dir) = walk.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                seen += 1;
                if seen > MOST_ENTRIES {
                    return None;
                }
                let path = entry.path();
                match entry.file_type() {
                    Ok(kind) if kind.is_dir() => walk.push(path),
                    Ok(kind) if kind.is_symlink() => {
                        let Ok(at) = std::fs::canonicalize(&path) else { continue };
                        if let Some(input) = self.file_at(&at).or_else(|| self.folder_holding(&at)) {
                            return Some((path, input));
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

/// Whether a link in the folder `dir` to the folder `at` is one a source
/// reads through: not one to a folder above it (`..`, `/`, a loop: it
/// would stand for everything around the source, and a stray `root -> /`
/// refused every output, walking the disk for seconds, round 16 of issue
/// 90), nor into the kernel's own trees.
fn stands_for(dir: &Path, at: &Path) -> bool {
    !dir.starts_with(at) && !["/proc", "/sys", "/dev"].iter().any(|kernel| at.starts_with(kernel))
}

/// Where `path`'s name lies: its folder resolved, joined with its name.
fn own_place(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let folder = crate::folder_of(path);
    std::fs::canonicalize(folder).ok().map(|f| f.join(name))
}
