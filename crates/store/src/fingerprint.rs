//! What a dataset was made from: every feature config key, the sample count
//! and a cheap identity of the source files, as canonical JSON plus its hash.

use crate::error::{Result, StoreError};
use grin_features::{FeatureConfig, PhotoCrops, SourceConfig};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// Keys of `[features]` that cannot change a stored sample, so changing
/// them does not make a dataset stale: the worker count (output is
/// bit-identical whatever it is) and the class balance (applied when
/// records are drawn, not when they are written).
const IGNORED_FEATURE_KEYS: [&str; 2] = ["workers", "balance"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// xxh3-64 (hex) of `canonical(config)`.
    pub hash: String,
    /// `{"features": {...}, "samples": N, "split": "train", "generator": V, "source_files": {...}}`.
    pub config: Value,
}

impl Fingerprint {
    /// The fingerprint of `samples` training samples generated from `features`.
    /// Stats the source's files (never reads them), so it is cheap even for big sets.
    pub(crate) fn new(features: &FeatureConfig, samples: u64) -> Result<Fingerprint> {
        // Through text rather than `to_value`: an f32 like 0.2 then reads
        // back as 0.2, not as its f64 widening 0.20000000298023224.
        let mut features_value: Value = serde_json::to_string(features)
            .and_then(|text| serde_json::from_str(&text))
            .map_err(|e| StoreError::Usage(format!("cannot serialize the feature config: {e}")))?;
        if let Value::Object(map) = &mut features_value {
            for key in IGNORED_FEATURE_KEYS {
                map.remove(key);
            }
        }
        let mut config = Map::new();
        config.insert("features".into(), features_value);
        config.insert("samples".into(), Value::from(samples));
        config.insert("split".into(), Value::from("train"));
        config.insert("generator".into(), Value::from(grin_features::GENERATOR_VERSION));
        config.insert("source_files".into(), source_files(&features.source));
        Ok(Fingerprint::from_config(Value::Object(config)))
    }

    pub(crate) fn from_config(config: Value) -> Fingerprint {
        let hash = format!("{:016x}", xxh3_64(canonical(&config).as_bytes()));
        Fingerprint { hash, config }
    }

    /// Dotted keys whose values differ between `self` (stored) and `current`.
    /// Source files that are absent now are not compared: a dataset is often
    /// trained from on a machine that does not hold the raw source.
    pub(crate) fn differing_keys(&self, current: &Fingerprint) -> Vec<String> {
        let mut stored = BTreeMap::new();
        flatten("", &self.config, &mut stored);
        let mut now = BTreeMap::new();
        flatten("", &current.config, &mut now);
        let absent_roots: Vec<String> = now
            .iter()
            .filter(|(k, v)| k.starts_with("source_files.") && k.ends_with(".missing") && v.as_str() == "true")
            .map(|(k, _)| k.trim_end_matches("missing").to_string())
            .collect();
        let unverifiable = |key: &str| absent_roots.iter().any(|root| key.starts_with(root.as_str()));
        let mut keys: Vec<String> = stored
            .keys()
            .chain(now.keys())
            .filter(|k| stored.get(*k) != now.get(*k) && !unverifiable(k))
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// JSON with object keys sorted at every level, no whitespace: the same
/// config always gives the same bytes, whatever serde_json's map order is.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Leaves by dotted key; arrays are leaves (a range like `crop_scale` is one key).
fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&path, child, out);
            }
        }
        leaf => {
            if !prefix.is_empty() {
                out.insert(prefix.to_string(), canonical(leaf));
            }
        }
    }
}

/// A photo source's file of faces its annotations lack, if it has one.
fn unannotated(crops: &PhotoCrops) -> Option<(&'static str, &Path)> {
    crops.unannotated.as_deref().map(|p| ("crops.unannotated", p))
}

