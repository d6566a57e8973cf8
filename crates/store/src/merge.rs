//! Joining the part manifests of `grin precompute --shards A..B` runs into
//! one dataset.

use crate::error::{Result, StoreError};
use crate::lock::lock_for_writing;
use crate::manifest::{
    read_json, write_json_atomic, ClassCounts, Manifest, ShardEntry, MANIFEST_FILE, MANIFEST_FORMAT, PART_FORMAT,
};
use grin_features::SceneClass;
use grin_output::LockMode;
use std::ops::Range;
use std::path::Path;

/// Joins the part manifests of `dir` into `manifest.json`, checking that
/// they describe one dataset: same fingerprint and layout, every shard
/// exactly once, every shard file present at its size.
pub fn merge(dir: &Path) -> Result<Manifest> {
    let fail = |message: String| StoreError::Merge { dir: dir.to_path_buf(), message };
    let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))?;
    let mut part_paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("part-") && name.ends_with(".json") {
            part_paths.push(entry.path());
        }
    }
    part_paths.sort();
    if part_paths.is_empty() {
        return Err(fail("no part-*.json files: run `grin precompute --shards A..B` first".into()));
    }
    let _lock = lock_for_writing(dir, LockMode::Exclusive)?;
    let mut parts = Vec::new();
    for path in &part_paths {
        let part: Manifest = read_json(path, PART_FORMAT)?;
        part.check(path)?;
        parts.push((path.file_name().unwrap_or_default().to_string_lossy().into_owned(), part));
    }
    let (first_name, first) = &parts[0];
    let mut owner: Vec<Option<(usize, ShardEntry)>> = vec![None; first.shard_count as usize];
    for (i, (name, part)) in parts.iter().enumerate() {
        let same = part.fingerprint.hash == first.fingerprint.hash
            && part.layout == first.layout
            && part.samples == first.samples
            && part.records_per_shard == first.records_per_shard;
        if !same {
            let keys = first.fingerprint.differing_keys(&part.fingerprint);
            let detail = if keys.is_empty() { "layout, samples or shard size".into() } else { keys.join(", ") };
            return Err(fail(format!("{name} and {first_name} were made from different settings ({detail} differ)")));
        }
        let [a, _] = part.part.expect("part manifests carry their range");
        for (index, shard) in (a..).zip(&part.shards) {
            if let Some((other, _)) = &owner[index as usize] {
                return Err(fail(format!("shard {index} is in both {} and {name}", parts[*other].0)));
            }
            owner[index as usize] = Some((i, shard.clone()));
        }
    }
    let missing = missing_ranges(&owner);
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|r| format!("{}..{}", r.start, r.end)).collect();
        return Err(fail(format!(
            "shards {} are in no part manifest: run `grin precompute --shards A..B` for them",
            list.join(", ")
        )));
    }
    let shards: Vec<ShardEntry> = owner.into_iter().map(|o| o.expect("no shard is missing").1).collect();
    for shard in &shards {
        let path = dir.join(&shard.file);
        let actual = std::fs::metadata(&path).map_err(|e| StoreError::io(&path, e))?.len();
        if actual != shard.bytes {
            return Err(StoreError::Size { path, expected: shard.bytes, actual });
        }
    }
    let mut class_counts = ClassCounts::default();
    for part in parts.iter().map(|(_, p)| p) {
        for class in SceneClass::ALL {
            class_counts.add(class, part.class_counts.get(class));
        }
    }
    let manifest = Manifest { format: MANIFEST_FORMAT.into(), part: None, class_counts, shards, ..first.clone() };
    let path = dir.join(MANIFEST_FILE);
    manifest.check(&path)?;
    write_json_atomic(&path, &manifest)?;
    Ok(manifest)
}

fn missing_ranges<T>(owner: &[Option<T>]) -> Vec<Range<u64>> {
    let mut ranges: Vec<Range<u64>> = Vec::new();
    for (i, o) in owner.iter().enumerate() {
        if o.is_none() {
            match ranges.last_mut() {
                Some(r) if r.end == i as u64 => r.end += 1,
                _ => ranges.push(i as u64..i as u64 + 1),
            }
        }
    }
    ranges
}