/// The file trees a source reads, by config key (`parts.<i>.<key>` inside a mix).
fn source_paths(source: &SourceConfig) -> Vec<(String, &Path)> {
    fn named<'a>(pairs: Vec<(&str, &'a Path)>) -> Vec<(String, &'a Path)> {
        pairs.into_iter().map(|(k, p)| (k.to_string(), p)).collect()
    }
    match source {
        SourceConfig::Synthetic { .. } => vec![],
        SourceConfig::Crops { root, backgrounds, .. } => {
            let mut paths = vec![("root", root.as_path())];
            if let Some(b) = backgrounds {
                paths.push(("backgrounds", b.as_path()));
            }
            named(paths)
        }
        SourceConfig::Wider { images, annotations } => named(vec![("images", images), ("annotations", annotations)]),
        SourceConfig::Celeba { images, bbox, attr } => named(vec![("images", images), ("bbox", bbox), ("attr", attr)]),
        SourceConfig::Jsonl { manifest } => named(vec![("manifest", manifest)]),
        SourceConfig::Caltech { root, crops } | SourceConfig::Fddb { root, crops } => {
            named(vec![("root", root.as_path())].into_iter().chain(unannotated(crops)).collect())
        }
        SourceConfig::CelebaAligned { images, attr, crops } => named(
            vec![("images", images.as_path()), ("attr", attr.as_path())]
                .into_iter()
                .chain(unannotated(crops))
                .collect(),
        ),
        SourceConfig::Negatives { images, mined, .. } => named(
            images
                .iter()
                .map(|p| ("images", p.as_path()))
                .chain(mined.iter().map(|p| ("mined", p.as_path())))
                .collect(),
        ),
        SourceConfig::Mix { parts, .. } => parts
            .iter()
            .enumerate()
            .flat_map(|(i, part)| source_paths(part).into_iter().map(move |(k, p)| (format!("parts.{i}.{k}"), p)))
            .collect(),
    }
}

/// The identity of the files `source` reads, as one hash: what an on-the-
/// fly run's checkpoint records, so that a resume over changed files is
/// refused as a precompute over them is (issue 90, round 20).
pub fn source_identity(source: &SourceConfig) -> String {
    format!("{:016x}", xxh3_64(canonical(&source_files(source)).as_bytes()))
}

/// Per source path: file count, total bytes and a hash of every file's
/// (relative name, size, mtime). Content is not read: identity must stay
/// cheap for sets of millions of images.
fn source_files(source: &SourceConfig) -> Value {
    let mut map = Map::new();
    for (key, path) in source_paths(source) {
        map.insert(key, tree_identity(path));
    }
    Value::Object(map)
}

fn tree_identity(root: &Path) -> Value {
    let mut files = Vec::new();
    if std::fs::metadata(root).is_err() {
        return serde_json::json!({ "missing": true });
    }
    walk(root, PathBuf::new(), &mut files);
    files.sort();
    let mut hasher = Xxh3::new();
    let mut bytes = 0u64;
    for (name, size, mtime) in &files {
        hasher.update(name.as_bytes());
        hasher.update(&[0]);
        hasher.update(&size.to_le_bytes());
        hasher.update(&mtime.to_le_bytes());
        bytes += size;
    }
    serde_json::json!({
        "files": files.len(),
        "bytes": bytes,
        "hash": format!("{:016x}", hasher.digest()),
    })
}

/// Unreadable entries are recorded by name with size 0 rather than failing:
/// the pipeline itself reports unreadable inputs with their path.
fn walk(path: &Path, relative: PathBuf, out: &mut Vec<(String, u64, i128)>) {
    let Ok(meta) = std::fs::metadata(path) else {
        out.push((relative.to_string_lossy().into_owned(), 0, 0));
        return;
    };
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else { return };
        for entry in entries.flatten() {
            let linked_dir = entry.file_type().is_ok_and(|t| t.is_symlink()) && entry.path().is_dir();
            if linked_dir {
                // Not followed: a link back up the tree would recurse until ELOOP.
                out.push((relative.join(entry.file_name()).to_string_lossy().into_owned(), 0, 0));
            } else {
                walk(&entry.path(), relative.join(entry.file_name()), out);
            }
        }
    } else {
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        out.push((relative.to_string_lossy().into_owned(), meta.len(), mtime));
    }
}

/// The refusal message for a stale dataset, e.g.
/// `the dataset was made from a different config (features.augment.flip, samples differ); ...`.
pub fn format_stale(keys: &[String]) -> String {
    format!(
        "the precomputed dataset was made from a different config: {} differ{}; \
         rerun `grin precompute` with this config, or pass --allow-stale to train on it anyway",
        keys.join(", "),
        if keys.len() == 1 { "s" } else { "" }
    )
}

#[cfg(test)]
mod tests;
